"""Helpers shared by the tests."""

import ctypes
import os
import signal
import socket
import struct
import threading
import time
from typing import Callable, List, Optional

from mentory import pb

PR_SET_PDEATHSIG = 1

#: Generous: the machine may be busy; waits return as soon as the condition holds.
DEADLINE_SECONDS = 30.0


def die_with_parent() -> None:
    """A ``preexec_fn``: the child gets SIGKILL when the process that started it dies (even by SIGKILL)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(127)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(127)


def wait_until(condition: Callable[[], bool], what: str, deadline: float = DEADLINE_SECONDS) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline} s waiting for {what}")
        time.sleep(0.02)


class FakeServer:
    """A scripted peer on a Unix socket, for protocol edge cases a real daemon never produces.

    ``respond(conn, hello)`` runs on a thread once per accepted connection, after the Hello frame.
    """

    def __init__(self, path: str, respond: Callable[[socket.socket, pb.Envelope], None]) -> None:
        self.path = path
        self._respond = respond
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(8)
        self._connections: List[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._connections.append(connection)
            hello = read_envelope(connection)
            if hello is not None:
                try:
                    self._respond(connection, hello)
                except OSError:
                    pass

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._listener.close()
        for connection in self._connections:
            connection.close()
        self._thread.join(DEADLINE_SECONDS)


def send_envelope(connection: socket.socket, envelope: pb.Envelope) -> None:
    payload = envelope.SerializeToString()
    connection.sendall(struct.pack(">I", len(payload)) + payload)


def read_envelope(connection: socket.socket) -> Optional[pb.Envelope]:
    header = _read_exactly(connection, 4)
    if header is None:
        return None
    (length,) = struct.unpack(">I", header)
    payload = _read_exactly(connection, length)
    if payload is None:
        return None
    envelope = pb.Envelope()
    envelope.ParseFromString(payload)
    return envelope


def _read_exactly(connection: socket.socket, count: int) -> Optional[bytes]:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def welcome(max_frame_length: int = 1 << 20) -> pb.Envelope:
    return pb.Envelope(welcome=pb.Welcome(protocol_version=1, server_version="fake", max_frame_length=max_frame_length, epoch=7))
