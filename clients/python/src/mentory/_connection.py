"""One connection to mentoryd: framing, handshake, request ids and the reader task (asyncio)."""

import asyncio
import errno
import itertools
import logging
import os
import socket
import struct
from typing import Callable, Dict, Iterable, Optional

from google.protobuf.message import DecodeError

from . import discovery
from ._enums import ErrorCode
from . import _messages as pb
from .errors import ConnectionClosed, MentoryError, ProtocolError, Timeout

logger = logging.getLogger("mentory")

#: The only protocol version this client speaks.
PROTOCOL_VERSION = 1
#: The largest frame payload this client reads unless told otherwise (a frame announcing more
#: closes the connection with a ProtocolError, code FRAME_TOO_LARGE).
DEFAULT_MAX_INCOMING_FRAME = 16 * 1024 * 1024

_HEADER = struct.Struct(">I")


def _connection_hint(path: str, code: Optional[int]) -> str:
    """What to do about a failed connect, by its errno: a socket the caller may not use is not a
    daemon that is down. When MENTORY_SOCKET names the socket, says so instead of suggesting it."""
    if os.environ.get("MENTORY_SOCKET") == path:
        source = "(MENTORY_SOCKET names this socket.)"
    else:
        source = "To use another socket, pass socket_path or set MENTORY_SOCKET."
    if code in (errno.EACCES, errno.EPERM):
        return (
            "Permission denied on the socket: your user may not connect to it. Connect as its owner or as a "
            f"member of its group (ls -l {path} shows them; the system daemon's group is mentory, for the "
            "people who share its diary: sudo usermod -aG mentory NAME, then log in again; your own diary is "
            f"your user instance, systemctl --user start mentoryd.socket). {source}"
        )
    if code == errno.ECONNREFUSED:
        return f"Nothing listens on the socket: the daemon is not running, or it is restarting. {source}"
    if code == errno.ENOENT:
        return f"No socket is there: the daemon is not running, or it listens elsewhere. {source}"
    return f"Is the daemon running? {source}"

EventHandler = Callable[[pb.Event], None]
#: Receives each ``PluginCall`` the daemon sends a registered plugin (on the event loop, must not block).
PluginCallHandler = Callable[[pb.PluginCall], None]


def frame(envelope: pb.Envelope) -> bytes:
    """The bytes of one frame: a 4-byte big-endian length, then the serialized envelope."""
    payload = envelope.SerializeToString()
    return _HEADER.pack(len(payload)) + payload


