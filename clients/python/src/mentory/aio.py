"""The asyncio client.

::

    async with mentory.aio.connect() as client:
        await client.ping()
        entries = await client.diary.list(limit=10)
        async for event in client.subscribe(["diary"]):
            ...

Requests may be pipelined: any number of coroutines can call methods of one client at the same
time (``asyncio.gather`` of many calls); each waits for its own response, matched by request id.
"""

import asyncio
import collections
import errno
import logging
import os
from dataclasses import dataclass
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    FrozenSet,
    Generator,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    Union,
    cast,
)

from google.protobuf.message import Message
from google.protobuf.wrappers_pb2 import UInt32Value

from . import _requests as build
from ._codec import RequestLike, decode_event, decode_reply, encode_request, parse
from ._connection import DEFAULT_MAX_INCOMING_FRAME, Connection
from ._described import DescribedSchema, Types
from ._enums import ErrorCode
from . import _messages as pb
from ._requests import ActionItemLike, DayLike
from ._schema import TOPICS, method_types
from .discovery import resolve_socket_path
from .errors import ConnectionClosed, MentoryError, ProtocolError, SocketTrustError, Timeout
from .events import Backoff, Event, Position

__all__ = ["connect", "AsyncClient", "AsyncSubscription", "DEFAULT_BUFFER_SIZE"]

logger = logging.getLogger("mentory")

#: Events a subscription holds for its consumer before it treats the consumer as too slow.
DEFAULT_BUFFER_SIZE = 1024


@dataclass(frozen=True)
class ConnectOptions:
    """How to reach the daemon; shared by a client and the subscriptions it starts."""

    socket_path: str
    client_name: str
    timeout: float
    max_incoming_frame: int
    trusted_uids: Optional[FrozenSet[int]]

    async def open(
        self,
        on_event: Optional[Callable[[pb.Event], None]] = None,
        on_close: Optional[Callable[[MentoryError], None]] = None,
        on_plugin_call: Optional[Callable[[pb.PluginCall], None]] = None,
    ) -> Connection:
        return await Connection.open(
            self.socket_path,
            self.client_name,
            self.timeout,
            self.max_incoming_frame,
            self.trusted_uids,
            on_event,
            on_close,
            on_plugin_call,
        )


def make_options(
    socket_path: Optional[str],
    client_name: str,
    timeout: float,
    max_incoming_frame: int,
    trusted_uids: Optional[Iterable[int]],
) -> ConnectOptions:
    return ConnectOptions(
        socket_path=resolve_socket_path(socket_path),
        client_name=client_name,
        timeout=timeout,
        max_incoming_frame=max_incoming_frame,
        trusted_uids=frozenset(trusted_uids) if trusted_uids is not None else None,
    )


async def fetch_schema(connection: Connection, timeout: Optional[float]) -> DescribedSchema:
    """``session.describe`` on ``connection``, as message classes. A daemon that refuses it (too old,
    or its access policy) gives an empty schema; a lost connection or a timeout raises."""
    try:
        body = await connection.request("session", "describe", b"", timeout)
    except (ConnectionClosed, Timeout):
        raise
    except MentoryError as error:
        logger.info("session.describe failed (%s): only mentory.proto's namespaces are known", error)
        return DescribedSchema()
    return DescribedSchema(cast(pb.DescribeReply, parse(pb.DescribeReply, body, "the reply of session.describe")))


def split_target(name: str, method: Any, request: Any) -> Tuple[str, str, Any]:
    """``call("ns.method", request)`` or ``call("ns", "method", request)`` -> (namespace, method, request)."""
    if isinstance(method, str):
        return name, method, request
    if method is not None and request is not None:
        raise TypeError("call takes one request: call('namespace.method', request) or call('namespace', 'method', request)")
    namespace, dot, method_name = name.rpartition(".")
    if not dot or not namespace or not method_name:
        raise TypeError(f"name the method as 'namespace.method' (or pass it separately), not {name!r}")
    return namespace, method_name, method if method is not None else request


# ---------------------------------------------------------------------------------------------
# Typed namespaces
# ---------------------------------------------------------------------------------------------


class _AsyncNamespace:
    _name = ""

    def __init__(self, client: "AsyncClient") -> None:
        self._client = client

    async def _invoke(self, method: str, request: Message) -> Any:
        return await self._client.call(self._name, method, request)


