"""Serving a namespace from Python: an out-of-process plugin (docs/PLUGINS.md).

The namespace is a ``service`` in a ``.proto`` file with mentory's options (``(mentory.v1.namespace)``,
``(mentory.v1.namespace_version)``, ``(mentory.v1.topic)``), compiled with ``protoc --python_out``.
A :class:`Plugin` reads its methods, topics and message types from that service, registers it with
mentoryd (``plugin.register``), answers the calls the daemon forwards with the handlers you give it,
publishes on its topics (``plugin.publish``), and reconnects and registers again with back-off
whenever the connection is lost, e.g. across daemon restarts::

    import mentory.plugin
    import kudos_pb2

    plugin = mentory.plugin.Plugin(kudos_pb2.DESCRIPTOR.services_by_name["KudosService"])

    @plugin.method("give")
    async def give(request: kudos_pb2.KudosGiveRequest, call: mentory.plugin.Call) -> kudos_pb2.Kudos:
        if not request.text:
            raise mentory.MentoryError(mentory.ErrorCode.INVALID_ARGUMENT, "say what for", reason="kudos.empty_text")
        kudos = kudos_pb2.Kudos(to=request.to, text=request.text, from_client=call.caller.client_name)
        await plugin.publish("kudos", kudos)
        return kudos

    @plugin.snapshot("kudos")
    def current() -> kudos_pb2.KudosList:
        return kudos_pb2.KudosList()

    plugin.run()  # until SIGINT/SIGTERM; ``await plugin.serve()`` in asyncio code

Handlers take ``(request, call)`` and return the reply message (or a dict of its fields); snapshot
takers take nothing and return the topic's snapshot message. Either may be a coroutine function
(run on the event loop; it must not block) or a plain function (run on a worker thread of the
loop's default executor). A handler raising :class:`~mentory.MentoryError` answers with its
``code``, ``message`` and ``reason``; any other exception answers ``INTERNAL`` and is logged; the
plugin keeps serving either way.
"""

import asyncio
import enum
import functools
import inspect
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Set,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from google.protobuf import descriptor_pb2, json_format
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message

from ._connection import DEFAULT_MAX_INCOMING_FRAME, Connection
from ._enums import ErrorCode
from . import _messages as pb
from ._schema import _message_class
from .aio import AsyncClient, ConnectOptions, make_options
from .errors import ConnectionClosed, MentoryError, ProtocolError, SocketTrustError
from .events import Backoff

__all__ = [
    "Plugin",
    "Call",
    "PluginState",
    "PLUGIN_PROTOCOL_VERSION",
    "DEFAULT_MAX_IN_FLIGHT",
]

logger = logging.getLogger("mentory.plugin")

#: The plugin protocol version this package speaks (``PluginRegisterRequest.plugin_protocol_version``).
PLUGIN_PROTOCOL_VERSION = 1

#: How many forwarded calls a plugin answers at once unless told otherwise; a call beyond that is
#: answered ``TOO_MANY_REQUESTS`` at once.
DEFAULT_MAX_IN_FLIGHT = 64

#: Registration refusals that retrying cannot fix: :meth:`Plugin.serve` raises them.
_PERMANENT_CODES = frozenset({int(ErrorCode.PERMISSION_DENIED), int(ErrorCode.INVALID_ARGUMENT)})

Reply = Union[Message, Mapping[str, Any], bytes]
#: A method's handler: ``(request, call) -> reply``, a coroutine function or a plain function.
Handler = Callable[[Any, "Call"], Union[Reply, Awaitable[Reply]]]
#: A topic's snapshot taker: ``() -> snapshot``, a coroutine function or a plain function.
SnapshotTaker = Callable[[], Union[Reply, Awaitable[Reply]]]
H = TypeVar("H", bound=Callable[..., Any])
T = TypeVar("T")


class PluginState(enum.Enum):
    """What a :class:`Plugin` is doing (:attr:`Plugin.state`)."""

    #: Not serving: :meth:`Plugin.serve` has not started, or has returned.
    STOPPED = "stopped"
    #: Connecting to the daemon and registering.
    CONNECTING = "connecting"
    #: Registered: calls are answered, :meth:`Plugin.publish` works.
    REGISTERED = "registered"
    #: The last attempt failed or the connection was lost; the next attempt follows the back-off.
    WAITING = "waiting"


