"""Finding the daemon's socket and deciding whether to trust it.

The rules are mentoryctl's:

1. the ``socket_path`` argument, else ``$MENTORY_SOCKET``;
2. otherwise the first of these that exists and that the caller may connect to:
   ``$XDG_RUNTIME_DIR/mentoryd/mentoryd.sock`` (the caller's own instance, ``systemctl --user``;
   ``/run/user/$UID/...`` when ``$XDG_RUNTIME_DIR`` is unset), ``/tmp/mentoryd-$UID/mentoryd.sock``
   (its own daemon started by hand), ``/run/mentoryd/mentoryd.sock`` (the shared system instance).
   One that exists but may not be connected to (no write permission) is used only when no other is
   usable, so that the connection error says why;
3. but a caller with a user instance (:func:`user_instance_enabled`: an ordinary account for which
   ``mentoryd.socket`` is enabled and not masked) never falls back to the system instance: when none
   of its own sockets exists, :class:`OwnInstanceNotRunning` says which were tried and how to start it.

Whichever path is chosen is used only if its directory is owned by the caller or root and is not
writable by group or others (otherwise someone else could put their own socket there). After
connecting, the peer's ``SO_PEERCRED`` uid must be root, the caller, or the daemon user
(``mentory``, or ``$MENTORY_DAEMON_USER``). Anything else raises :class:`SocketTrustError`.
"""

import os
import pwd
import socket
import stat
import struct
from typing import AbstractSet, Iterable, List, Mapping, Optional, Tuple

from .errors import MentoryError, SocketTrustError

SOCKET_FILE_NAME = "mentoryd.sock"
SYSTEM_SOCKET_PATH = "/run/mentoryd/mentoryd.sock"
DEFAULT_DAEMON_USER = "mentory"


#: The enablement links of ``mentoryd.socket`` for every user (``systemctl --global enable``).
GLOBAL_WANTS_FOLDERS = (
    "/etc/systemd/user/sockets.target.wants",
    "/usr/lib/systemd/user/sockets.target.wants",
    "/usr/local/lib/systemd/user/sockets.target.wants",
)
#: The highest uid of a system account: no user instance below it (``ConditionUser=!@system``).
HIGHEST_SYSTEM_UID = 999
#: ``nobody``, which has no home and no user manager of its own.
NOBODY_UID = 65534


class OwnInstanceNotRunning(MentoryError):
    """The caller has a user instance, and none of its sockets exists: the system instance is not used instead."""

    def __init__(self, tried: List[str]) -> None:
        self.tried = tried
        super().__init__(
            0,
            f"your own mentoryd (a user instance) is not running: tried {' and '.join(tried)}. Start it with "
            "`systemctl --user start mentoryd.socket`, and `sudo loginctl enable-linger $USER` to keep it without "
            f"a login session. The shared system instance ({SYSTEM_SOCKET_PATH}) is not used in its place, so "
            "that your entries never land in a diary others read; to use it on purpose, pass "
            f"socket_path={SYSTEM_SOCKET_PATH!r} or set MENTORY_SOCKET"
        )


def _own_paths(env: Mapping[str, str], uid: int) -> List[str]:
    paths = []
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if xdg:
        paths.append(os.path.join(xdg, "mentoryd", SOCKET_FILE_NAME))
    elif uid != 0:
        paths.append(f"/run/user/{uid}/mentoryd/{SOCKET_FILE_NAME}")
    if uid != 0:
        paths.append(f"/tmp/mentoryd-{uid}/{SOCKET_FILE_NAME}")
    return paths


def candidate_paths(environment: Optional[Mapping[str, str]] = None, uid: Optional[int] = None) -> List[str]:
    """The default socket paths, in the order they are tried: the caller's own first, the system's last."""
    env = os.environ if environment is None else environment
    uid = os.getuid() if uid is None else uid
    return _own_paths(env, uid) + [SYSTEM_SOCKET_PATH]


def user_instance_enabled(
    environment: Optional[Mapping[str, str]] = None, uid: Optional[int] = None, root: str = ""
) -> bool:
    """Whether the caller has a user instance: an ordinary account (uid above 999, not ``nobody``) for which
    ``mentoryd.socket`` is enabled, in its own user unit folder or for every user, and not masked in its
    own folder. ``root`` is the folder the paths are read under (tests pass a temporary one)."""
    env = os.environ if environment is None else environment
    uid = os.getuid() if uid is None else uid
    if uid <= HIGHEST_SYSTEM_UID or uid == NOBODY_UID:
        return False
    config = env.get("XDG_CONFIG_HOME", "")
    if not config.startswith("/"):
        home = env.get("HOME", "")
        if not home.startswith("/"):
            try:
                home = pwd.getpwuid(uid).pw_dir
            except KeyError:
                home = "/nonexistent"
        config = os.path.join(home, ".config")
    folder = root + os.path.join(config, "systemd", "user")
    unit = os.path.join(folder, "mentoryd.socket")
    if os.path.islink(unit) and os.readlink(unit) == "/dev/null":
        return False
    wants = [os.path.join(folder, "sockets.target.wants")] + [root + path for path in GLOBAL_WANTS_FOLDERS]
    return any(os.path.lexists(os.path.join(path, "mentoryd.socket")) for path in wants)