class AsyncMentor(_AsyncNamespace):
    """Namespace ``mentor``: the day's mentor message."""

    _name = "mentor"

    async def get(self) -> pb.MentorState:
        """The current state; ``HasField("message")`` is false until the first ``set``."""
        return cast(pb.MentorState, await self._invoke("get", pb.Empty()))

    async def set(
        self,
        content: str,
        character: Union[str, int] = "warm",
        todos: Optional[Iterable[ActionItemLike]] = None,
        **fields: Any,
    ) -> pb.MentorState:
        """Replaces the mentor message. ``character`` is ``"warm"`` or ``"cool"``; ``todos`` are action
        items (strings get a fresh id from the daemon)."""
        return cast(pb.MentorState, await self._invoke("set", build.mentor_set(content, character, todos, fields)))

    async def complete_todo(self, id: str, **fields: Any) -> pb.MentorState:
        """Marks the action item ``id`` done (``NOT_FOUND`` if there is none)."""
        return cast(pb.MentorState, await self._invoke("completeTodo", build.build("mentor", "completeTodo", dict(fields, id=id))))


class AsyncReachability(_AsyncNamespace):
    """Namespace ``reachability``: companion devices' state."""

    _name = "reachability"

    async def get(self) -> pb.ReachabilitySnapshot:
        """Every peer, sorted by name."""
        return cast(pb.ReachabilitySnapshot, await self._invoke("get", pb.Empty()))

    async def report(
        self,
        peer: str,
        is_paired: bool = False,
        is_app_installed: bool = False,
        is_reachable: bool = False,
        **fields: Any,
    ) -> pb.PeerState:
        """Reports a peer's state; it becomes unreachable when this connection closes."""
        request = build.build(
            "reachability",
            "report",
            dict(fields, peer=peer, is_paired=is_paired, is_app_installed=is_app_installed, is_reachable=is_reachable),
        )
        return cast(pb.PeerState, await self._invoke("report", request))


class AsyncDiary(_AsyncNamespace):
    """Namespace ``diary``: one entry per day."""

    _name = "diary"

    async def add(
        self,
        record_date: DayLike,
        title: str,
        text: str,
        emotion: Union[str, int],
        analysis: Optional[str] = None,
        suggestions: Optional[Iterable[ActionItemLike]] = None,
        **fields: Any,
    ) -> pb.DiaryEntry:
        """Adds the entry for ``record_date`` (``CONFLICT`` if that day has one). ``emotion`` is a name
        such as ``"pleasant"`` or a number 1-7."""
        request = build.diary_add(record_date, title, text, emotion, analysis, suggestions, fields)
        return cast(pb.DiaryEntry, await self._invoke("add", request))

    async def get(self, id: str, **fields: Any) -> pb.DiaryEntry:
        """The entry with this id (``NOT_FOUND`` if there is none)."""
        return cast(pb.DiaryEntry, await self._invoke("get", build.build("diary", "get", dict(fields, id=id))))

    async def list(self, limit: int = 0, before: Optional[DayLike] = None, **fields: Any) -> pb.DiaryListReply:
        """Entries newest day first; ``limit`` 0 means 50, ``before`` (exclusive) pages backwards."""
        return cast(pb.DiaryListReply, await self._invoke("list", build.diary_list(limit, before, fields)))

    async def delete(self, id: str, **fields: Any) -> pb.DiaryEntry:
        """Deletes the entry and returns it (``NOT_FOUND`` if there is none)."""
        return cast(pb.DiaryEntry, await self._invoke("delete", build.build("diary", "delete", dict(fields, id=id))))

    async def set_suggestion_done(self, entry_id: str, suggestion_id: str, done: bool = True, **fields: Any) -> pb.DiaryEntry:
        """Ticks (or unticks) one of an entry's suggested action items."""
        request = build.build(
            "diary", "setSuggestionDone", dict(fields, entry_id=entry_id, suggestion_id=suggestion_id, done=done)
        )
        return cast(pb.DiaryEntry, await self._invoke("setSuggestionDone", request))


