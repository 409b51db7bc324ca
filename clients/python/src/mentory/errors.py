"""Exceptions raised by the mentory client.

Every exception derives from :class:`MentoryError` and carries the wire ``code``
(an :data:`mentory.ErrorCode` member, or a plain ``int`` for a code this client's schema does
not know yet) and a message a person can act on.
"""

from typing import Union

from ._enums import ErrorCode, code_of

__all__ = [
    "MentoryError",
    "ConnectionClosed",
    "ProtocolError",
    "Timeout",
    "SocketTrustError",
]


class MentoryError(Exception):
    """Base class of every error of this package.

    A request the daemon answered with an error raises :class:`MentoryError` itself, whose
    ``code`` says why (``ErrorCode.NOT_FOUND``, ``ErrorCode.INVALID_ARGUMENT``, …). The
    connection stays usable after such an error. ``reason`` is the namespace's own stable code
    for the failure when it gives one (e.g. ``"kudos.empty_text"``), else ``""``.

    A plugin's handler (:mod:`mentory.plugin`) raises ``MentoryError(code, message, reason=...)``
    to answer a call with that error.
    """

    def __init__(self, code: int, message: str, reason: str = "") -> None:
        self.code = code_of(int(code))
        self.message = message
        self.reason = reason
        super().__init__(message)

    def __str__(self) -> str:
        name = self.code.name if isinstance(self.code, ErrorCode) else "code"
        return f"{self.message} ({name} {int(self.code)})"

    def __repr__(self) -> str:
        if self.reason:
            return f"{type(self).__name__}(code={int(self.code)}, message={self.message!r}, reason={self.reason!r})"
        return f"{type(self).__name__}(code={int(self.code)}, message={self.message!r})"


class ConnectionClosed(MentoryError):
    """The connection is gone: the daemon closed it (``code`` is what it said, e.g. ``SHUTTING_DOWN``),
    the socket failed, or the client was closed. ``code`` is ``UNSPECIFIED`` (0) when the daemon
    said nothing."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(code, message)


class ProtocolError(MentoryError):
    """The peer broke the protocol (an unreadable or oversized frame, no ``Welcome``), or a frame
    this client would send exceeds the daemon's ``Welcome.max_frame_length``."""

    def __init__(self, message: str, code: int = ErrorCode.MALFORMED_MESSAGE) -> None:
        super().__init__(code, message)


class Timeout(MentoryError, TimeoutError):
    """No answer within the timeout. The connection stays usable; a late answer is discarded."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)


class SocketTrustError(MentoryError):
    """The socket was refused before any request was sent: its directory may be replaced by someone
    else, or the process serving it runs as an unexpected user. ``path`` names the socket and
    ``reason`` says what was wrong."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(0, f"refusing the mentoryd socket {path}: {reason}", reason)

