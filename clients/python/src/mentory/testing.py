"""Testing a plugin's handlers without a daemon: an in-memory host for a :class:`mentory.plugin.Plugin`.

:class:`PluginHost` (blocking, for plain pytest functions) and :class:`AsyncPluginHost` (asyncio) host
one plugin the way mentoryd does, in this process, with no socket: a test calls the plugin's methods
as a client would, from a caller it chooses (:class:`Caller`: uid, gid, groups, client name), takes
its topics' snapshots and reads what it published::

    import mentory.testing
    from habits_plugin import plugin

    def test_from_diary_reads_the_callers_diary():
        with mentory.testing.PluginHost(plugin, access_rules=["deny uid=1000 diary.*"]) as host:
            owner = mentory.testing.Caller(uid=1001)
            host.call("diary.add", {"recordDate": "2026-11-20", "title": "walk", "text": "by the river",
                                    "emotion": "EMOTION_PLEASANT"}, caller=owner)
            assert [h.name for h in host.call("fromDiary", caller=owner).habits] == ["walk"]
            with pytest.raises(mentory.MentoryError) as refused:
                host.call("fromDiary", caller=mentory.testing.Caller(uid=1000))
            assert refused.value.code == mentory.ErrorCode.PERMISSION_DENIED

docs/PLUGINS.md ("Test it without a daemon") has this test in full.

What the host does as the daemon does:

- **The built-in namespaces** ``diary``, ``mentor`` and ``reachability`` are hosted in memory, with the
  daemon's checks, wire codes and messages (one diary entry per day, the seven emotions, the field
  limits...) and the changes they publish on their topics. ``host.call("diary.add", ...)`` sets up what
  a test needs; ``host.call("fromDiary", ...)`` (or ``"habits.fromDiary"``) calls the plugin.
- **Fakes** serve any other namespace the plugin calls (another plugin's, a handler's):
  :meth:`AsyncPluginHost.fake` takes the namespace (or its ``service`` descriptor, for typed requests)
  and a function per method, ``(request, call) -> reply``, plain or ``async``.
- **Calls on the caller's behalf** (``await call.call("diary.list", {})`` in a handler) act for the
  caller of the call being answered: they pass the daemon's gate with that caller's credentials and
  ``access_rules`` (``access.rules``, in the daemon's syntax, e.g. ``"deny uid=1000 diary.*"``), the
  methods' privileges, the call's deadline, the caller's per-uid budget (``uid_requests_in_flight``),
  and the cycle check. A refusal raises the same :class:`~mentory.MentoryError` the real client raises:
  ``PERMISSION_DENIED``, reason ``session.denied_on_behalf``, saying it was called on the caller's behalf
  by the plugin's namespace.
- **The plugin's calls** go through its real code: its handlers get the request decoded from bytes and
  a :class:`~mentory.plugin.Call`, their replies are encoded against the schema, an exception other than
  ``MentoryError`` answers ``INTERNAL`` (chained to the original, so the test shows its traceback), a
  handler past the call's deadline (``timeout``, 5 s by default as ``limits.pluginCallTimeoutMilliseconds``)
  is cancelled and the call fails ``DEADLINE_EXCEEDED``. Calls to the plugin pass the gate too.
- **Topics**: ``await plugin.publish(...)`` in a handler is recorded; :meth:`AsyncPluginHost.published`
  returns a topic's changes, decoded, oldest first (the built-ins' too). :meth:`AsyncPluginHost.snapshot`
  takes a topic's snapshot for a caller the daemon would let subscribe (its ``subscribe:`` rules and
  the topic's ``reads``).
- While hosted, the plugin is ``REGISTERED`` and ``plugin.client`` is a client of the in-memory host,
  acting as ``plugin_caller`` (root unless given), the plugin's own user.

Not modelled: subscriptions themselves (take :meth:`AsyncPluginHost.snapshot` and
:meth:`AsyncPluginHost.published` instead), storage failures, the diary's reply size budget, a
reachability peer's connection closing, and the daemon's other namespaces (``session``, ``storage``, ...).
"""

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Type, TypeVar, Union

from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message

from . import _builtins
from . import _messages as pb
from ._access import AccessPolicy, Credentials
from ._codec import decode_reply, encode_request
from ._connection import DEFAULT_MAX_INCOMING_FRAME, PROTOCOL_VERSION
from ._enums import ErrorCode
from ._schema import METHODS, _message_class
from .aio import AsyncClient, ConnectOptions, split_target
from .errors import ConnectionClosed, MentoryError, Timeout
from .plugin import Call, Plugin, PluginState, _caller_error, _closure, _encode, _invoke, _Session, _within_deadline

__all__ = [
    "PluginHost",
    "AsyncPluginHost",
    "Caller",
    "FakeCall",
    "Publication",
    "DENIED_ON_BEHALF",
]

