"""Socket discovery and the trust checks on the socket's directory and the serving process."""

import os
import pwd
import stat
from pathlib import Path

import pytest

import mentory
from mentory import discovery


def test_discovery_order(tmp_path: Path) -> None:
    environment = {"XDG_RUNTIME_DIR": str(tmp_path / "xdg")}
    assert discovery.candidate_paths(environment, uid=1234) == [
        str(tmp_path / "xdg" / "mentoryd" / "mentoryd.sock"),
        "/tmp/mentoryd-1234/mentoryd.sock",
        "/run/mentoryd/mentoryd.sock",
    ]
    assert discovery.candidate_paths({}, uid=1234) == [
        "/run/user/1234/mentoryd/mentoryd.sock",
        "/tmp/mentoryd-1234/mentoryd.sock",
        "/run/mentoryd/mentoryd.sock",
    ]
    assert discovery.candidate_paths({}, uid=0) == ["/run/mentoryd/mentoryd.sock"]
    # The argument wins over $MENTORY_SOCKET, which wins over the defaults.
    environment["MENTORY_SOCKET"] = "/from/env.sock"
    assert discovery.resolve_socket_path("/explicit.sock", environment) == "/explicit.sock"
    assert discovery.resolve_socket_path(None, environment) == "/from/env.sock"
    del environment["MENTORY_SOCKET"]
    # The first default that exists: the caller's own instance comes before the system socket.
    xdg_socket = tmp_path / "xdg" / "mentoryd" / "mentoryd.sock"
    xdg_socket.parent.mkdir(parents=True)
    xdg_socket.touch()
    assert discovery.resolve_socket_path(None, environment) == str(xdg_socket)


def test_mentory_socket_environment_variable_is_used(daemon, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MENTORY_SOCKET", daemon.socket_path)
    with mentory.connect() as client:
        assert client.socket_path == daemon.socket_path
        client.ping()


def test_world_writable_directory_is_refused(make_daemon, tmp_path_factory: pytest.TempPathFactory) -> None:  # type: ignore[no-untyped-def]
    directory = tmp_path_factory.mktemp("open")
    os.chmod(directory, 0o777)
    daemon = make_daemon(directory=directory)
    with pytest.raises(mentory.SocketTrustError) as raised:
        daemon.connect()
    assert raised.value.path == daemon.socket_path
    assert "0777" in raised.value.reason and str(directory) in raised.value.reason
    assert daemon.socket_path in str(raised.value)
    # The same directory made private is accepted.
    os.chmod(directory, 0o755)
    with daemon.connect() as client:
        client.ping()


def test_group_writable_directory_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    os.chmod(directory, 0o770)
    with pytest.raises(mentory.SocketTrustError, match="writable by group"):
        mentory.connect(str(directory / "d.sock"))


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "theirs"
    directory.mkdir(mode=0o755)
    os.chown(directory, 65534, 65534)
    with pytest.raises(mentory.SocketTrustError, match="owned by uid 65534"):
        mentory.connect(str(directory / "d.sock"))


def test_untrusted_peer_uid_is_refused(daemon) -> None:  # type: ignore[no-untyped-def]
    other = 65534 if os.getuid() != 65534 else 65533
    with pytest.raises(mentory.SocketTrustError) as raised:
        daemon.connect(trusted_uids={other})
    assert f"running as uid {os.getuid()}" in raised.value.reason
    assert "MENTORY_DAEMON_USER" in raised.value.reason
    with daemon.connect(trusted_uids={os.getuid(), other}) as client:
        client.ping()


def test_default_trusted_uids_follow_mentory_daemon_user() -> None:
    nobody = pwd.getpwnam("nobody").pw_uid
    assert nobody in discovery.default_trusted_uids({"MENTORY_DAEMON_USER": "nobody"})
    default = discovery.default_trusted_uids({})
    assert {0, os.getuid()} <= default
    assert (nobody in default) == (nobody in {0, os.getuid()})
    # A user that does not exist adds nothing.
    assert discovery.default_trusted_uids({"MENTORY_DAEMON_USER": "no-such-user-xyz"}) == {0, os.getuid()}


def test_peer_credentials_name_the_daemon(daemon) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(daemon.socket_path)
        pid, uid, _ = discovery.peer_credentials(sock)
    assert pid == daemon.process.pid
    assert uid == os.getuid()
    assert stat.S_ISSOCK(os.stat(daemon.socket_path).st_mode)


def test_user_instance_detection(tmp_path):
    root = str(tmp_path)
    env = {"HOME": "/home/alice"}
    assert not discovery.user_instance_enabled(env, uid=1001, root=root)
    wants = tmp_path / "etc/systemd/user/sockets.target.wants"
    wants.mkdir(parents=True)
    (wants / "mentoryd.socket").symlink_to("/etc/systemd/user/mentoryd.socket")
    assert discovery.user_instance_enabled(env, uid=1001, root=root)
    assert not discovery.user_instance_enabled(env, uid=999, root=root), "a system account"
    own = tmp_path / "home/alice/.config/systemd/user"
    own.mkdir(parents=True)
    (own / "mentoryd.socket").symlink_to("/dev/null")
    assert not discovery.user_instance_enabled(env, uid=1001, root=root), "masked: opted out"


def test_a_user_instance_that_is_not_running_is_not_replaced_by_the_system_one(tmp_path, monkeypatch):
    if os.getuid() == 0:
        pytest.skip("root has no user instance")
    monkeypatch.setattr(discovery, "user_instance_enabled", lambda env, uid: True)
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    with pytest.raises(discovery.OwnInstanceNotRunning) as raised:
        discovery.resolve_socket_path(environment=env)
    message = str(raised.value)
    assert str(tmp_path / "mentoryd" / "mentoryd.sock") in message
    assert "systemctl --user start mentoryd.socket" in message
    assert "loginctl enable-linger" in message
    assert discovery.resolve_socket_path(environment={**env, "MENTORY_SOCKET": "/run/mentoryd/mentoryd.sock"}) == (
        "/run/mentoryd/mentoryd.sock"
    ), "MENTORY_SOCKET chooses the shared instance on purpose"