class AsyncStorage(_AsyncNamespace):
    """Namespace ``storage`` (SQLite store only; root or the daemon's user)."""

    _name = "storage"

    #: The first bytes of every SQLite database file.
    SQLITE_HEADER = b"SQLite format 3\x00"

    async def backup(self, destination: str) -> pb.StorageBackupReply:
        """Copies the daemon's database to ``destination`` on this machine, written by this process
        with its own rights, as ``mentoryctl backup --to`` does.

        The daemon takes a consistent snapshot and streams it (``backup``, then ``backupRead``
        pieces that fit its frame limit); the copy goes to a temporary file beside
        ``destination``, is checked (size and SQLite header) and synced, then linked into place,
        so ``destination`` appears complete or not at all and an existing file is never replaced
        (:class:`FileExistsError`). Returns the daemon's description of the snapshot.
        """
        path = os.path.abspath(destination)
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "the backup destination already exists; choose a new path", path)
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            raise FileNotFoundError(errno.ENOENT, "the backup destination's directory does not exist", directory)
        reply = cast(pb.StorageBackupReply, await self._invoke("backup", pb.StorageBackupRequest()))
        partial = os.path.join(directory, f".{os.path.basename(path)}.partial-{os.getpid()}")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            offset = 0
            with os.fdopen(descriptor, "wb") as output:
                while True:
                    request = pb.StorageBackupReadRequest(offset=offset)
                    piece = cast(pb.StorageBackupReadReply, await self._invoke("backupRead", request))
                    output.write(piece.data)
                    offset += len(piece.data)
                    if piece.end:
                        break
                    if not piece.data:
                        raise ProtocolError(f"the daemon sent an empty backup piece at offset {offset}")
                output.flush()
                os.fsync(output.fileno())
            if offset != reply.bytes:
                raise ProtocolError(f"the backup holds {offset} bytes, but the daemon announced {reply.bytes}")
            with open(partial, "rb") as written:
                if written.read(len(self.SQLITE_HEADER)) != self.SQLITE_HEADER:
                    raise ProtocolError("the backup does not start with a SQLite header")
            os.link(partial, path)
            directory_descriptor = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(directory_descriptor)
            finally:
                os.close(directory_descriptor)
        finally:
            if os.path.lexists(partial):
                os.unlink(partial)
        return reply


class AsyncDaemon(_AsyncNamespace):
    """Namespace ``daemon`` (the daemon itself; root or the daemon's user)."""

    _name = "daemon"

    async def reload(self) -> pb.DaemonReloadReply:
        """Re-reads the daemon's configuration; returns once it is in effect, or raises why not
        (code 8, naming the file and the problem; the previous configuration stays in effect)."""
        return cast(pb.DaemonReloadReply, await self._invoke("reload", pb.DaemonReloadRequest()))


class AsyncDebug(_AsyncNamespace):
    """Namespace ``debug`` (only with ``debug.faultInjection``; root only). Never use in production."""

    _name = "debug"

    async def freeze_engine(self, seconds: int) -> pb.Empty:
        """Blocks the daemon's engine for ``seconds`` (at most 600)."""
        return cast(pb.Empty, await self._invoke("freezeEngine", UInt32Value(value=seconds)))


# ---------------------------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------------------------