#: The reason of a call refused on the caller's behalf (``MentoryError.reason``).
DENIED_ON_BEHALF = "session.denied_on_behalf"
#: The daemon's default ``limits.pluginCallTimeoutMilliseconds``, in seconds.
DEFAULT_CALL_TIMEOUT = 5.0
#: The daemon's default ``limits.uidRequestsInFlight``.
DEFAULT_UID_REQUESTS_IN_FLIGHT = 256

T = TypeVar("T")
Types = Tuple[Optional[Type[Message]], Optional[Type[Message]]]
#: A fake's method: ``(request, call) -> reply``, plain or ``async``.
FakeHandler = Callable[[Any, "FakeCall"], Any]


@dataclass(frozen=True)
class Caller:
    """Who makes a call: what the kernel would report of the client's process (``uid``, ``gid``, which
    defaults to ``uid``, and supplementary ``groups``, which ``gid=N`` rules match too), its ``Hello``'s
    ``client_name`` and its connection number. ``Caller()`` is root; ``Caller(known=False)`` a peer whose
    credentials the kernel did not report (it matches every ``deny`` rule and no ``allow`` rule)."""

    uid: int = 0
    gid: Optional[int] = None
    groups: Tuple[int, ...] = ()
    pid: int = 1
    client_name: str = "test"
    connection: int = 1
    known: bool = True

    def credentials(self) -> Optional[Credentials]:
        if not self.known:
            return None
        return Credentials(self.uid, self.uid if self.gid is None else self.gid, frozenset(self.groups))

    def wire(self) -> pb.PluginCaller:
        """The caller as a plugin sees it (``Call.caller``)."""
        if not self.known:
            return pb.PluginCaller(known=False, client_name=self.client_name, connection=self.connection)
        return pb.PluginCaller(
            known=True,
            pid=self.pid,
            uid=self.uid,
            gid=self.uid if self.gid is None else self.gid,
            client_name=self.client_name,
            connection=self.connection,
        )


CallerLike = Union[Caller, int, None]


def _caller(value: CallerLike) -> Caller:
    if value is None:
        return Caller()
    if isinstance(value, Caller):
        return value
    if isinstance(value, int):
        return Caller(uid=value)
    raise TypeError(f"caller must be a mentory.testing.Caller or a uid, not {type(value).__name__}")


@dataclass(frozen=True)
class Publication:
    """One change published on a topic, decoded with the topic's change type."""

    topic: str
    change: Any
    #: The namespace that published it.
    namespace: str


@dataclass(frozen=True)
class _Context:
    """A call being answered: for whom, on which way (the namespaces it came through) and until when."""

    caller: Caller
    chain: Tuple[str, ...]
    #: ``time.monotonic()`` seconds.
    deadline: float
    #: The deadline as the call was given it, for the DEADLINE_EXCEEDED message.
    timeout_ms: int

    @property
    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


@dataclass(frozen=True)
class FakeCall:
    """A call a fake answers, as its function sees it: who called (``caller``, as a plugin's
    :class:`~mentory.plugin.Call` has it) and the way it came (``chain``: the namespaces it came
    through, e.g. ``("habits",)``). ``await call.call(...)`` calls further on the same caller's behalf."""

    namespace: str
    method: str
    caller: pb.PluginCaller
    chain: Tuple[str, ...]
    deadline: float
    _host: "AsyncPluginHost" = field(repr=False, compare=False)
    _context: _Context = field(repr=False, compare=False)

    async def call(
        self,
        namespace: str,
        method: Any = None,
        request: Any = None,
        *,
        request_type: Optional[Type[Message]] = None,
        reply_type: Optional[type] = None,
    ) -> Any:
        """Calls another namespace on behalf of this call's caller, as a handler's ``context.call`` does."""
        namespace, method_name, request = split_target(namespace, method, request)
        types = self._host._types(namespace, method_name)
        body = encode_request(namespace, method_name, request, request_type or types[0])
        reply = await self._host._on_behalf(self._context, self.namespace, namespace, method_name, body)
        return decode_reply(namespace, method_name, reply, reply_type or types[1])


@dataclass
class _Method:
    request_type: Optional[Type[Message]]
    reply_type: Optional[Type[Message]]
    privilege: int = pb.PRIVILEGE_UNSPECIFIED


class _Namespace:
    """One namespace the host serves."""

    name: str
    version: int = 1
    methods: Dict[str, _Method]
    topics: Dict[str, Types]
    service: Optional[ServiceDescriptor] = None

    async def answer(self, method: str, body: bytes, context: _Context) -> bytes:
        raise NotImplementedError

    async def snapshot(self, topic: str) -> bytes:
        raise NotImplementedError


