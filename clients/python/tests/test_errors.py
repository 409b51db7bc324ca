"""Error codes from the daemon, connection errors, timeouts and frame limits."""

import asyncio
import errno
import socket
import threading
from pathlib import Path
from typing import List, Tuple

import pytest

import mentory
from mentory import ErrorCode, pb
from support import FakeServer, read_envelope, send_envelope, wait_until, welcome


def _code(call) -> int:  # type: ignore[no-untyped-def]
    with pytest.raises(mentory.MentoryError) as raised:
        call()
    assert type(raised.value) is mentory.MentoryError
    assert raised.value.message
    return int(raised.value.code)


def test_request_error_codes_sync(client: mentory.Client) -> None:
    assert _code(lambda: client.call("nosuchnamespace", "x")) == ErrorCode.UNKNOWN_NAMESPACE == 6
    assert _code(lambda: client.call("diary", "frobnicate")) == ErrorCode.UNKNOWN_METHOD == 7
    assert _code(lambda: client.diary.add("2026-02-30", "t", "x", "neutral")) == ErrorCode.INVALID_ARGUMENT == 8
    assert _code(lambda: client.mentor.set("", "warm")) == ErrorCode.INVALID_ARGUMENT
    assert _code(lambda: client.diary.list(limit=1001)) == ErrorCode.INVALID_ARGUMENT
    assert _code(lambda: client.diary.get("00000000-0000-0000-0000-000000000000")) == ErrorCode.NOT_FOUND == 9
    assert _code(lambda: client.mentor.complete_todo("nope")) == ErrorCode.NOT_FOUND
    client.diary.add("2026-03-01", "t", "x", "neutral")
    assert _code(lambda: client.diary.add("2026-03-01", "again", "x", "neutral")) == ErrorCode.CONFLICT == 10
    # The body does not decode as the method's request: invalid argument, and the connection stays usable.
    assert _code(lambda: client.call("diary", "get", b"\xff\xff\xff")) == ErrorCode.INVALID_ARGUMENT
    client.ping()


def test_error_str_names_the_code(client: mentory.Client) -> None:
    with pytest.raises(mentory.MentoryError) as raised:
        client.call("nosuchnamespace", "x")
    assert "UNKNOWN_NAMESPACE 6" in str(raised.value)
    assert raised.value.code is ErrorCode.UNKNOWN_NAMESPACE


def test_request_error_codes_async(daemon) -> None:  # type: ignore[no-untyped-def]
    async def code(awaitable) -> int:  # type: ignore[no-untyped-def]
        with pytest.raises(mentory.MentoryError) as raised:
            await awaitable
        return int(raised.value.code)

    async def run() -> None:
        async with daemon.aconnect() as client:
            assert await code(client.call("nosuchnamespace", "x")) == 6
            assert await code(client.diary.add("not a day", "t", "x", "neutral")) == 8
            assert await code(client.diary.delete("00000000-0000-0000-0000-000000000000")) == 9
            await client.ping()

    asyncio.run(run())


def test_invalid_enum_names_are_refused_locally(client: mentory.Client) -> None:
    with pytest.raises(ValueError, match="mentor character"):
        client.mentor.set("x", character="grumpy")
    with pytest.raises(ValueError, match="emotion"):
        client.diary.add("2026-01-01", "t", "x", emotion="ecstatic")


def test_frame_above_welcome_limit_is_not_sent(make_daemon) -> None:  # type: ignore[no-untyped-def]
    # The smallest limit the daemon accepts (every reply must still fit a frame).
    daemon = make_daemon(arguments=["--max-frame-length", "262144"])
    with daemon.connect() as client:
        assert client.max_frame_length == 262144
        with pytest.raises(mentory.ProtocolError) as raised:
            client.diary.add("2026-01-01", "t", "x" * 300000, "neutral")
        assert raised.value.code == ErrorCode.FRAME_TOO_LARGE
        assert "262144" in str(raised.value)
        # Nothing was sent, so the connection is intact and nothing was stored.
        assert len(client.diary.list().entries) == 0
        client.diary.add("2026-01-01", "t", "x" * 500, "neutral")


def test_frame_above_client_limit_is_not_read(client: mentory.Client, daemon) -> None:  # type: ignore[no-untyped-def]
    client.diary.add("2026-01-01", "t", "x" * 4000, "neutral")
    with daemon.connect(max_incoming_frame=1000) as small:
        with pytest.raises(mentory.ConnectionClosed) as raised:
            small.diary.list()
        assert raised.value.code == ErrorCode.FRAME_TOO_LARGE
        assert small.closed


