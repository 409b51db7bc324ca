"""The synchronous client.

::

    with mentory.connect() as client:
        client.ping()
        state = client.mentor.get()

A :class:`Client` runs the asyncio client (:mod:`mentory.aio`) on a private event-loop thread,
so one client may be used from several threads at once and their calls are pipelined on one
connection.
"""

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Iterable, Iterator, Optional, Sequence, Type, TypeVar, Union, cast

from google.protobuf.message import Message

from . import aio
from ._codec import RequestLike
from ._connection import DEFAULT_MAX_INCOMING_FRAME
from . import _messages as pb
from ._requests import ActionItemLike, DayLike
from .errors import ConnectionClosed, Timeout
from .events import Backoff, Event, Position

__all__ = ["connect", "Client", "Subscription"]

T = TypeVar("T")


class _LoopThread:
    """An event loop on a daemon thread; :meth:`run` executes a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="mentory-client", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Awaitable[T], timeout: Optional[float] = None) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a mentory.Client cannot be used from its own callbacks")
        if self.loop.is_closed():
            if asyncio.iscoroutine(coroutine):
                coroutine.close()
            raise ConnectionClosed("the client is closed")
        future: "concurrent.futures.Future[T]" = asyncio.run_coroutine_threadsafe(coroutine, self.loop)  # type: ignore[arg-type]
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise Timeout(f"no event within {timeout} s") from None
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class _Namespace:
    def __init__(self, client: "Client", namespace: Any) -> None:
        self._client = client
        self._async = namespace

    def _run(self, coroutine: Awaitable[T]) -> T:
        return self._client._runner.run(coroutine)


class Mentor(_Namespace):
    """Namespace ``mentor``: the day's mentor message."""

    _async: "aio.AsyncMentor"

    def get(self) -> pb.MentorState:
        """The current state; ``HasField("message")`` is false until the first ``set``."""
        return self._run(self._async.get())

    def set(
        self,
        content: str,
        character: Union[str, int] = "warm",
        todos: Optional[Iterable[ActionItemLike]] = None,
        **fields: Any,
    ) -> pb.MentorState:
        """Replaces the mentor message. ``character`` is ``"warm"`` or ``"cool"``; ``todos`` are action
        items (strings get a fresh id from the daemon)."""
        return self._run(self._async.set(content, character, todos, **fields))

    def complete_todo(self, id: str, **fields: Any) -> pb.MentorState:
        """Marks the action item ``id`` done (``NOT_FOUND`` if there is none)."""
        return self._run(self._async.complete_todo(id, **fields))


class Reachability(_Namespace):
    """Namespace ``reachability``: companion devices' state."""

    _async: "aio.AsyncReachability"

    def get(self) -> pb.ReachabilitySnapshot:
        """Every peer, sorted by name."""
        return self._run(self._async.get())

    def report(
        self,
        peer: str,
        is_paired: bool = False,
        is_app_installed: bool = False,
        is_reachable: bool = False,
        **fields: Any,
    ) -> pb.PeerState:
        """Reports a peer's state; it becomes unreachable when this connection closes."""
        return self._run(self._async.report(peer, is_paired, is_app_installed, is_reachable, **fields))