def _decode(namespace: str, method: str, message_type: Optional[Type[Message]], body: bytes) -> Any:
    if message_type is None:
        return body
    request = message_type()
    try:
        request.ParseFromString(body)
    except DecodeError as error:
        raise MentoryError(
            ErrorCode.INVALID_ARGUMENT,
            f"the body of '{namespace}.{method}' is not a valid {message_type.DESCRIPTOR.full_name}: {error}",
        ) from None
    return request


def _service_methods(service: ServiceDescriptor) -> Dict[str, _Method]:
    return {
        method.name: _Method(
            _message_class(method.input_type),
            _message_class(method.output_type),
            method.GetOptions().Extensions[pb.privilege],
        )
        for method in service.methods
    }


def _service_topics(service: ServiceDescriptor) -> Dict[str, Types]:
    pool = service.file.pool
    return {
        topic.name: (
            _message_class(pool.FindMessageTypeByName(topic.change)),
            _message_class(pool.FindMessageTypeByName(topic.snapshot)),
        )
        for topic in service.GetOptions().Extensions[pb.topic]
    }


class _Builtin(_Namespace):
    """``diary``, ``mentor`` or ``reachability``, as mentoryd serves them (mentory._builtins)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.name = handler.namespace
        self.service = pb.DOMAIN_DESCRIPTOR.services_by_name[self.name.capitalize()]
        self.version = self.service.GetOptions().Extensions[pb.namespace_version]
        self.methods = _service_methods(self.service)
        self.topics = _service_topics(self.service)

    async def answer(self, method: str, body: bytes, context: _Context) -> bytes:
        request = _decode(self.name, method, self.methods[method].request_type, body)
        reply: Message = self.handler.answer(method, request, context.caller.wire())
        return reply.SerializeToString()

    async def snapshot(self, topic: str) -> bytes:
        return self.handler.snapshot().SerializeToString()  # type: ignore[no-any-return]


class _Fake(_Namespace):
    """A namespace a test serves with functions."""

    def __init__(
        self, host: "AsyncPluginHost", target: Union[str, ServiceDescriptor], handlers: Mapping[str, FakeHandler]
    ) -> None:
        self.host = host
        if isinstance(target, ServiceDescriptor):
            options = target.GetOptions()
            self.name = options.Extensions[pb.namespace]
            if not self.name:
                raise ValueError(f"service {target.full_name} has no (mentory.v1.namespace) option")
            self.version = options.Extensions[pb.namespace_version] or 1
            self.service = target
            self.methods = _service_methods(target)
            self.topics = {}  # a fake serves methods only
            unknown = sorted(set(handlers) - set(self.methods))
            if unknown:
                raise ValueError(
                    f"namespace '{self.name}' has no method {', '.join(repr(name) for name in unknown)} "
                    f"(it has: {', '.join(self.methods) or 'none'})"
                )
        elif isinstance(target, str):
            if not target or "." in target:
                raise ValueError(f"a namespace is a name without dots, not {target!r}")
            self.name = target
            self.methods = {name: _Method(None, None) for name in handlers}
            self.topics = {}
        else:
            raise TypeError(
                "fake takes a namespace's name or its service descriptor (my_pb2.DESCRIPTOR.services_by_name[...])"
            )
        self.handlers = dict(handlers)

    async def answer(self, method: str, body: bytes, context: _Context) -> bytes:
        handler = self.handlers.get(method)
        if handler is None:
            raise MentoryError(
                ErrorCode.INTERNAL,
                f"the fake of namespace '{self.name}' answers no '{method}': give host.fake a function for it",
            )
        declared = self.methods[method]
        request = _decode(self.name, method, declared.request_type, body)
        call = FakeCall(
            namespace=self.name,
            method=method,
            caller=context.caller.wire(),
            chain=context.chain,
            deadline=context.deadline,
            _host=self.host,
            _context=context,
        )
        try:
            reply = await _invoke(handler, request, call)
        except MentoryError as error:
            raise MentoryError(int(error.code) or ErrorCode.INTERNAL, error.message, error.reason) from error
        except Exception as error:  # noqa: BLE001 - what a plugin's caller would get: INTERNAL
            raise MentoryError(
                ErrorCode.INTERNAL, f"{self.name}.{method} failed: {type(error).__name__}: {error}"
            ) from error
        if declared.reply_type is not None:
            try:
                return _encode(reply, declared.reply_type, f"the reply of '{self.name}.{method}'")
            except TypeError as error:
                raise MentoryError(ErrorCode.INTERNAL, f"{self.name}.{method} failed: {error}") from error
        if reply is None:
            return b""
        if isinstance(reply, Message):
            return reply.SerializeToString()
        if isinstance(reply, (bytes, bytearray, memoryview)):
            return bytes(reply)
        raise MentoryError(
            ErrorCode.INTERNAL,
            f"{self.name}.{method} failed: a fake without a service descriptor answers a message or bytes, "
            f"not {type(reply).__name__}",
        )


class _Hosted(_Namespace):
    """The plugin under test: calls reach it as the daemon forwards them."""

    def __init__(self, host: "AsyncPluginHost", plugin: Plugin) -> None:
        self.host = host
        self.plugin = plugin
        self.name = plugin.namespace
        self.version = plugin.version
        self.service = plugin.service
        self.methods = _service_methods(plugin.service)
        self.topics = dict(plugin.topics)

    async def answer(self, method: str, body: bytes, context: _Context) -> bytes:
        call_id = next(self.host._call_ids)
        forwarded = pb.PluginCall(
            call_id=call_id,
            namespace=self.name,
            method=method,
            body=body,
            timeout_ms=max(1, int(context.remaining * 1000)),
            caller=context.caller.wire(),
        )
        handler_call = Call(
            call_id=call_id,
            namespace=self.name,
            method=method,
            snapshot_topic="",
            caller=forwarded.caller,
            deadline=context.deadline,
            _client=self.host._client,
        )
        self.host._pending[call_id] = context
        try:
            return await self._respond(forwarded, handler_call, context, f"{self.name}.{method}")
        finally:
            del self.host._pending[call_id]

    async def snapshot(self, topic: str) -> bytes:
        forwarded = pb.PluginCall(call_id=next(self.host._call_ids), namespace=self.name, snapshot_topic=topic)
        context = self.host._context(Caller(), (), None)
        handler_call = Call(
            call_id=forwarded.call_id,
            namespace=self.name,
            method="",
            snapshot_topic=topic,
            caller=forwarded.caller,
            deadline=context.deadline,
        )
        return await self._respond(forwarded, handler_call, context, f"the snapshot of {topic}")

    async def _respond(self, forwarded: pb.PluginCall, handler_call: Call, context: _Context, what: str) -> bytes:
        """The plugin's answer, as ``Plugin._answer`` makes it and the daemon passes it on."""
        work = asyncio.ensure_future(self.plugin._respond(forwarded, handler_call))  # noqa: SLF001
        if not await _within_deadline(work, context.remaining):
            await asyncio.gather(work, return_exceptions=True)
            raise MentoryError(
                ErrorCode.DEADLINE_EXCEEDED,
                f"{self.name}.{forwarded.method} was not answered within its deadline of {context.timeout_ms} ms",
            )
        try:
            return work.result()
        except Exception as error:  # noqa: BLE001 - as the plugin sends it, and the daemon passes it on
            raise _caller_error(error, what) from error