def test_connection_error_frame_raises_with_its_code(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon = make_daemon(config={"limits": {"maxConnections": 1}})
    clients = []

    def first_connects() -> bool:
        # The fixture's readiness probe may still count as a connection for a moment.
        try:
            clients.append(daemon.connect())
            return True
        except mentory.ConnectionClosed as error:
            assert error.code == ErrorCode.TOO_MANY_CONNECTIONS
            return False

    wait_until(first_connects, "the only connection slot to be free")
    with clients[0]:
        with pytest.raises(mentory.ConnectionClosed) as raised:
            daemon.connect()
        assert raised.value.code == ErrorCode.TOO_MANY_CONNECTIONS == 18
        assert "connection" in raised.value.message
        clients[0].ping()


def test_daemon_stopping_closes_the_client(daemon) -> None:  # type: ignore[no-untyped-def]
    client = daemon.connect()
    try:
        client.ping()
        daemon.stop()
        with pytest.raises(mentory.ConnectionClosed):
            client.ping()
        assert client.closed
    finally:
        client.close()


def test_nothing_listening_is_connection_closed(tmp_path: Path) -> None:
    with pytest.raises(mentory.ConnectionClosed, match="No socket is there: the daemon is not running"):
        mentory.connect(str(tmp_path / "nothing.sock"))


def test_connect_hints_name_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    from mentory._connection import _connection_hint

    monkeypatch.delenv("MENTORY_SOCKET", raising=False)
    assert _connection_hint("/x.sock", errno.EACCES).startswith("Permission denied on the socket")
    assert "Is the daemon running" not in _connection_hint("/x.sock", errno.EACCES)
    assert _connection_hint("/x.sock", errno.ECONNREFUSED).startswith("Nothing listens on the socket")
    assert "set MENTORY_SOCKET" in _connection_hint("/x.sock", errno.ECONNREFUSED)
    monkeypatch.setenv("MENTORY_SOCKET", "/x.sock")
    assert "MENTORY_SOCKET names this socket" in _connection_hint("/x.sock", errno.ECONNREFUSED)
    assert "set MENTORY_SOCKET" not in _connection_hint("/x.sock", errno.ECONNREFUSED)


def test_timeout_leaves_the_connection_usable(tmp_path: Path) -> None:
    """A fake daemon that answers only the second request: the first times out, the second succeeds."""

    def respond(connection: socket.socket, hello: pb.Envelope) -> None:
        send_envelope(connection, welcome())
        read_envelope(connection)  # ignored: the client times out
        second = read_envelope(connection)
        assert second is not None
        send_envelope(connection, pb.Envelope(response=pb.Response(id=second.request.id, body=b"")))

    server = FakeServer(str(tmp_path / "fake.sock"), respond)
    try:
        with mentory.connect(server.path) as client:
            with pytest.raises(mentory.Timeout) as raised:
                client.call("session", "ping", timeout=0.3)
            assert isinstance(raised.value, TimeoutError)
            client.ping()
    finally:
        server.close()


def test_no_welcome_is_a_protocol_error(tmp_path: Path) -> None:
    def respond(connection: socket.socket, hello: pb.Envelope) -> None:
        send_envelope(connection, pb.Envelope(response=pb.Response(id=1)))

    server = FakeServer(str(tmp_path / "fake.sock"), respond)
    try:
        with pytest.raises(mentory.ProtocolError, match="not Welcome"):
            mentory.connect(server.path)
    finally:
        server.close()


def test_handshake_refusal_and_hello_contents(tmp_path: Path) -> None:
    seen = []

    def respond(connection: socket.socket, hello: pb.Envelope) -> None:
        seen.append(hello)
        error = pb.ConnectionError(error=pb.Error(code=1, message="version 2 is not supported"), closing=True)
        send_envelope(connection, pb.Envelope(connection_error=error))

    server = FakeServer(str(tmp_path / "fake.sock"), respond)
    try:
        with pytest.raises(mentory.ConnectionClosed) as raised:
            mentory.connect(server.path, client_name="probe-name")
        assert raised.value.code == ErrorCode.UNSUPPORTED_VERSION
        assert seen[0].hello.protocol_version == 1 and seen[0].hello.client_name == "probe-name"
    finally:
        server.close()


def test_oversized_and_truncated_frames_from_the_server(tmp_path: Path) -> None:
    def respond(connection: socket.socket, hello: pb.Envelope) -> None:
        send_envelope(connection, welcome())
        request = read_envelope(connection)
        assert request is not None
        connection.sendall(b"\x00\x00\x00\x10\x22")  # 16 bytes announced, 1 sent, then the end
        connection.shutdown(socket.SHUT_RDWR)

    server = FakeServer(str(tmp_path / "fake.sock"), respond)
    try:
        with mentory.connect(server.path) as client:
            with pytest.raises(mentory.ConnectionClosed) as raised:
                client.ping()
            assert raised.value.code == ErrorCode.TRUNCATED_FRAME
    finally:
        server.close()


def test_unknown_namespace_replies_are_raw_bytes_or_the_given_type(tmp_path: Path) -> None:
    """A namespace the client's table does not know (a daemon newer than the client): the reply body
    comes back as bytes, or decoded with reply_type."""
    reply = pb.PeerState(peer="weather-station", is_reachable=True).SerializeToString()

    requests: List[Tuple[str, str]] = []

    def respond(connection: socket.socket, hello: pb.Envelope) -> None:
        send_envelope(connection, welcome())
        while True:
            request = read_envelope(connection)
            if request is None:
                return
            requests.append((request.request.namespace, request.request.method))
            if request.request.method == "describe":  # an older daemon: no such method
                error = pb.Error(code=mentory.ErrorCode.UNKNOWN_METHOD, message="no method describe")
                send_envelope(connection, pb.Envelope(response=pb.Response(id=request.request.id, error=error)))
                continue
            assert request.request.body == b"\x08\x01"
            send_envelope(connection, pb.Envelope(response=pb.Response(id=request.request.id, body=reply)))

    server = FakeServer(str(tmp_path / "fake.sock"), respond)
    try:
        with mentory.connect(server.path) as client:
            assert client.call("weather", "now", b"\x08\x01") == reply
            assert client.call("weather.now", b"\x08\x01", reply_type=bytes) == reply
            decoded = client.call("weather", "now", {"code": 1}, request_type=pb.Error, reply_type=pb.PeerState)
            assert decoded == pb.PeerState(peer="weather-station", is_reachable=True)
    finally:
        server.close()
    # The client asked session.describe for the unknown method's types once; reply_type needs none.
    assert requests == [("session", "describe"), ("weather", "now"), ("weather", "now"), ("weather", "now")]