class Diary(_Namespace):
    """Namespace ``diary``: one entry per day."""

    _async: "aio.AsyncDiary"

    def add(
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
        return self._run(self._async.add(record_date, title, text, emotion, analysis, suggestions, **fields))

    def get(self, id: str, **fields: Any) -> pb.DiaryEntry:
        """The entry with this id (``NOT_FOUND`` if there is none)."""
        return self._run(self._async.get(id, **fields))

    def list(self, limit: int = 0, before: Optional[DayLike] = None, **fields: Any) -> pb.DiaryListReply:
        """Entries newest day first; ``limit`` 0 means 50, ``before`` (exclusive) pages backwards."""
        return self._run(self._async.list(limit, before, **fields))

    def delete(self, id: str, **fields: Any) -> pb.DiaryEntry:
        """Deletes the entry and returns it (``NOT_FOUND`` if there is none)."""
        return self._run(self._async.delete(id, **fields))

    def set_suggestion_done(self, entry_id: str, suggestion_id: str, done: bool = True, **fields: Any) -> pb.DiaryEntry:
        """Ticks (or unticks) one of an entry's suggested action items."""
        return self._run(self._async.set_suggestion_done(entry_id, suggestion_id, done, **fields))


class Storage(_Namespace):
    """Namespace ``storage`` (SQLite store only; root or the daemon's user)."""

    _async: "aio.AsyncStorage"

    def backup(self, destination: str) -> pb.StorageBackupReply:
        """Copies the daemon's database to ``destination``, written by this process; see
        :meth:`mentory.aio.AsyncStorage.backup`."""
        return self._run(self._async.backup(destination))


class Daemon(_Namespace):
    """Namespace ``daemon`` (the daemon itself; root or the daemon's user)."""

    _async: "aio.AsyncDaemon"

    def reload(self) -> pb.DaemonReloadReply:
        """Re-reads the daemon's configuration; see :meth:`mentory.aio.AsyncDaemon.reload`."""
        return self._run(self._async.reload())


class Debug(_Namespace):
    """Namespace ``debug`` (only with ``debug.faultInjection``; root only). Never use in production."""

    _async: "aio.AsyncDebug"

    def freeze_engine(self, seconds: int) -> pb.Empty:
        """Blocks the daemon's engine for ``seconds`` (at most 600)."""
        return self._run(self._async.freeze_engine(seconds))


class Client:
    """A connection to mentoryd. Make one with :func:`connect`; close it (or use ``with``).

    A request the daemon refuses raises :class:`~mentory.MentoryError` with the wire code; the
    client stays usable. Thread-safe: calls from several threads are pipelined.
    """

    def __init__(self, options: "aio.ConnectOptions") -> None:
        self._runner = _LoopThread()
        try:
            self._async: aio.AsyncClient = self._runner.run(self._open(options))
        except BaseException:
            self._runner.stop()
            raise
        #: Namespace ``mentor``.
        self.mentor = Mentor(self, self._async.mentor)
        #: Namespace ``diary``.
        self.diary = Diary(self, self._async.diary)
        #: Namespace ``reachability``.
        self.reachability = Reachability(self, self._async.reachability)
        #: Namespace ``storage``.
        self.storage = Storage(self, self._async.storage)
        #: Namespace ``daemon``.
        self.daemon = Daemon(self, self._async.daemon)
        #: Namespace ``debug``.
        self.debug = Debug(self, self._async.debug)

    @staticmethod
    async def _open(options: "aio.ConnectOptions") -> "aio.AsyncClient":
        return aio.AsyncClient(await options.open(), options)

    @property
    def welcome(self) -> pb.Welcome:
        """The daemon's ``Welcome``: version, handlers, frame limit, epoch."""
        return self._async.welcome

    @property
    def socket_path(self) -> str:
        return self._async.socket_path

    @property
    def max_frame_length(self) -> int:
        """The largest request frame the daemon accepts; larger ones are refused before sending."""
        return self._async.max_frame_length

    @property
    def closed(self) -> bool:
        return self._async.closed

    def call(
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
        returns the reply decoded, with no generated code needed; see :meth:`mentory.aio.AsyncClient.call`."""
        return self._runner.run(
            self._async.call(namespace, method, request, request_type=request_type, reply_type=reply_type, timeout=timeout)
        )

    def describe(self) -> pb.DescribeReply:
        """``session.describe``; see :meth:`mentory.aio.AsyncClient.describe`."""
        return self._runner.run(self._async.describe())

    def message_type(self, full_name: str) -> Type[Message]:
        """The message class of ``full_name``; see :meth:`mentory.aio.AsyncClient.message_type`."""
        return self._runner.run(self._async.message_type(full_name))

    def ping(self) -> None:
        """Round trip to the daemon."""
        self._runner.run(self._async.ping())

    def status(self) -> pb.StatusReply:
        """Version, uptime, connections, handlers, subscribers, per-topic sequence numbers and epoch."""
        return self._runner.run(self._async.status())

    def subscribe(
        self,
        topics: Sequence[str],
        resume: Union[Position, str, None] = None,
        *,
        buffer_size: int = aio.DEFAULT_BUFFER_SIZE,
        backoff: Optional[Backoff] = None,
    ) -> "Subscription":
        """Subscribes to ``topics`` on a connection of its own and returns an iterator of events.

        The subscription is active when this returns (errors such as an unknown topic are raised
        here). Behaviour on disconnects and slow consumers: see :class:`mentory.aio.AsyncSubscription`.
        """
        subscription = self._async.subscribe(topics, resume, buffer_size=buffer_size, backoff=backoff)
        self._runner.run(subscription.start())
        return Subscription(self, subscription)

    def close(self) -> None:
        """Closes the connection, its subscriptions, and the client's thread."""
        if not self._runner.loop.is_closed():
            try:
                self._runner.run(self._async.close())
            finally:
                self._runner.stop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        runner = getattr(self, "_runner", None)
        if runner is not None and not runner.loop.is_closed() and runner.loop.is_running():
            runner.loop.call_soon_threadsafe(runner.loop.stop)


class Subscription:
    """A blocking iterator of :class:`~mentory.Event` objects; see :class:`mentory.aio.AsyncSubscription`."""

    def __init__(self, client: Client, subscription: "aio.AsyncSubscription") -> None:
        self._client = client
        self._async = subscription

    @property
    def position(self) -> Position:
        """The last event handed over, per topic (pass as ``resume=`` later)."""
        return self._async.position

    @property
    def topics(self) -> Sequence[str]:
        return self._async.topics

    @property
    def reconnects(self) -> int:
        return self._async.reconnects

    @property
    def overflows(self) -> int:
        return self._async.overflows

    def get(self, timeout: Optional[float] = None) -> Event:
        """The next event; raises :class:`~mentory.Timeout` if none comes within ``timeout`` seconds
        and ``StopIteration`` once the subscription is closed."""
        try:
            return self._client._runner.run(self._async.__anext__(), timeout)
        except StopAsyncIteration:
            raise StopIteration from None

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        return self.get()

    def close(self) -> None:
        """Ends the subscription."""
        if not self._client._runner.loop.is_closed():
            self._client._runner.run(self._async.close())

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def connect(
    socket_path: Optional[str] = None,
    client_name: str = "python",
    timeout: float = 10.0,
    *,
    max_incoming_frame: int = DEFAULT_MAX_INCOMING_FRAME,
    trusted_uids: Optional[Iterable[int]] = None,
) -> Client:
    """Connects to mentoryd and returns a :class:`Client` (use it in a ``with`` block).

    ``socket_path`` defaults to ``$MENTORY_SOCKET``, then the standard paths (see
    :mod:`mentory.discovery`). ``timeout`` bounds connecting, the handshake and each call.
    ``max_incoming_frame`` is the largest frame this client reads. ``trusted_uids`` replaces the
    uids the server may run as (default: root, you, and the daemon user). Raises
    :class:`~mentory.SocketTrustError` for an untrusted socket, :class:`~mentory.ConnectionClosed`
    when nothing answers.
    """
    return Client(aio.make_options(socket_path, client_name, timeout, max_incoming_frame, trusted_uids))