class _HostConnection:
    """The plugin's connection, in memory: what ``mentory.aio.AsyncClient`` and the plugin send on it
    reaches the host (``plugin.call``, ``plugin.publish``, ``session.describe``, and calls of the plugin's
    own, as ``plugin_caller``)."""

    def __init__(self, host: "AsyncPluginHost") -> None:
        self._host = host
        self._closed = False
        self.welcome = pb.Welcome(
            protocol_version=PROTOCOL_VERSION,
            server_version="mentory.testing",
            max_frame_length=1024 * 1024,
            epoch=1,
        )

    @property
    def max_frame_length(self) -> int:
        return self.welcome.max_frame_length

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True

    async def request(self, namespace: str, method: str, body: bytes, timeout: Optional[float]) -> bytes:
        if self._closed:
            raise ConnectionClosed("the in-memory host was closed")
        try:
            return await asyncio.wait_for(self._host._from_plugin(namespace, method, body), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"mentoryd did not answer {namespace}.{method} within {timeout} s") from None


class AsyncPluginHost:
    """Hosts ``plugin`` in memory with the built-in namespaces and the fakes a test gives, for asyncio
    tests (``async with AsyncPluginHost(plugin) as host: await host.call(...)``); see the module's
    documentation. :class:`PluginHost` is the same for plain test functions.

    - ``access_rules``: ``access.rules`` as the daemon's configuration writes them, deciding every call
      (the test's own, the plugin's, and those made on a caller's behalf); ``daemon_uid`` is the user the
      daemon would run as, trusted like root (``None``: only root).
    - ``clock``: the time, in seconds since the epoch (``time.time``), that the built-ins stamp.
    - ``timeout``: each call's deadline unless the call gives one (the daemon's 5 s plugin call timeout).
    - ``uid_requests_in_flight``: a uid's budget (``limits.uidRequestsInFlight``); a call made on a
      caller's behalf while its uid has that many calls in flight fails ``TOO_MANY_REQUESTS``.
    - ``plugin_caller``: who the plugin is when it calls through ``plugin.client`` (root by default).
    """

    def __init__(
        self,
        plugin: Plugin,
        *,
        access_rules: Iterable[str] = (),
        daemon_uid: Optional[int] = None,
        clock: Callable[[], float] = time.time,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        uid_requests_in_flight: int = DEFAULT_UID_REQUESTS_IN_FLIGHT,
        plugin_caller: Optional[Caller] = None,
    ) -> None:
        if not isinstance(plugin, Plugin):
            raise TypeError("AsyncPluginHost hosts a mentory.plugin.Plugin")
        problems = plugin.problems()
        if problems:
            raise ValueError(f"the {plugin.namespace} plugin does not match its schema: " + "; ".join(problems))
        if isinstance(access_rules, str):
            raise TypeError("access_rules is a list of rules, e.g. ['deny uid=1000 diary.*']")
        self.plugin = plugin
        self.policy = AccessPolicy(access_rules, daemon_uid)
        self.timeout = timeout
        self.uid_requests_in_flight = uid_requests_in_flight
        self.plugin_caller = plugin_caller or Caller(client_name=f"{plugin.namespace}-plugin", connection=0)
        self._clock = clock
        #: Every change published so far, oldest first.
        self.publications: List[Publication] = []
        self._call_ids = itertools.count(1)
        self._pending: Dict[int, _Context] = {}
        self._in_flight: Dict[Optional[int], int] = {}
        now_ms = lambda: int(self._clock() * 1000)  # noqa: E731
        self._namespaces: Dict[str, _Namespace] = {}
        for handler in (
            _builtins.Mentor(self._builtin_published, now_ms),
            _builtins.Reachability(self._builtin_published, now_ms),
            _builtins.Diary(self._builtin_published, now_ms),
        ):
            self._namespaces[handler.namespace] = _Builtin(handler)
        if plugin.namespace in self._namespaces:
            raise ValueError(
                f"namespace '{plugin.namespace}' is a built-in one; a plugin serves a namespace of its own"
            )
        self._hosted = _Hosted(self, plugin)
        self._namespaces[plugin.namespace] = self._hosted
        self._connection = _HostConnection(self)
        options = ConnectOptions(
            socket_path="(mentory.testing: in memory)",
            client_name=self.plugin_caller.client_name,
            timeout=timeout,
            max_incoming_frame=DEFAULT_MAX_INCOMING_FRAME,
            trusted_uids=None,
        )
        self._client = AsyncClient(self._connection, options)  # type: ignore[arg-type]
        self._session: Optional[_Session] = None

    # -- set-up ----------------------------------------------------------------------------------

    async def start(self) -> "AsyncPluginHost":
        """Makes the plugin registered with this host (``plugin.state`` ``REGISTERED``, ``publish`` and
        ``plugin.client`` working); the first call does it if the test did not."""
        if self._session is not None:
            return self
        plugin = self.plugin
        if plugin._loop is not None or plugin._session is not None:  # noqa: SLF001
            raise RuntimeError(f"the {plugin.namespace} plugin is serving or hosted already")
        session = _Session(self._connection, self._client)  # type: ignore[arg-type]
        session.registered = True
        session.ready.set()
        self._session = session
        plugin._session = session  # noqa: SLF001
        plugin._reply = pb.PluginRegisterReply(  # noqa: SLF001
            plugin=plugin.namespace, epoch=1, call_timeout_ms=int(self.timeout * 1000)
        )
        plugin._last_error = None  # noqa: SLF001
        plugin._set_state(PluginState.REGISTERED)  # noqa: SLF001
        return self

    async def close(self) -> None:
        """Ends the plugin's registration with this host (``plugin.state`` ``STOPPED``)."""
        session, self._session = self._session, None
        if session is None:
            return
        session.registered = False
        if self.plugin._session is session:  # noqa: SLF001
            self.plugin._session = None  # noqa: SLF001
            self.plugin._reply = None  # noqa: SLF001
            self.plugin._set_state(PluginState.STOPPED)  # noqa: SLF001

    async def __aenter__(self) -> "AsyncPluginHost":
        return await self.start()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    def fake(
        self,
        namespace: Union[str, ServiceDescriptor],
        methods: Optional[Mapping[str, FakeHandler]] = None,
        **handlers: FakeHandler,
    ) -> None:
        """Serves ``namespace`` with functions, one per method: ``host.fake("streaks", current=fn)`` or
        ``host.fake(streaks_pb2.DESCRIPTOR.services_by_name["Streaks"], {"current": fn})``.

        Each function takes ``(request, call)`` (a :class:`FakeCall`) and returns the reply, plain or
        ``async``; raising :class:`~mentory.MentoryError` answers with that error. Given the namespace's
        ``service`` descriptor, requests come decoded and replies may be messages or dicts, and callers may
        send dicts (its privileges apply too); given only a name, requests come as bytes and replies are
        messages or bytes (callers pass ``reply_type=``). A namespace faked again is replaced."""
        functions = dict(methods or {})
        functions.update(handlers)
        fake = _Fake(self, namespace, functions)
        if fake.name in ("session", "plugin", "storage", "daemon", "debug"):
            raise ValueError(f"namespace '{fake.name}' is the daemon's own")
        if fake.name in self._namespaces and not isinstance(self._namespaces[fake.name], _Fake):
            raise ValueError(f"namespace '{fake.name}' is served by the host already (a built-in one, or the plugin's)")
        self._namespaces[fake.name] = fake

    # -- calls -----------------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        request: Any = None,
        *,
        caller: CallerLike = None,
        timeout: Optional[float] = None,
        request_type: Optional[Type[Message]] = None,
        reply_type: Optional[type] = None,
    ) -> Any:
        """Calls ``method`` from ``caller`` (a :class:`Caller`, a uid, or root when ``None``), as a client
        would, and returns the reply decoded: the plugin's method (``"summary"`` or ``"habits.summary"``),
        a built-in one (``"diary.add"``) or a fake's. ``request`` is a message, a dict (JSON or proto field
        names), bytes or ``None``. Raises :class:`~mentory.MentoryError` with the code, message and reason
        the daemon would send."""
        await self.start()
        namespace, _, name = method.rpartition(".")
        namespace = namespace or self.plugin.namespace
        types = self._types(namespace, name)
        body = encode_request(namespace, name, request, request_type or types[0])
        reply = await self._client_call(namespace, name, body, _caller(caller), timeout)
        return decode_reply(namespace, name, reply, reply_type or types[1])

    async def snapshot(self, topic: str, *, caller: CallerLike = None) -> Any:
        """The current state of ``topic`` (the plugin's, or a built-in one's), as a new subscriber's
        ``SNAPSHOT`` event carries it, decoded.

        ``caller`` (root when ``None``) must be allowed to subscribe, as the daemon checks it: the
        ``subscribe:`` rules, and every method the topic ``reads`` (a topic without ``reads`` is for root,
        the daemon's user and uids or groups a rule allows ``subscribe:TOPIC`` by name); else this raises
        ``PERMISSION_DENIED`` as ``session.subscribe`` would."""
        await self.start()
        for namespace in self._namespaces.values():
            if topic in namespace.topics:
                refusal = self._topic_refusal(namespace, topic, _caller(caller).credentials())
                if refusal is not None:
                    raise MentoryError(
                        ErrorCode.PERMISSION_DENIED,
                        f"permission denied: you may not call session.subscribe({topic}): {refusal}",
                    )
                snapshot_type = namespace.topics[topic][1]
                body = await namespace.snapshot(topic)
                return _decode(namespace.name, f"snapshot of {topic}", snapshot_type, body)
        raise ValueError(f"no hosted namespace has a topic '{topic}' (topics: {', '.join(self._topics()) or 'none'})")

    def published(self, topic: str) -> List[Any]:
        """The changes published on ``topic`` so far, oldest first, decoded."""
        if topic not in self._topics():
            raise ValueError(
                f"no hosted namespace has a topic '{topic}' (topics: {', '.join(self._topics()) or 'none'})"
            )
        return [publication.change for publication in self.publications if publication.topic == topic]

    def _topic_refusal(self, namespace: _Namespace, topic: str, credentials: Optional[Credentials]) -> Optional[str]:
        """Why a subscriber with ``credentials`` may not be sent ``topic``'s events (the engine's
        ``topicRefusal``), or ``None``."""
        if not self.policy.allows_subscription(credentials, topic):
            return f"access.rules deny subscribe:{topic}"
        reads: List[str] = []
        if namespace.service is not None:
            for declared in namespace.service.GetOptions().Extensions[pb.topic]:
                if declared.name == topic:
                    reads = list(declared.reads)
        if not reads:
            if self.policy.allows_privileged_subscription(credentials, topic):
                return None
            return (
                "it declares no reads, so it is for root, the daemon's user and uids or groups access.rules"
                f" allow subscribe:{topic} by name"
            )
        for read in reads:
            target, _, method = read.partition(".")
            hosted = self._namespaces.get(target)
            declared_method = hosted.methods.get(method) if hosted is not None else None
            if declared_method is None or not self.policy.allows_call(
                credentials, target, method, declared_method.privilege
            ):
                return f"its events carry what {read} returns, which you may not call"
        return None

    def _topics(self) -> List[str]:
        return [topic for namespace in self._namespaces.values() for topic in namespace.topics]

    def _types(self, namespace: str, method: str) -> Types:
        hosted = self._namespaces.get(namespace)
        if hosted is not None and method in hosted.methods:
            declared = hosted.methods[method]
            return declared.request_type, declared.reply_type
        return METHODS.get((namespace, method), (None, None))

    def _context(self, caller: Caller, chain: Tuple[str, ...], timeout: Optional[float]) -> _Context:
        seconds = self.timeout if timeout is None else min(timeout, self.timeout)
        return _Context(caller, chain, time.monotonic() + seconds, int(seconds * 1000))

    async def _client_call(
        self, namespace: str, method: str, body: bytes, caller: Caller, timeout: Optional[float]
    ) -> bytes:
        """A client's request, through the gate, as the engine answers it."""
        hosted = self._namespaces.get(namespace)
        if hosted is None:
            raise MentoryError(ErrorCode.UNKNOWN_NAMESPACE, f"no handler is registered for namespace '{namespace}'")
        declared = hosted.methods.get(method)
        if declared is None:
            raise MentoryError(ErrorCode.UNKNOWN_METHOD, f"namespace '{namespace}' has no method '{method}'")
        if not self.policy.allows_call(caller.credentials(), namespace, method, declared.privilege):
            raise MentoryError(ErrorCode.PERMISSION_DENIED, f"permission denied: you may not call {namespace}.{method}")
        context = self._context(caller, (), timeout)
        with self._counted(caller):
            return await hosted.answer(method, body, context)

    async def _on_behalf(self, context: _Context, calling: str, namespace: str, method: str, body: bytes) -> bytes:
        """``calling`` (a namespace answering ``context``'s call) calls ``namespace.method`` on behalf of
        its caller, through the gate as the engine's ``call(_:_:body:for:from:)``."""
        chain = context.chain if context.chain and context.chain[-1] == calling else context.chain + (calling,)
        if namespace in chain:
            raise MentoryError(
                ErrorCode.INTERNAL,
                f"a call cycle was refused: {' -> '.join(chain + (namespace,))} ({namespace}.{method});"
                " a handler may call only namespaces that do not call it back",
            )
        hosted = self._namespaces.get(namespace)
        if hosted is None:
            raise MentoryError(
                ErrorCode.INTERNAL,
                f"{calling} called {namespace}.{method}, which no handler or plugin serves;"
                " only handler and plugin namespaces can be called on a caller's behalf",
            )
        declared = hosted.methods.get(method)
        privilege = declared.privilege if declared is not None else pb.PRIVILEGE_UNSPECIFIED
        caller = context.caller
        if not self.policy.allows_call(caller.credentials(), namespace, method, privilege):
            raise MentoryError(
                ErrorCode.PERMISSION_DENIED,
                f"permission denied: you may not call {namespace}.{method}, which was called on your behalf by"
                f" {chain[-1]} ({' -> '.join(chain + (f'{namespace}.{method}',))});"
                " the access rules that refuse it to you refuse it to what you call",
                DENIED_ON_BEHALF,
            )
        if declared is None:
            raise MentoryError(ErrorCode.UNKNOWN_METHOD, f"namespace '{namespace}' has no method '{method}'")
        if time.monotonic() >= context.deadline:
            raise MentoryError(
                ErrorCode.DEADLINE_EXCEEDED,
                f"{namespace}.{method} was not answered within its deadline of {context.timeout_ms} ms",
            )
        key = caller.uid if caller.known else None
        if self._in_flight.get(key, 0) >= self.uid_requests_in_flight:
            uid = f" (uid {caller.uid})" if caller.known else ""
            raise MentoryError(
                ErrorCode.TOO_MANY_REQUESTS,
                f"{' -> '.join(chain)} -> {namespace}.{method} was refused: it is made on behalf of a caller{uid}"
                " whose uid is at its budget (limits.uidRequestsInFlight requests in flight, or"
                " limits.uidQueuedBytes queued); retry once its other requests are answered, or raise the limits",
            )
        nested = _Context(caller, chain + (namespace,), context.deadline, context.timeout_ms)
        with self._counted(caller):
            return await hosted.answer(method, body, nested)

    def _counted(self, caller: Caller) -> "_InFlight":
        return _InFlight(self._in_flight, caller.uid if caller.known else None)

    # -- the plugin's connection -----------------------------------------------------------------

    async def _from_plugin(self, namespace: str, method: str, body: bytes) -> bytes:
        if namespace == "plugin" and method == "call":
            request = pb.PluginCallRequest()
            request.ParseFromString(body)
            context = self._pending.get(request.call_id)
            if context is None:
                raise MentoryError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"call {request.call_id} is not in flight: plugin.call acts for the caller of a call the daemon"
                    " forwarded to you, until you answer it or its deadline passes",
                )
            reply = await self._on_behalf(
                context, self.plugin.namespace, request.namespace, request.method, request.body
            )
            return pb.PluginCallReply(body=reply).SerializeToString()
        if namespace == "plugin" and method == "publish":
            request = pb.PluginPublishRequest()
            request.ParseFromString(body)
            types = self._hosted.topics.get(request.topic)
            if types is None:
                raise MentoryError(
                    ErrorCode.INVALID_ARGUMENT, f"namespace '{self.plugin.namespace}' has no topic '{request.topic}'"
                )
            change = _decode(self.plugin.namespace, f"publish on {request.topic}", types[0], request.body)
            self.publications.append(Publication(request.topic, change, self.plugin.namespace))
            return pb.Empty().SerializeToString()
        if namespace == "session" and method == "describe":
            return self._describe().SerializeToString()
        if namespace in ("session", "plugin", "storage", "daemon", "debug"):
            raise MentoryError(
                ErrorCode.UNKNOWN_METHOD,
                f"namespace '{namespace}' has no method '{method}' in mentory.testing's in-memory host",
            )
        return await self._client_call(namespace, method, body, self.plugin_caller, None)

    def _describe(self) -> pb.DescribeReply:
        """``session.describe``: the namespaces with a schema (the plugin's, the built-ins, fakes given a
        service descriptor) and their descriptors."""
        reply = pb.DescribeReply()
        files: Dict[str, Any] = {}
        for hosted in self._namespaces.values():
            if hosted.service is None:
                continue
            description = reply.namespaces.add(namespace=hosted.name, version=hosted.version)
            for name, declared in hosted.methods.items():
                description.methods.add(
                    name=name,
                    request=declared.request_type.DESCRIPTOR.full_name if declared.request_type else "",
                    reply=declared.reply_type.DESCRIPTOR.full_name if declared.reply_type else "",
                    privilege=declared.privilege,
                )
            for topic in hosted.service.GetOptions().Extensions[pb.topic]:
                description.topics.add(
                    name=topic.name, change=topic.change, snapshot=topic.snapshot, reads=list(topic.reads)
                )
            for file in _closure(hosted.service.file):
                files.setdefault(file.name, file)
        for file in files.values():
            file.CopyToProto(reply.descriptors.file.add())
        return reply

    def _builtin_published(self, topic: str, change: Message) -> None:
        self.publications.append(Publication(topic, change, topic))