class AsyncClient:
    """A connection to mentoryd for asyncio code. Make one with :func:`connect`.

    Calls may run concurrently on one client; ``timeout`` bounds each call. A request the daemon
    refuses raises :class:`~mentory.MentoryError` with the wire code; the client stays usable.
    """

    def __init__(self, connection: Connection, options: ConnectOptions) -> None:
        self._connection = connection
        self._options = options
        self._subscriptions: "List[AsyncSubscription]" = []
        self._schema: Optional[DescribedSchema] = None
        self._describing: "Optional[asyncio.Future[DescribedSchema]]" = None
        #: Namespace ``mentor``.
        self.mentor = AsyncMentor(self)
        #: Namespace ``diary``.
        self.diary = AsyncDiary(self)
        #: Namespace ``reachability``.
        self.reachability = AsyncReachability(self)
        #: Namespace ``storage``.
        self.storage = AsyncStorage(self)
        #: Namespace ``daemon``.
        self.daemon = AsyncDaemon(self)
        #: Namespace ``debug``.
        self.debug = AsyncDebug(self)

    @property
    def welcome(self) -> pb.Welcome:
        """The daemon's ``Welcome``: version, handlers, frame limit, epoch."""
        return self._connection.welcome

    @property
    def socket_path(self) -> str:
        return self._options.socket_path

    @property
    def max_frame_length(self) -> int:
        """The largest request frame the daemon accepts; larger ones are refused before sending."""
        return self._connection.max_frame_length

    @property
    def closed(self) -> bool:
        return self._connection.closed

    async def call(
        self,
        namespace: str,
        method: Union[str, RequestLike] = None,
        request: RequestLike = None,
        *,
        request_type: Optional[Type[Message]] = None,
        reply_type: Optional[type] = None,
        timeout: Optional[float] = None,
    ) -> Any:
        """Calls any method of any namespace, plugins' included: ``call("habits.track", {"name": "walk"})``
        or ``call("habits", "track", ...)`` (``namespace`` is the namespace, or ``"namespace.method"``
        when ``method`` is left out).

        ``request`` is a message, a dict (JSON or proto field names, parsed into the method's request
        type), raw bytes, or ``None`` for an empty body. The reply comes back decoded with the method's
        reply type, or ``reply_type`` if given (``bytes``: the raw body).

        The types of mentory.proto's methods are built in; those of any other namespace (a plugin's)
        come from the daemon's ``session.describe``, fetched once per connection when first needed and
        again when a call names a method the last answer did not list. Without generated code, the
        reply is an instance of a class built from the daemon's descriptors (``reply.DESCRIPTOR.full_name``
        names it); with the plugin's ``*_pb2`` module imported, it is that module's class. A method
        the daemon does not describe takes bytes or a message and answers raw bytes.
        ``request_type`` overrides the request type (for a dict)."""
        namespace, method_name, request = split_target(namespace, method, request)
        need_request = request_type is None and isinstance(request, Mapping)
        types = await self._method_types(namespace, method_name, need_request, reply_type is None)
        body = encode_request(namespace, method_name, request, request_type or (types[0] if types else None))
        reply = await self._connection.request(
            namespace, method_name, body, self._options.timeout if timeout is None else timeout
        )
        return decode_reply(namespace, method_name, reply, reply_type or (types[1] if types else None))

    async def _call_on_behalf(
        self,
        call_id: int,
        namespace: str,
        method: Union[str, RequestLike],
        request: RequestLike,
        *,
        request_type: Optional[Type[Message]],
        reply_type: Optional[type],
        timeout: Optional[float],
    ) -> Any:
        """``plugin.call`` on this (a plugin's) connection: :meth:`call`, made for the caller of the forwarded
        call ``call_id`` (:meth:`mentory.plugin.Call.call`)."""
        namespace, method_name, request = split_target(namespace, method, request)
        need_request = request_type is None and isinstance(request, Mapping)
        types = await self._method_types(namespace, method_name, need_request, reply_type is None)
        body = encode_request(namespace, method_name, request, request_type or (types[0] if types else None))
        message = pb.PluginCallRequest(call_id=call_id, namespace=namespace, method=method_name, body=body)
        raw = await self._connection.request(
            "plugin", "call", message.SerializeToString(), self._options.timeout if timeout is None else timeout
        )
        reply = pb.PluginCallReply()
        reply.ParseFromString(raw)
        return decode_reply(namespace, method_name, reply.body, reply_type or (types[1] if types else None))

    async def describe(self) -> pb.DescribeReply:
        """``session.describe``: every namespace the daemon serves, plugins' included, with their
        methods, topics and message descriptors. Also refreshes the types :meth:`call` uses."""
        return (await self._refresh_schema()).reply

    async def message_type(self, full_name: str) -> Type[Message]:
        """The message class of ``full_name`` (e.g. ``"habits.v1.TrackRequest"``), from mentory.proto or
        the daemon's ``session.describe``, to build a request as a message rather than a dict.
        Raises ``KeyError`` when the daemon describes no such message."""
        for attempt in range(2):
            schema = self._schema if attempt == 0 and self._schema is not None else await self._refresh_schema()
            try:
                return schema.message_type(full_name)
            except KeyError:
                if attempt == 1:
                    raise KeyError(f"the daemon's session.describe names no message {full_name!r}") from None
        raise AssertionError("unreachable")

    async def _method_types(self, namespace: str, method: str, need_request: bool, need_reply: bool) -> Optional[Types]:
        types = method_types(namespace, method)
        if types is not None or not (need_request or need_reply):
            return types
        schema = self._schema
        if schema is None or (namespace, method) not in schema.methods:
            schema = await self._refresh_schema()  # once per connection, and when a method is new
        types = schema.methods.get((namespace, method))
        if types is None and need_request and schema.namespaces.get(namespace) == 0:
            raise MentoryError(
                ErrorCode.UNAVAILABLE,
                f"{namespace}.{method}: namespace '{namespace}' is declared but its plugin is not connected, "
                "so its request type is unknown (session.describe lists no methods)",
            )
        return types

    async def _refresh_schema(self) -> DescribedSchema:
        describing = self._describing
        if describing is None or describing.done():
            describing = self._describing = asyncio.ensure_future(self._fetch_schema())
        return await asyncio.shield(describing)

    async def _fetch_schema(self) -> DescribedSchema:
        self._schema = await fetch_schema(self._connection, self._options.timeout)
        return self._schema

    async def ping(self) -> None:
        """Round trip to the daemon."""
        await self.call("session", "ping")

    async def status(self) -> pb.StatusReply:
        """Version, uptime, connections, handlers, subscribers, per-topic sequence numbers and epoch."""
        return cast(pb.StatusReply, await self.call("session", "status"))

    def subscribe(
        self,
        topics: Sequence[str],
        resume: Union[Position, str, None] = None,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        backoff: Optional[Backoff] = None,
    ) -> "AsyncSubscription":
        """Subscribes to ``topics`` on a connection of its own; iterate it with ``async for``.

        See :class:`AsyncSubscription`. It starts on the first iteration or ``await sub.start()``.
        """
        subscription = AsyncSubscription(self._options, topics, resume, buffer_size=buffer_size, backoff=backoff)
        self._subscriptions = [s for s in self._subscriptions if not s.closed]
        self._subscriptions.append(subscription)
        return subscription

    async def close(self) -> None:
        """Closes the connection and every subscription started from this client."""
        for subscription in self._subscriptions:
            await subscription.close()
        self._subscriptions.clear()
        await self._connection.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