@dataclass(frozen=True)
class Call:
    """One call the daemon forwarded, as a handler sees it."""

    #: The daemon's id for the call; unique among the calls in flight to this plugin.
    call_id: int
    #: The namespace called (the plugin's).
    namespace: str
    #: The method called; ``""`` for a snapshot.
    method: str
    #: The topic whose snapshot is asked for; ``""`` for a method call.
    snapshot_topic: str
    #: Who called: ``known``, ``pid``, ``uid``, ``gid`` as the kernel reported them, ``client_name``
    #: of the caller's Hello and its ``connection`` number.
    caller: pb.PluginCaller
    #: When the daemon stops waiting (``time.monotonic()`` seconds); the caller then gets
    #: ``DEADLINE_EXCEEDED`` and the plugin cancels the handler. ``None``: no deadline was given.
    deadline: Optional[float]
    #: The plugin's client on the connection the call came on, which :meth:`call` goes through.
    _client: Optional[AsyncClient] = field(default=None, repr=False, compare=False)

    async def call(
        self,
        namespace: str,
        method: Union[str, Any] = None,
        request: Any = None,
        *,
        request_type: Optional[Type[Message]] = None,
        reply_type: Optional[type] = None,
    ) -> Any:
        """Calls another namespace's method **on behalf of this call's caller** (``plugin.call``), and
        returns its reply: ``await call.call("diary.list", {})`` or ``call.call("diary", "list", ...)``,
        with the request and reply as :meth:`mentory.aio.AsyncClient.call` takes and returns them.

        The daemon checks the caller's access, not the plugin's: a caller denied ``diary.*`` gets
        :class:`~mentory.MentoryError` ``PERMISSION_DENIED`` here, however the plugin itself is allowed.
        The call shares this call's deadline, counts as one more of the caller's requests in flight
        (``TOO_MANY_REQUESTS`` when the caller's uid is at its budget), and a call back into a namespace
        already on the way is refused (``INTERNAL``, naming the chain). Errors of the called namespace
        are raised as they came; raised on from the handler, they reach the caller unchanged. Use it,
        never a client connection of the plugin's own, to fetch anything for a caller. Only a method
        call has a caller: from a snapshot it fails ``INVALID_ARGUMENT``."""
        if self._client is None:
            raise ConnectionClosed("this Call has no connection to the daemon to call through (made by hand)")
        remaining = self.remaining
        return await self._client._call_on_behalf(  # noqa: SLF001 - the plugin's own client
            self.call_id,
            namespace,
            method,
            request,
            request_type=request_type,
            reply_type=reply_type,
            timeout=None if remaining is None else max(remaining, 0.001),
        )

    @property
    def remaining(self) -> Optional[float]:
        """Seconds left before the deadline (never negative), or ``None``."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline


@dataclass
class _Method:
    request_type: Type[Message]
    reply_type: Type[Message]
    handler: Optional[Handler] = None


@dataclass
class _Topic:
    change_type: Type[Message]
    snapshot_type: Type[Message]
    taker: Optional[SnapshotTaker] = None
    #: What a subscriber must be allowed to call (``TopicDeclaration.reads``), sent with the registration.
    reads: Tuple[str, ...] = ()


class _Session:
    """One registered connection: its in-flight calls die with it."""

    def __init__(self, connection: Connection, client: AsyncClient) -> None:
        self.connection = connection
        self.client = client
        self.tasks: Set["asyncio.Task[None]"] = set()
        self.closed = asyncio.Event()
        self.close_reason: Optional[MentoryError] = None
        self.registered = False
        #: Set once the registration's reply has arrived (calls may be forwarded before it does).
        self.ready = asyncio.Event()


class Plugin:
    """Serves the namespace of one ``service`` descriptor from this process.

    ``service`` is a generated module's ``DESCRIPTOR.services_by_name["Name"]``; its options give the
    namespace, its version and its topics, its rpcs the methods (message types and descriptors
    included). Give every method a handler (:meth:`method`) and every topic a snapshot taker
    (:meth:`snapshot`), then :meth:`serve` (asyncio) or :meth:`run` (blocking).

    - ``socket_path``, ``trusted_uids``, ``timeout`` (connecting, the handshake, ``register`` and
      ``publish``) and ``max_incoming_frame`` work as for :func:`mentory.aio.connect`; the socket is
      found and checked the same way.
    - ``max_in_flight`` bounds the calls answered at once (default :data:`DEFAULT_MAX_IN_FLIGHT`);
      a call beyond it is answered ``TOO_MANY_REQUESTS`` without running a handler.
    - ``backoff`` is the wait between attempts after a lost connection or a failed attempt
      (:class:`~mentory.Backoff`: 1 s, doubling, up to 30 s, jittered); it restarts from its
      first delay after each successful registration, and for ``quick_window`` (30 s) after a
      registration that worked is lost, attempts come every ``quick_interval`` (0.25 s) instead.
    """

    def __init__(
        self,
        service: ServiceDescriptor,
        *,
        socket_path: Optional[str] = None,
        client_name: Optional[str] = None,
        timeout: float = 10.0,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        backoff: Optional[Backoff] = None,
        max_incoming_frame: int = DEFAULT_MAX_INCOMING_FRAME,
        trusted_uids: Optional[Iterable[int]] = None,
    ) -> None:
        if not isinstance(service, ServiceDescriptor):
            raise TypeError(
                "Plugin takes a service descriptor, e.g. my_pb2.DESCRIPTOR.services_by_name['MyService']"
            )
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        options = service.GetOptions()
        namespace: str = options.Extensions[pb.namespace]
        if not namespace:
            raise ValueError(
                f"service {service.full_name} has no (mentory.v1.namespace) option; "
                "a plugin's service declares the namespace it serves"
            )
        self.service = service
        #: The namespace served.
        self.namespace = namespace
        #: The namespace's interface version (``(mentory.v1.namespace_version)``).
        self.version: int = options.Extensions[pb.namespace_version]
        self._methods: Dict[str, _Method] = {
            method.name: _Method(_message_class(method.input_type), _message_class(method.output_type))
            for method in service.methods
        }
        pool = service.file.pool
        self._topics: Dict[str, _Topic] = {}
        for topic in options.Extensions[pb.topic]:
            try:
                change = _message_class(pool.FindMessageTypeByName(topic.change))
                snapshot = _message_class(pool.FindMessageTypeByName(topic.snapshot))
            except KeyError as error:
                raise ValueError(f"service {service.full_name}: topic '{topic.name}' names an unknown message: {error}") from None
            self._topics[topic.name] = _Topic(change, snapshot, reads=tuple(topic.reads))
        self.max_in_flight = max_in_flight
        self.backoff = backoff or Backoff()
        self._options: ConnectOptions = make_options(
            socket_path, client_name or f"{namespace}-plugin", timeout, max_incoming_frame, trusted_uids
        )
        self._state = PluginState.STOPPED
        self._last_error: Optional[BaseException] = None
        self._reply: Optional[pb.PluginRegisterReply] = None
        self._session: Optional[_Session] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stopping: Optional[asyncio.Event] = None
        # Set on every state change; one per event loop (an asyncio.Event belongs to one loop).
        self._changed: Optional[asyncio.Event] = None
        self._changed_loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop_requested = False
        self._failure: Optional[BaseException] = None
        #: How many times the plugin registered (the first registration included).
        self.registrations = 0

    # -- routes ----------------------------------------------------------------------------------

    @property
    def methods(self) -> Dict[str, Tuple[Type[Message], Type[Message]]]:
        """method -> (request type, reply type), as the service declares them."""
        return {name: (method.request_type, method.reply_type) for name, method in self._methods.items()}

    @property
    def topics(self) -> Dict[str, Tuple[Type[Message], Type[Message]]]:
        """topic -> (change type, snapshot type), as the service declares them."""
        return {name: (topic.change_type, topic.snapshot_type) for name, topic in self._topics.items()}

    def method(self, name: str) -> Callable[[H], H]:
        """Decorator: answers method ``name`` with the function, ``(request, call) -> reply``."""
        if name not in self._methods:
            raise ValueError(
                f"namespace '{self.namespace}' has no method '{name}' (it has: {', '.join(self._methods) or 'none'})"
            )

        def register(handler: H) -> H:
            self._methods[name].handler = handler
            return handler

        return register

    def snapshot(self, topic: str) -> Callable[[H], H]:
        """Decorator: takes topic ``topic``'s snapshot with the function, ``() -> snapshot``: the body
        of the SNAPSHOT and RESET events its subscribers get."""
        if topic not in self._topics:
            raise ValueError(
                f"namespace '{self.namespace}' has no topic '{topic}' (it has: {', '.join(self._topics) or 'none'})"
            )

        def register(taker: H) -> H:
            self._topics[topic].taker = taker
            return taker

        return register

    def problems(self) -> List[str]:
        """What the service declares but no handler answers; :meth:`serve` refuses to start unless empty."""
        return [f"method '{name}' has no handler" for name, m in self._methods.items() if m.handler is None] + [
            f"topic '{name}' has no snapshot taker" for name, t in self._topics.items() if t.taker is None
        ]

    def registration(self) -> pb.PluginRegisterRequest:
        """The ``plugin.register`` request: the namespace, its methods and topics, and the descriptors
        of every file they need (mentory.proto and its imports excepted: the daemon has them)."""
        request = pb.PluginRegisterRequest(
            plugin_protocol_version=PLUGIN_PROTOCOL_VERSION, namespace=self.namespace, version=self.version
        )
        for name, method in self._methods.items():
            request.methods.add(
                name=name,
                request=method.request_type.DESCRIPTOR.full_name,
                reply=method.reply_type.DESCRIPTOR.full_name,
            )
        for name, topic in self._topics.items():
            request.topics.add(
                name=name,
                change=topic.change_type.DESCRIPTOR.full_name,
                snapshot=topic.snapshot_type.DESCRIPTOR.full_name,
                reads=list(topic.reads),
            )
        known = {file.name for file in _closure(pb.DESCRIPTOR)}
        for file in _closure(self.service.file):
            if file.name not in known:
                proto = descriptor_pb2.FileDescriptorProto()
                file.CopyToProto(proto)
                request.descriptors.file.append(proto)
        return request

    # -- state -----------------------------------------------------------------------------------

    @property
    def state(self) -> PluginState:
        return self._state

    @property
    def last_error(self) -> Optional[BaseException]:
        """Why the last attempt failed or the last connection ended; ``None`` while registered."""
        return self._last_error

    @property
    def registered_reply(self) -> Optional[pb.PluginRegisterReply]:
        """The daemon's answer to the current registration (plugin name, epoch, call deadline), or ``None``."""
        return self._reply if self._state is PluginState.REGISTERED else None

    @property
    def client(self) -> Optional[AsyncClient]:
        """The registered connection as an :class:`~mentory.aio.AsyncClient`, for calls to other
        namespaces from handlers; ``None`` between connections. Do not close it."""
        session = self._session
        return session.client if session is not None and session.registered else None

    @property
    def in_flight(self) -> int:
        """Calls being answered now."""
        session = self._session
        return len(session.tasks) if session is not None else 0

    def _set_state(self, state: PluginState) -> None:
        self._state = state
        if self._changed is not None:
            self._changed.set()

    def _change_event(self) -> asyncio.Event:
        """The state-change event of the running loop."""
        loop = asyncio.get_running_loop()
        if self._changed is None or self._changed_loop is not loop:
            self._changed = asyncio.Event()
            self._changed_loop = loop
        return self._changed

    async def wait_registered(self, timeout: Optional[float] = None) -> pb.PluginRegisterReply:
        """Waits until the plugin is registered (at once if it is) and returns the daemon's reply;
        raises :class:`asyncio.TimeoutError` after ``timeout`` seconds, and what :meth:`serve`
        raised if it stopped for good. Call it on the loop :meth:`serve` runs on."""

        async def registered() -> pb.PluginRegisterReply:
            while True:
                reply = self.registered_reply
                if reply is not None:
                    return reply
                if self._failure is not None:
                    raise self._failure
                changed = self._change_event()
                changed.clear()
                await changed.wait()

        return await asyncio.wait_for(registered(), timeout)

    # -- serving ---------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Connects, registers and answers calls until :meth:`stop` (or cancellation), reconnecting
        and registering again with back-off whenever the connection is lost.

        Raises :class:`ValueError` at once when a method or topic has no handler, and stops with
        the error when the daemon refuses the registration for good (``PERMISSION_DENIED``: not
        allowed; ``INVALID_ARGUMENT``: a bad schema or protocol version), when the
        socket is untrusted (:class:`~mentory.SocketTrustError`), or after ``backoff.max_attempts``
        failed attempts in a row. Anything else (no daemon, a lost connection, another instance
        serving the namespace) is retried. A namespace the daemon does not declare yet (reason
        ``plugin.not_declared``) keeps its connection open until a reload declares it; the daemon then
        closes it, and the plugin registers again at once.
        """
        problems = self.problems()
        if problems:
            raise ValueError(f"the {self.namespace} plugin does not match its schema: " + "; ".join(problems))
        if self._loop is not None:
            raise RuntimeError("this plugin is serving already")
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._change_event()
        if self._stop_requested:
            self._stopping.set()
        registration = self.registration().SerializeToString()
        attempt = 0
        # When the last registration that worked was lost (time.monotonic()); None before the first.
        lost_at: Optional[float] = None
        self._failure = None
        try:
            while not self._stopping.is_set():
                self._set_state(PluginState.CONNECTING)
                try:
                    registered = await self._unless_stopping(self._register(registration))
                    if registered is None:
                        break  # stopped while connecting or registering
                    session = registered
                except (MentoryError, OSError) as error:
                    self._last_error = error
                    if _permanent(error):
                        logger.error("mentoryd refused the %s plugin for good: %s", self.namespace, error)
                        self._failure = error
                        raise
                    since_loss = None if lost_at is None else time.monotonic() - lost_at
                    quick = self.backoff.is_quick(since_loss)
                    if not quick:
                        # The back-off, and max_attempts, count only once the quick retries are over.
                        attempt += 1
                        if self.backoff.max_attempts is not None and attempt >= self.backoff.max_attempts:
                            self._failure = error
                            raise
                    self._set_state(PluginState.WAITING)
                    await self._pause(self.backoff.delay_after_loss(max(0, attempt - 1), since_loss), error, quick)
                    continue
                attempt = 0
                await self._serve_session(session)
                lost_at = time.monotonic()
                if not self._stopping.is_set():
                    self._set_state(PluginState.WAITING)
                    await self._pause(self.backoff.delay_after_loss(0, 0.0), self._last_error, quick=True)
        finally:
            current = self._session
            self._session = None
            if current is not None:
                await self._end_session(current)
            self._loop = None
            self._stopping = None
            self._stop_requested = False
            self._set_state(PluginState.STOPPED)

    async def _unless_stopping(self, work: Awaitable[T]) -> Optional[T]:
        """``work``'s result, or ``None`` (``work`` cancelled) when the plugin stops first."""
        assert self._stopping is not None
        task = asyncio.ensure_future(work)
        stop_waiter = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({task, stop_waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_waiter.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            return None
        return task.result()

    async def _register(self, registration: bytes) -> _Session:
        """Opens a connection, installs it (calls may come before the reply) and registers."""
        holder: List[_Session] = []

        def on_call(call: pb.PluginCall) -> None:
            if holder:
                self._dispatch(holder[0], call)

        def on_close(error: MentoryError) -> None:
            if holder:
                holder[0].close_reason = error
                holder[0].closed.set()

        connection = await self._options.open(on_close=on_close, on_plugin_call=on_call)
        session = _Session(connection, AsyncClient(connection, self._options))
        holder.append(session)
        if connection.closed:  # closed before on_close could see the session
            session.closed.set()
        self._session = session
        try:
            body = await connection.request("plugin", "register", registration, self._options.timeout)
            reply = pb.PluginRegisterReply()
            reply.ParseFromString(body)
        except MentoryError as error:
            if error.reason != NOT_DECLARED:
                self._session = None
                await self._end_session(session)
                raise
            # Not declared (yet): mentoryd closes this connection once a reload declares the namespace (or
            # when it stops). Wait for that, without polling, then register again at once.
            self._last_error = error
            self._set_state(PluginState.WAITING)
            logger.warning(
                "mentoryd declares no plugin for namespace %s yet; waiting for a reload that declares it",
                self.namespace,
            )
            try:
                await session.closed.wait()
            finally:
                self._session = None
                await self._end_session(session)
            raise ConnectionClosed(
                f"mentoryd closed the connection of the {self.namespace} plugin, which waited to be declared: "
                + str(session.close_reason or "no reason given")
            ) from error
        except BaseException:
            self._session = None
            await self._end_session(session)
            raise
        session.registered = True
        session.ready.set()
        self._reply = reply
        self._last_error = None
        self.registrations += 1
        logger.info(
            "registered namespace %s as plugin '%s' (epoch %d, call deadline %d ms)",
            self.namespace,
            reply.plugin,
            reply.epoch,
            reply.call_timeout_ms,
        )
        self._set_state(PluginState.REGISTERED)
        return session

    async def _serve_session(self, session: _Session) -> None:
        """Waits until the connection closes or the plugin stops, then ends the session."""
        assert self._stopping is not None
        stop_waiter = asyncio.ensure_future(self._stopping.wait())
        close_waiter = asyncio.ensure_future(session.closed.wait())
        try:
            await asyncio.wait({stop_waiter, close_waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_waiter.cancel()
            close_waiter.cancel()
        if session.closed.is_set():
            self._last_error = session.close_reason or ConnectionClosed("mentoryd closed the connection")
            logger.warning("the %s plugin lost its connection: %s", self.namespace, self._last_error)
        self._session = None
        await self._end_session(session)

    async def _end_session(self, session: _Session) -> None:
        """Closes the connection; the calls still running are cancelled (their callers got UNAVAILABLE)."""
        session.registered = False
        for task in list(session.tasks):
            task.cancel()
        if session.tasks:
            await asyncio.gather(*session.tasks, return_exceptions=True)
        await session.connection.close()

    async def _pause(self, delay: float, error: Optional[BaseException], quick: bool = False) -> None:
        """Waits ``delay`` seconds, or less when the plugin stops meanwhile. Quick retries (a few a
        second after a lost registration) are logged at debug level, the others at info."""
        assert self._stopping is not None
        logger.log(
            logging.DEBUG if quick else logging.INFO,
            "the %s plugin retries in %.1f s (%s)",
            self.namespace,
            delay,
            error,
        )
        try:
            await asyncio.wait_for(self._stopping.wait(), delay)
        except asyncio.TimeoutError:
            pass

    def stop(self) -> None:
        """Makes :meth:`serve` (or :meth:`run`) return soon: the connection closes and running calls
        are cancelled. May be called from any thread, and before serving starts."""
        loop = self._loop
        if loop is None:
            self._stop_requested = True
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._stop_now()
        else:
            try:
                loop.call_soon_threadsafe(self._stop_now)
            except RuntimeError:
                pass  # the loop is closed: nothing serves any more

    def _stop_now(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    def run(self) -> None:
        """Serves until SIGINT or SIGTERM (or :meth:`stop`), blocking: ``asyncio.run(plugin.serve())``
        with those signals stopping it cleanly. Raises what :meth:`serve` raises."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            installed: List[signal.Signals] = []
            if threading.current_thread() is threading.main_thread():
                for number in (signal.SIGINT, signal.SIGTERM):
                    try:
                        loop.add_signal_handler(number, self.stop)
                        installed.append(number)
                    except (NotImplementedError, RuntimeError, ValueError):
                        pass
            try:
                await self.serve()
            finally:
                for number in installed:
                    loop.remove_signal_handler(number)

        asyncio.run(main())

    # -- publishing ------------------------------------------------------------------------------

    async def publish(self, topic: str, change: Union[Message, Mapping[str, Any]], timeout: Optional[float] = None) -> None:
        """Publishes ``change`` (the topic's change message, or a dict of its fields) on ``topic``;
        the daemon numbers it and sends it to every subscriber. Raises :class:`ValueError` for a
        topic the service does not declare, :class:`TypeError` for a message of the wrong type,
        :class:`~mentory.ConnectionClosed` when the plugin is not registered now."""
        declared = self._topics.get(topic)
        if declared is None:
            raise ValueError(f"namespace '{self.namespace}' has no topic '{topic}' (it has: {', '.join(self._topics) or 'none'})")
        body = _encode(change, declared.change_type, f"a change on topic '{topic}'")
        session = self._session
        if session is not None and not session.registered and not session.closed.is_set():
            # The daemon forwards calls as soon as it has registered us, so a handler may publish
            # before the registration's reply has arrived here: wait for it (bounded).
            waiters = {asyncio.ensure_future(session.ready.wait()), asyncio.ensure_future(session.closed.wait())}
            try:
                await asyncio.wait(waiters, timeout=self._options.timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        if session is None or not session.registered:
            raise ConnectionClosed(f"the {self.namespace} plugin is not registered with mentoryd now; nothing was published")
        request = pb.PluginPublishRequest(topic=topic, body=body)
        await session.connection.request(
            "plugin", "publish", request.SerializeToString(), self._options.timeout if timeout is None else timeout
        )

    # -- answering -------------------------------------------------------------------------------

    def _dispatch(self, session: _Session, call: pb.PluginCall) -> None:
        """Starts answering a forwarded call (on the reader's callback: never blocks)."""
        if not session.registered and session is not self._session:
            return  # the session is ending
        # The daemon forwards calls only to a registered connection, and this one may come before the
        # reply to plugin.register is read: its handler may publish already.
        session.registered = True
        if len(session.tasks) >= self.max_in_flight:
            what = call.method or f"snapshot of {call.snapshot_topic}"
            logger.warning("the %s plugin refused %s: %d calls in flight already", self.namespace, what, len(session.tasks))
            self._write(
                session,
                _error_reply(
                    call.call_id,
                    ErrorCode.TOO_MANY_REQUESTS,
                    f"the {self.namespace} plugin is answering {len(session.tasks)} calls already, its limit "
                    f"(max_in_flight); try again later",
                ),
            )
            return
        task = asyncio.ensure_future(self._answer(session, call))
        session.tasks.add(task)
        task.add_done_callback(session.tasks.discard)

    def _write(self, session: _Session, reply: pb.PluginReply) -> None:
        try:
            session.connection.write_plugin_reply(reply)
        except ConnectionClosed:
            pass

    async def _answer(self, session: _Session, call: pb.PluginCall) -> None:
        deadline = time.monotonic() + call.timeout_ms / 1000.0 if call.timeout_ms else None
        context = Call(
            call_id=call.call_id,
            namespace=call.namespace or self.namespace,
            method=call.method,
            snapshot_topic=call.snapshot_topic,
            caller=call.caller,
            deadline=deadline,
            _client=session.client,
        )
        what = f"{self.namespace}.{call.method}" if not call.snapshot_topic else f"the snapshot of {call.snapshot_topic}"
        work = asyncio.ensure_future(self._respond(call, context))
        work.add_done_callback(_retrieve)  # a handler cancelled below may still fail: no "never retrieved" noise
        if not await _within_deadline(work, context.remaining):
            logger.warning("%s did not finish before its deadline; cancelled (the caller got DEADLINE_EXCEEDED)", what)
            return
        try:
            body = work.result()
            reply = pb.PluginReply(call_id=call.call_id, body=body)
        except Exception as error:  # noqa: BLE001 - any failure of a handler is the caller's error
            if not isinstance(error, MentoryError):
                logger.exception("%s failed", what)
            failure = _caller_error(error, what)
            reply = _error_reply(call.call_id, failure.code, failure.message, failure.reason)
        try:
            await session.connection.send_plugin_reply(reply)
        except ProtocolError as error:
            logger.error("cannot answer %s: %s", what, error)
            self._write(session, _error_reply(call.call_id, ErrorCode.INTERNAL, f"cannot answer {what}: {error.message}"))
        except ConnectionClosed:
            pass  # the caller got UNAVAILABLE already

    async def _respond(self, call: pb.PluginCall, context: Call) -> bytes:
        """The reply body for one call; raises :class:`MentoryError` for an answer that is an error."""
        if call.snapshot_topic:
            topic = self._topics.get(call.snapshot_topic)
            if topic is None or topic.taker is None:
                raise MentoryError(ErrorCode.INVALID_ARGUMENT, f"namespace '{self.namespace}' has no topic '{call.snapshot_topic}'")
            snapshot = await _invoke(topic.taker)
            return _encode(snapshot, topic.snapshot_type, f"the snapshot of topic '{call.snapshot_topic}'")
        method = self._methods.get(call.method)
        if method is None or method.handler is None:
            raise MentoryError(ErrorCode.UNKNOWN_METHOD, f"namespace '{self.namespace}' has no method '{call.method}'")
        request = method.request_type()
        try:
            request.ParseFromString(call.body)
        except DecodeError as error:
            raise MentoryError(
                ErrorCode.INVALID_ARGUMENT,
                f"the body of '{self.namespace}.{call.method}' is not a valid "
                f"{method.request_type.DESCRIPTOR.full_name}: {error}",
            ) from None
        reply = await _invoke(method.handler, request, context)
        return _encode(reply, method.reply_type, f"the reply of '{self.namespace}.{call.method}'")


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


async def _invoke(function: Callable[..., Any], *arguments: Any) -> Any:
    """Calls a handler: a coroutine function on the loop, a plain function on the default executor."""
    if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(getattr(function, "__call__", None)):
        return await function(*arguments)
    result = await asyncio.get_running_loop().run_in_executor(None, functools.partial(function, *arguments))
    if inspect.isawaitable(result):
        return await result
    return result


def _encode(value: Any, message_type: Type[Message], what: str) -> bytes:
    """``value`` (a ``message_type``, a dict of its fields, or its bytes) serialized; :class:`TypeError` otherwise."""
    if isinstance(value, Message):
        if value.DESCRIPTOR.full_name != message_type.DESCRIPTOR.full_name:
            raise TypeError(f"{what} must be a {message_type.DESCRIPTOR.full_name}, not a {value.DESCRIPTOR.full_name}")
        return value.SerializeToString()
    if isinstance(value, Mapping):
        try:
            return json_format.ParseDict(dict(value), message_type()).SerializeToString()
        except json_format.ParseError as error:
            raise TypeError(f"{what} is not a valid {message_type.DESCRIPTOR.full_name}: {error}") from None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be a {message_type.DESCRIPTOR.full_name}, not {type(value).__name__}")


async def _within_deadline(work: "asyncio.Future[Any]", timeout: Optional[float]) -> bool:
    """Waits for ``work`` for at most ``timeout`` seconds (``None``: no limit). Returns whether it finished;
    when it did not, it is cancelled. Cancelling this wait cancels ``work`` too."""
    try:
        done, _ = await asyncio.wait({work}, timeout=timeout)
    except asyncio.CancelledError:
        work.cancel()
        raise
    if not done:
        work.cancel()
        return False
    return True


def _caller_error(error: Exception, what: str) -> MentoryError:
    """The error a caller gets for a handler that raised ``error``: a ``MentoryError`` as it is, except that
    code 0 (e.g. a Timeout from a call the handler made) says nothing and becomes INTERNAL; anything else is
    INTERNAL, naming ``what`` failed and how."""
    if isinstance(error, MentoryError):
        return MentoryError(int(error.code) or ErrorCode.INTERNAL, error.message, error.reason)
    return MentoryError(ErrorCode.INTERNAL, f"{what} failed: {type(error).__name__}: {error}")


def _retrieve(task: "asyncio.Future[Any]") -> None:
    """Marks a finished task's exception as seen."""
    if not task.cancelled():
        task.exception()


#: The reason of mentoryd's refusal of a registration whose namespace no ``plugins.NAME`` section
#: declares: not for good, since a reload may declare it (the daemon then closes the connection).
NOT_DECLARED = "plugin.not_declared"


def _permanent(error: BaseException) -> bool:
    """Whether retrying the registration cannot help."""
    if isinstance(error, SocketTrustError):
        return True
    if isinstance(error, ProtocolError):
        return int(error.code) == int(ErrorCode.FRAME_TOO_LARGE)  # the registration itself is too large
    if isinstance(error, MentoryError) and not isinstance(error, ConnectionClosed):
        return int(error.code) in _PERMANENT_CODES
    return False


def _error_reply(call_id: int, code: int, message: str, reason: str = "") -> pb.PluginReply:
    return pb.PluginReply(call_id=call_id, error=pb.Error(code=int(code), message=message, reason=reason))


def _closure(file: FileDescriptor) -> List[FileDescriptor]:
    """``file`` and every file it imports, transitively, imports first."""
    ordered: List[FileDescriptor] = []
    seen: Set[str] = set()

    def visit(current: FileDescriptor) -> None:
        if current.name in seen:
            return
        seen.add(current.name)
        for dependency in current.dependencies:
            visit(dependency)
        ordered.append(current)

    visit(file)
    return ordered