class _InFlight:
    """Counts one call of a uid's in flight while it runs."""

    def __init__(self, counts: Dict[Optional[int], int], key: Optional[int]) -> None:
        self._counts = counts
        self._key = key

    def __enter__(self) -> None:
        self._counts[self._key] = self._counts.get(self._key, 0) + 1

    def __exit__(self, *exc_info: Any) -> None:
        self._counts[self._key] -= 1


class PluginHost:
    """:class:`AsyncPluginHost` for plain test functions: the same options and methods, blocking, on an
    event loop of its own (the plugin's handlers run on it, plain ones on its default executor)::

        with PluginHost(plugin, access_rules=["deny uid=1000 diary.*"]) as host:
            host.call("diary.add", {...}, caller=Caller(uid=1001))
            reply = host.call("summary", caller=Caller(uid=1001))
    """

    def __init__(self, plugin: Plugin, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._host = AsyncPluginHost(plugin, **options)
            self._run(self._host.start())
        except BaseException:
            self._loop.close()
            raise

    @property
    def plugin(self) -> Plugin:
        return self._host.plugin

    @property
    def publications(self) -> List[Publication]:
        """Every change published so far, oldest first."""
        return self._host.publications

    def _run(self, work: Awaitable[T]) -> T:
        if self._loop.is_closed():
            raise RuntimeError("this PluginHost is closed")
        return self._loop.run_until_complete(work)

    def fake(
        self,
        namespace: Union[str, ServiceDescriptor],
        methods: Optional[Mapping[str, FakeHandler]] = None,
        **handlers: FakeHandler,
    ) -> None:
        """:meth:`AsyncPluginHost.fake`; the functions run on the host's loop (``async`` ones) or its
        executor."""
        self._host.fake(namespace, methods, **handlers)

    def call(self, method: str, request: Any = None, **options: Any) -> Any:
        """:meth:`AsyncPluginHost.call`, blocking."""
        return self._run(self._host.call(method, request, **options))

    def snapshot(self, topic: str, **options: Any) -> Any:
        """:meth:`AsyncPluginHost.snapshot`, blocking."""
        return self._run(self._host.snapshot(topic, **options))

    def published(self, topic: str) -> List[Any]:
        """:meth:`AsyncPluginHost.published`."""
        return self._host.published(topic)

    def run(self, work: Awaitable[T]) -> T:
        """Runs a coroutine on the host's loop, e.g. ``host.run(plugin.publish("habits", habit))``."""
        return self._run(work)

    def close(self) -> None:
        """Ends the hosting and closes the loop."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._host.close())
            self._run(self._loop.shutdown_default_executor())
        finally:
            self._loop.close()

    def __enter__(self) -> "PluginHost":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