class _Connect:
    """What :func:`connect` returns: use with ``async with`` or ``await`` it."""

    def __init__(self, options: ConnectOptions) -> None:
        self._options = options
        self._client: Optional[AsyncClient] = None

    async def _open(self) -> AsyncClient:
        connection = await self._options.open()
        return AsyncClient(connection, self._options)

    def __await__(self) -> Generator[Any, None, AsyncClient]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncClient:
        self._client = await self._open()
        return self._client

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._client is not None:
            await self._client.close()


def connect(
    socket_path: Optional[str] = None,
    client_name: str = "python",
    timeout: float = 10.0,
    *,
    max_incoming_frame: int = DEFAULT_MAX_INCOMING_FRAME,
    trusted_uids: Optional[Iterable[int]] = None,
) -> _Connect:
    """Connects to mentoryd: ``async with mentory.aio.connect() as client`` or ``client = await mentory.aio.connect()``.

    ``socket_path`` defaults to ``$MENTORY_SOCKET``, then the standard paths (see
    :mod:`mentory.discovery`). ``timeout`` bounds connecting, the handshake and each call.
    ``max_incoming_frame`` is the largest frame this client reads. ``trusted_uids`` replaces the
    uids the server may run as (default: root, you, and the daemon user). Raises
    :class:`~mentory.SocketTrustError` for an untrusted socket, :class:`~mentory.ConnectionClosed`
    when nothing answers.
    """
    return _Connect(make_options(socket_path, client_name, timeout, max_incoming_frame, trusted_uids))


# ---------------------------------------------------------------------------------------------
# Subscriptions
# ---------------------------------------------------------------------------------------------

_RETRYABLE_CODES = frozenset(
    int(code)
    for code in (
        ErrorCode.UNSPECIFIED,
        ErrorCode.TRUNCATED_FRAME,
        ErrorCode.SHUTTING_DOWN,
        ErrorCode.UNAVAILABLE,
        ErrorCode.TOO_MANY_CONNECTIONS,
        ErrorCode.TOO_MANY_REQUESTS,
        ErrorCode.STORAGE_FAILURE,
        ErrorCode.HANDSHAKE_TIMEOUT,
    )
)