class Connection:
    """A handshaken connection. Requests may be pipelined; responses are matched by id.

    Use :meth:`open`. Events go to ``on_event`` (called on the event loop, must not block);
    ``on_close`` is called once with the error that ended the connection. A plugin's connection
    passes ``on_plugin_call`` (same rules) and answers with :meth:`send_plugin_reply`; on any
    other connection a ``PluginCall`` frame is a protocol error.
    """

    def __init__(
        self,
        path: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        welcome: pb.Welcome,
        max_incoming_frame: int,
        on_event: Optional[EventHandler],
        on_close: Optional[Callable[[MentoryError], None]],
        on_plugin_call: Optional[PluginCallHandler] = None,
    ) -> None:
        self.path = path
        self.welcome = welcome
        self._reader = reader
        self._writer = writer
        self._max_incoming_frame = max_incoming_frame
        self._on_event = on_event
        self._on_close = on_close
        self._on_plugin_call = on_plugin_call
        self._ids = itertools.count(1)
        self._pending: Dict[int, "asyncio.Future[pb.Response]"] = {}
        self._drain_lock = asyncio.Lock()
        self._error: Optional[MentoryError] = None
        self._reader_task = asyncio.ensure_future(self._read_loop())

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        path: str,
        client_name: str,
        timeout: float,
        max_incoming_frame: int = DEFAULT_MAX_INCOMING_FRAME,
        trusted_uids: Optional[Iterable[int]] = None,
        on_event: Optional[EventHandler] = None,
        on_close: Optional[Callable[[MentoryError], None]] = None,
        on_plugin_call: Optional[PluginCallHandler] = None,
    ) -> "Connection":
        """Checks the socket's trust, connects, and performs the handshake, all within ``timeout``."""
        discovery.check_directory(path, trusted_uids)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        writer: Optional[asyncio.StreamWriter] = None
        try:
            loop = asyncio.get_running_loop()
            try:
                await asyncio.wait_for(loop.sock_connect(sock, path), timeout)
            except asyncio.TimeoutError:
                raise Timeout(f"connecting to mentoryd at {path} took longer than {timeout} s") from None
            except OSError as error:
                raise ConnectionClosed(
                    f"cannot connect to mentoryd at {path}: {error.strerror or error}. "
                    + _connection_hint(path, error.errno)
                ) from error
            discovery.check_peer(sock, path, trusted_uids)
            # The handshake runs on the raw socket, reading exactly one frame, so that a daemon that
            # refuses the connection (e.g. TOO_MANY_CONNECTIONS) is heard even when our Hello
            # cannot be written any more.
            hello = pb.Envelope(hello=pb.Hello(protocol_version=PROTOCOL_VERSION, client_name=client_name))
            try:
                welcome = await asyncio.wait_for(
                    cls._handshake(loop, sock, frame(hello), path, max_incoming_frame), timeout
                )
            except asyncio.TimeoutError:
                raise Timeout(f"mentoryd at {path} sent no Welcome within {timeout} s") from None
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        except BaseException:
            if writer is not None:
                writer.close()
            else:
                sock.close()
            raise
        return cls(path, reader, writer, welcome, max_incoming_frame, on_event, on_close, on_plugin_call)

    @staticmethod
    async def _handshake(
        loop: asyncio.AbstractEventLoop, sock: socket.socket, hello: bytes, path: str, max_incoming_frame: int
    ) -> pb.Welcome:
        try:
            await loop.sock_sendall(sock, hello)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may already have refused us; read why
        try:
            (length,) = _HEADER.unpack(await _sock_read_exactly(loop, sock, _HEADER.size))
            _check_length(length, max_incoming_frame)
            envelope = _parse_envelope(await _sock_read_exactly(loop, sock, length))
        except (EOFError, ConnectionResetError):
            raise ConnectionClosed(f"mentoryd at {path} closed the connection during the handshake") from None
        kind = envelope.WhichOneof("kind")
        if kind == "welcome":
            return envelope.welcome
        if kind == "connection_error":
            error = envelope.connection_error.error
            raise ConnectionClosed(f"mentoryd refused the connection: {error.message}", error.code)
        raise ProtocolError(f"mentoryd at {path} answered Hello with {kind or 'an empty envelope'}, not Welcome")

    # -- state ---------------------------------------------------------------------------------

    @property
    def max_frame_length(self) -> int:
        """The largest payload the daemon accepts (``Welcome.max_frame_length``)."""
        return self.welcome.max_frame_length

    @property
    def closed(self) -> bool:
        return self._error is not None

    # -- requests ------------------------------------------------------------------------------

    async def request(self, namespace: str, method: str, body: bytes, timeout: Optional[float]) -> bytes:
        """Sends one request and returns the reply body; raises :class:`MentoryError` with the wire code
        for an error response, :class:`Timeout` when no answer comes within ``timeout`` seconds."""
        self._raise_if_closed()
        request_id = next(self._ids)
        envelope = pb.Envelope(request=pb.Request(id=request_id, namespace=namespace, method=method, body=body))
        data = self._checked_frame(envelope, f"the {namespace}.{method} request")
        future: "asyncio.Future[pb.Response]" = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            response = await asyncio.wait_for(self._send_and_wait(data, future), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"mentoryd did not answer {namespace}.{method} within {timeout} s") from None
        finally:
            self._pending.pop(request_id, None)
        if response.WhichOneof("result") == "error":
            raise MentoryError(response.error.code, response.error.message, response.error.reason)
        return response.body

    def _checked_frame(self, envelope: pb.Envelope, what: str) -> bytes:
        """The envelope's frame; raises :class:`ProtocolError` (nothing sent) when the daemon would refuse its size."""
        data = frame(envelope)
        limit = self.max_frame_length
        if limit and len(data) - _HEADER.size > limit:
            raise ProtocolError(
                f"{what} is {len(data) - _HEADER.size} bytes, more than the "
                f"{limit} bytes mentoryd accepts in one frame (Welcome.max_frame_length)",
                ErrorCode.FRAME_TOO_LARGE,
            )
        return data

    def write_plugin_reply(self, reply: pb.PluginReply) -> None:
        """Queues a plugin's answer without waiting for the socket to take it (for short answers
        given from a callback). Raises :class:`ProtocolError` when it exceeds the daemon's frame
        limit and :class:`ConnectionClosed` when the connection is gone."""
        self._raise_if_closed()
        self._writer.write(self._checked_frame(pb.Envelope(plugin_reply=reply), f"the answer to plugin call {reply.call_id}"))

    async def send_plugin_reply(self, reply: pb.PluginReply) -> None:
        """Sends a plugin's answer to a ``PluginCall`` and waits until the socket has taken it
        (back-pressure). Raises like :meth:`write_plugin_reply`."""
        self.write_plugin_reply(reply)
        async with self._drain_lock:
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as error:
                self._raise_if_closed()
                raise ConnectionClosed(f"cannot write to mentoryd: {error}") from error

    async def _send_and_wait(self, data: bytes, future: "asyncio.Future[pb.Response]") -> pb.Response:
        self._writer.write(data)
        async with self._drain_lock:
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as error:
                self._raise_if_closed()
                raise ConnectionClosed(f"cannot write to mentoryd: {error}") from error
        return await future

    def _raise_if_closed(self) -> None:
        if self._error is not None:
            raise self._closed_error()

    def _closed_error(self) -> ConnectionClosed:
        # A fresh exception per waiter, so tracebacks do not pile up on one shared object.
        assert self._error is not None
        if isinstance(self._error, ConnectionClosed):
            return ConnectionClosed(self._error.message, self._error.code)
        return ConnectionClosed(f"the connection to mentoryd is closed: {self._error.message}", self._error.code)

    # -- reading -------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        error: MentoryError
        try:
            while True:
                envelope = await _read_envelope(self._reader, self._max_incoming_frame)
                kind = envelope.WhichOneof("kind")
                if kind == "response":
                    future = self._pending.pop(envelope.response.id, None)
                    if future is not None and not future.done():
                        future.set_result(envelope.response)
                elif kind == "event":
                    if self._on_event is not None:
                        self._on_event(envelope.event)
                    else:
                        logger.debug("dropping a %s event: this connection has no subscription", envelope.event.topic)
                elif kind == "plugin_call" and self._on_plugin_call is not None:
                    self._on_plugin_call(envelope.plugin_call)
                elif kind == "connection_error":
                    problem = envelope.connection_error
                    if problem.closing:
                        raise ConnectionClosed(f"mentoryd closed the connection: {problem.error.message}", problem.error.code)
                    logger.warning("mentoryd reported a connection error (code %d): %s", problem.error.code, problem.error.message)
                else:
                    raise ProtocolError(f"mentoryd sent an unexpected {kind or 'empty envelope'} frame")
        except asyncio.IncompleteReadError as incomplete:
            if incomplete.partial:
                error = ConnectionClosed("mentoryd closed the connection inside a frame", ErrorCode.TRUNCATED_FRAME)
            else:
                error = ConnectionClosed("mentoryd closed the connection")
        except MentoryError as raised:
            error = raised
        except asyncio.CancelledError:
            error = ConnectionClosed("the connection was closed by this client")
        except (ConnectionError, OSError) as raised:
            error = ConnectionClosed(f"the connection to mentoryd failed: {raised}")
        self._finish(error)

    def _finish(self, error: MentoryError) -> None:
        if self._error is not None:
            return
        self._error = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._closed_error())
        self._pending.clear()
        self._writer.close()
        if self._on_close is not None:
            self._on_close(error)

    async def close(self) -> None:
        """Closes the connection; pending requests fail with :class:`ConnectionClosed`."""
        if not self._reader_task.done():
            self._reader_task.cancel()
            try:
                await self._reader_task
            except asyncio.CancelledError:
                pass
        self._finish(ConnectionClosed("the connection was closed by this client"))
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def _read_envelope(reader: asyncio.StreamReader, max_incoming_frame: int) -> pb.Envelope:
    (length,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    _check_length(length, max_incoming_frame)
    return _parse_envelope(await reader.readexactly(length))


async def _sock_read_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = await loop.sock_recv(sock, count - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _check_length(length: int, max_incoming_frame: int) -> None:
    if length > max_incoming_frame:
        raise ProtocolError(
            f"mentoryd announced a {length}-byte frame, more than this client's limit of {max_incoming_frame} "
            "bytes (max_incoming_frame)",
            ErrorCode.FRAME_TOO_LARGE,
        )


def _parse_envelope(payload: bytes) -> pb.Envelope:
    envelope = pb.Envelope()
    try:
        envelope.ParseFromString(payload)
    except DecodeError as error:
        raise ProtocolError(f"mentoryd sent a frame that is not an Envelope: {error}") from None
    return envelope