def resolve_socket_path(socket_path: Optional[str] = None, environment: Optional[Mapping[str, str]] = None) -> str:
    """The socket to connect to: ``socket_path``, ``$MENTORY_SOCKET``, else the first default that exists
    and may be connected to (else the first that exists).

    When none exists, the first default is returned, so the connection error names it; but a caller with a
    user instance gets :class:`OwnInstanceNotRunning` instead of the system instance.
    """
    if socket_path:
        return os.fspath(socket_path)
    env = os.environ if environment is None else environment
    from_env = env.get("MENTORY_SOCKET", "")
    if from_env:
        return from_env
    uid = os.getuid()
    candidates = candidate_paths(env, uid)
    if user_instance_enabled(env, uid):
        candidates = _own_paths(env, uid)
        if not any(os.path.lexists(path) for path in candidates):
            raise OwnInstanceNotRunning(candidates)
    forbidden = None
    for path in candidates:
        if os.path.exists(path):
            # connect(2) needs write permission on the socket file.
            if os.access(path, os.W_OK):
                return path
            forbidden = forbidden or path
    return forbidden or candidates[0]


def check_directory(path: str, trusted_uids: Optional[Iterable[int]] = None) -> None:
    """Raises :class:`SocketTrustError` unless the socket's directory is safe, with the rules
    mentoryctl applies (``SocketTrust`` in the Swift client library).

    Safe means: after resolving symbolic links, the directory is owned by a trusted uid (default
    :func:`default_trusted_uids`: root, the caller and the daemon user) and nobody else may write
    it (root and the caller are always trusted); every directory above it is owned by a trusted uid and is either not writable by group
    and others or sticky (like ``/tmp``). A missing directory is left to the connection attempt.
    """
    allowed = frozenset(trusted_uids if trusted_uids is not None else default_trusted_uids()) | {0, os.getuid()}
    directory = os.path.realpath(os.path.dirname(os.path.abspath(path)) or "/")
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        return
    except OSError as error:
        raise SocketTrustError(path, f"cannot inspect its directory {directory}: {error.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise SocketTrustError(path, f"{directory} is not a directory")
    if info.st_uid not in allowed:
        raise SocketTrustError(
            path,
            f"its directory {directory} is owned by uid {info.st_uid} ({_user_name(info.st_uid)}), "
            "not by you, root or the daemon user, so that user could be impersonating mentoryd",
        )
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if info.st_mode & bit]
    if writers:
        raise SocketTrustError(
            path,
            f"its directory {directory} has mode {stat.S_IMODE(info.st_mode):04o}, writable by "
            f"{' and '.join(writers)}: anyone who can write there can replace the socket "
            "(use a directory with mode 0700 or 0755)",
        )
    ancestor = directory
    while ancestor != "/":
        ancestor = os.path.dirname(ancestor) or "/"
        try:
            above = os.stat(ancestor)
        except OSError as error:
            raise SocketTrustError(path, f"cannot inspect {ancestor} above the socket: {error.strerror}") from None
        if above.st_uid not in allowed:
            raise SocketTrustError(
                path,
                f"{ancestor}, above its directory, is owned by uid {above.st_uid} ({_user_name(above.st_uid)}), "
                "who could replace the directory",
            )
        if above.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not above.st_mode & stat.S_ISVTX:
            raise SocketTrustError(
                path,
                f"{ancestor}, above its directory, has mode {stat.S_IMODE(above.st_mode):04o} without the "
                "sticky bit, so group or others could replace the directory",
            )


def default_trusted_uids(environment: Optional[Mapping[str, str]] = None) -> AbstractSet[int]:
    """Root, the caller, and the daemon user (``$MENTORY_DAEMON_USER``, default ``mentory``) if it exists."""
    env = os.environ if environment is None else environment
    uids = {0, os.getuid()}
    name = env.get("MENTORY_DAEMON_USER", "") or DEFAULT_DAEMON_USER
    try:
        uids.add(pwd.getpwnam(name).pw_uid)
    except KeyError:
        pass
    return frozenset(uids)


def peer_credentials(sock: socket.socket) -> Tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket (``SO_PEERCRED``)."""
    size = struct.calcsize("3i")
    data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size)
    pid, uid, gid = struct.unpack("3i", data)
    return pid, uid, gid


def check_peer(sock: socket.socket, path: str, trusted_uids: Optional[Iterable[int]] = None) -> None:
    """Raises :class:`SocketTrustError` unless the server's uid is in ``trusted_uids``
    (default :func:`default_trusted_uids`)."""
    allowed = frozenset(trusted_uids) if trusted_uids is not None else default_trusted_uids()
    pid, uid, _ = peer_credentials(sock)
    if uid not in allowed:
        names = ", ".join(f"{u} ({_user_name(u)})" for u in sorted(allowed))
        raise SocketTrustError(
            path,
            f"it is served by pid {pid} running as uid {uid} ({_user_name(uid)}), which is none of the "
            f"trusted uids {names}; set MENTORY_DAEMON_USER if the daemon runs as another user",
        )


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no such user"