def _consume_result(task: "asyncio.Future[None]") -> None:
    # The failure is kept in AsyncSubscription._failure and raised to the consumer from there.
    if not task.cancelled():
        task.exception()


def _retryable(error: BaseException) -> bool:
    if isinstance(error, SocketTrustError):
        return False
    if isinstance(error, (Timeout, OSError)):
        return True
    if isinstance(error, (ConnectionClosed, MentoryError)) and not isinstance(error, ProtocolError):
        return int(error.code) in _RETRYABLE_CODES
    return False


class AsyncSubscription:
    """Events of some topics, as an async iterator, surviving disconnects.

    - The first event per topic is a ``SNAPSHOT`` (or, with ``resume=``, the missed changes or a
      ``RESET``); then ``CHANGE`` events in sequence order.
    - :attr:`position` is where the consumer is: the last event handed over per topic. Store its
      :meth:`~mentory.Position.token` to resume later.
    - When the connection is lost, the subscription reconnects after ``backoff`` delays (1 s
      initial, doubling, jittered, capped at 30 s by default) and resubscribes from
      :attr:`position`: the daemon replays what was missed, or sends a ``RESET`` (e.g. after a
      restart, when the epoch changes). A reset is handed over as an event of kind ``RESET``;
      nothing is dropped silently.
    - At most ``buffer_size`` received events wait for the consumer. When a new event finds the
      buffer full, the subscription drops its connection; the consumer still gets every buffered
      event, then the subscription reconnects at once and resumes from the last delivered
      position, so the daemon replays the rest or sends a ``RESET``. Memory stays bounded and a
      slow consumer never loses events silently.
    - Errors that retrying cannot fix (an unknown topic, permission denied, an untrusted socket)
      are raised from the iteration; ``SHUTTING_DOWN`` and ``UNAVAILABLE`` are retried like a lost
      connection. A wait that times out (``Subscription.get(timeout=...)``) never interrupts a
      reconnection in progress.
    """

    def __init__(
        self,
        options: ConnectOptions,
        topics: Sequence[str],
        resume: Union[Position, str, None] = None,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        backoff: Optional[Backoff] = None,
    ) -> None:
        if isinstance(topics, str):
            raise TypeError("topics must be a list of topic names, e.g. ['diary']")
        if not topics:
            raise ValueError("subscribe to at least one topic")
        if buffer_size < 1:
            raise ValueError("buffer_size must be at least 1")
        self._options = options
        self.topics: List[str] = list(dict.fromkeys(topics))
        self._position = Position.from_token(resume) if isinstance(resume, str) else (resume or Position())
        self._received = self._position
        self._buffer: Deque[Event] = collections.deque()
        self.buffer_size = buffer_size
        self.backoff = backoff or Backoff()
        self._connection: Optional[Connection] = None
        self._generation = 0
        self._overflowed = False
        self._wakeup: Optional[asyncio.Event] = None
        self._started = False
        self._first_reply: Optional[pb.SubscribeReply] = None
        self._closed = False
        self._failure: Optional[BaseException] = None
        self._lost_error: Optional[MentoryError] = None
        self._lock: Optional[asyncio.Lock] = None
        # Reconnects run as their own task, so that a consumer's wait that times out (``get(timeout=1)``)
        # cancels only its wait, never the reconnection and its back-off.
        self._reconnecting: Optional["asyncio.Future[None]"] = None
        # The body types of topics mentory.proto does not declare, from session.describe on the current connection.
        self._described_topics: Dict[str, Types] = {}
        #: How many times the subscription reconnected (after a loss or an overflow).
        self.reconnects = 0
        #: How many times the buffer overflowed.
        self.overflows = 0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def position(self) -> Position:
        """The last event handed to the consumer, per topic (pass as ``resume=`` later)."""
        return self._position

    async def start(self) -> pb.SubscribeReply:
        """Connects and subscribes, if not done yet (a second call returns the first reply); raises
        what the first attempt raises."""
        if self._lock is None:
            self._lock = asyncio.Lock()
            self._wakeup = asyncio.Event()
        async with self._lock:
            if self._closed:
                raise ConnectionClosed("the subscription is closed")
            if self._first_reply is None:
                self._first_reply = await self._subscribe_once()
                self._started = True
            return self._first_reply

    async def _subscribe_once(self) -> pb.SubscribeReply:
        self._generation += 1
        generation = self._generation
        self._overflowed = False
        connection = await self._options.open(
            on_event=lambda event: self._on_event(generation, event),
            on_close=lambda error: self._on_close(generation, error),
        )
        # Current before the first event can arrive, so that an overflow closes this connection.
        self._connection = connection
        try:
            if any(topic not in TOPICS for topic in self.topics):  # a plugin's topic: learn its types
                self._described_topics = (await fetch_schema(connection, self._options.timeout)).topics
            request = pb.SubscribeRequest()
            for topic in self.topics:
                known = self._position.topics.get(topic)
                if known is None:
                    request.topics.add(topic=topic)
                else:
                    request.topics.add(topic=topic, epoch=known[0], resume_after=known[1])
            body = await connection.request("session", "subscribe", request.SerializeToString(), self._options.timeout)
        except BaseException:
            await connection.close()
            raise
        reply = pb.SubscribeReply()
        reply.ParseFromString(body)
        self._lost_error = None
        return reply

    def _on_event(self, generation: int, raw: pb.Event) -> None:
        if generation != self._generation or self._overflowed:
            return
        try:
            event = decode_event(raw, TOPICS.get(raw.topic) or self._described_topics.get(raw.topic))
        except ProtocolError as error:
            logger.warning("dropping the connection of a subscription: %s", error)
            self._drop_connection()
            return
        if self._received.includes(event):
            logger.debug("ignoring %s change %d: already received", event.topic, event.sequence)
            return
        if len(self._buffer) >= self.buffer_size:
            self._overflowed = True
            self.overflows += 1
            logger.warning(
                "subscription buffer full (%d events): reconnecting from the last delivered position once it is read",
                self.buffer_size,
            )
            self._drop_connection()
            return
        self._buffer.append(event)
        self._received = self._received.advanced(event)
        self._wake()

    def _on_close(self, generation: int, error: MentoryError) -> None:
        if generation != self._generation:
            return
        self._lost_error = error
        self._wake()

    def _drop_connection(self) -> None:
        connection = self._connection
        if connection is not None:
            asyncio.ensure_future(connection.close())

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        if not self._started:
            await self.start()
        assert self._wakeup is not None
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._buffer:
                event = self._buffer.popleft()
                self._position = self._position.advanced(event)
                return event
            if self._failure is not None:
                raise self._failure
            connection = self._connection
            if connection is None or connection.closed:
                if self._reconnecting is None or self._reconnecting.done():
                    self._reconnecting = asyncio.ensure_future(self._reconnect())
                    self._reconnecting.add_done_callback(_consume_result)
                await asyncio.shield(self._reconnecting)
                continue
            self._wakeup.clear()
            await self._wakeup.wait()

    async def _reconnect(self) -> None:
        # Every received event has been delivered here (the buffer is empty), so resuming from
        # the delivered position neither skips nor repeats anything.
        self._received = self._position
        immediate = self._overflowed
        attempt = 0
        while not self._closed:
            if not immediate:
                delay = self.backoff.delay(attempt)
                logger.info(
                    "subscription to %s lost (%s); reconnecting in %.1f s",
                    ",".join(self.topics),
                    self._lost_error,
                    delay,
                )
                await asyncio.sleep(delay)
            immediate = False
            if self._closed:
                return
            try:
                await self._subscribe_once()
                self.reconnects += 1
                return
            except Exception as error:  # noqa: BLE001 - classified below
                if self._overflowed and self._buffer:
                    return  # the replay overflowed the buffer already: deliver it, then resume at once
                attempt += 1
                if not _retryable(error):
                    self._failure = error
                    raise
                if self.backoff.max_attempts is not None and attempt >= self.backoff.max_attempts:
                    self._failure = error
                    raise
                self._lost_error = error if isinstance(error, MentoryError) else ConnectionClosed(str(error))

    async def close(self) -> None:
        """Ends the subscription: its connection closes and iteration stops."""
        self._closed = True
        self._wake()
        if self._reconnecting is not None and not self._reconnecting.done():
            self._reconnecting.cancel()
        connection = self._connection
        self._connection = None
        self._generation += 1
        if connection is not None:
            await connection.close()

    async def __aenter__(self) -> "AsyncSubscription":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()
