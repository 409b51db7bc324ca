"""mentory.plugin against a real mentoryd: a namespace served from Python.

Each plugin runs its own event loop on a thread of the test process (as ``Plugin.run`` would in a
plugin's main thread) while the test calls it through a sync client, like any other process would;
the example plugin runs as a subprocess that dies with the test.
"""

import asyncio
import json
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

import mentory
import mentory.plugin
from mentory import ErrorCode, EventKind, MentoryError
from support import DEADLINE_SECONDS, FakeServer, die_with_parent, read_envelope, send_envelope, wait_until, welcome

EXAMPLE_DIR = Path(__file__).resolve().parents[1] / "examples" / "kudos"
sys.path.insert(0, str(EXAMPLE_DIR))

import kudos_pb2  # noqa: E402
import kudos_plugin  # noqa: E402

SERVICE = kudos_pb2.DESCRIPTOR.services_by_name["KudosService"]
#: Declares the example's namespace; calls may take long (the machine may be busy).
KUDOS_CONFIG: Dict[str, Any] = {
    "plugins": {"kudos": {}},
    "limits": {"pluginCallTimeoutMilliseconds": 60000},
}
#: Retries come fast, so that a restart is noticed soon.
FAST = mentory.Backoff(initial=1.0, maximum=1.0, jitter=0.0)


class PluginThread:
    """Serves a plugin on a thread with its own event loop until ``stop``."""

    def __init__(self, plugin: mentory.plugin.Plugin) -> None:
        self.plugin = plugin
        self.error: Optional[BaseException] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            await self.plugin.serve()

        try:
            asyncio.run(serve())
        except BaseException as error:  # noqa: BLE001 - reported by stop()
            self.error = error

    def start(self) -> "PluginThread":
        self._thread.start()
        return self

    def wait_registered(self) -> None:
        wait_until(
            lambda: self.plugin.state is mentory.plugin.PluginState.REGISTERED or not self._thread.is_alive(),
            "the plugin to register",
        )
        if self.error is not None:
            raise self.error

    def run(self, coroutine: Any) -> Any:
        """Runs a coroutine on the plugin's loop and returns its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(DEADLINE_SECONDS)

    def stop(self) -> None:
        self.plugin.stop()
        self._thread.join(DEADLINE_SECONDS)
        assert not self._thread.is_alive(), "the plugin did not stop"
        assert self.plugin.state is mentory.plugin.PluginState.STOPPED
        if self.error is not None:
            raise self.error


@contextlib.contextmanager
def serving(plugin: mentory.plugin.Plugin) -> Iterator[PluginThread]:
    thread = PluginThread(plugin).start()
    try:
        thread.wait_registered()
        yield thread
    finally:
        thread.stop()


@pytest.fixture
def kudos_daemon(make_daemon):  # type: ignore[no-untyped-def]
    return make_daemon(config=KUDOS_CONFIG)


def empty_plugin(socket_path: str, **options: Any) -> mentory.plugin.Plugin:
    """A kudos plugin answering empty messages, for a test to replace some of its handlers."""
    plugin = mentory.plugin.Plugin(SERVICE, socket_path=socket_path, **options)

    @plugin.method("give")
    async def give_nothing(request: kudos_pb2.KudosGiveRequest, call: mentory.plugin.Call) -> kudos_pb2.Kudos:
        return kudos_pb2.Kudos()

    @plugin.method("list")
    async def list_nothing(request: mentory.pb.Empty, call: mentory.plugin.Call) -> kudos_pb2.KudosList:
        return kudos_pb2.KudosList()

    @plugin.snapshot("kudos")
    async def no_snapshot() -> kudos_pb2.KudosList:
        return kudos_pb2.KudosList()

    return plugin


def give(client: mentory.Client, to: str, text: str) -> kudos_pb2.Kudos:
    reply = client.call("kudos", "give", kudos_pb2.KudosGiveRequest(to=to, text=text), reply_type=kudos_pb2.Kudos)
    assert isinstance(reply, kudos_pb2.Kudos)
    return reply


def call_error(function: Any, *arguments: Any) -> MentoryError:
    with pytest.raises(MentoryError) as raised:
        function(*arguments)
    return raised.value


def test_a_call_reaches_the_python_plugin(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    plugin = kudos_plugin.build(kudos_daemon.socket_path, max_kudos=2)
    with serving(plugin), kudos_daemon.connect() as client:
        first = give(client, "ana", "a careful review")
        assert (first.number, first.to, first.text, first.from_client) == (1, "ana", "a careful review", "tests")
        give(client, "bo", "fixed the build")
        give(client, "cy", "great demo")
        listed = client.call("kudos", "list", reply_type=kudos_pb2.KudosList)
        assert [kudos.number for kudos in listed.kudos] == [2, 3]  # --max-kudos bounds what it keeps

        status = client.status()
        [state] = [p for p in status.plugins if p.name == "kudos"]
        assert state.state == mentory.pb.PLUGIN_STATE_CONNECTED
        assert plugin.registered_reply is not None and plugin.registered_reply.plugin == "kudos"
        described = client.call("session", "describe", {"namespace": "kudos"})
        [namespace] = described.namespaces
        assert [(m.name, m.request, m.reply) for m in namespace.methods] == [
            ("give", "kudos.v1.KudosGiveRequest", "kudos.v1.Kudos"),
            ("list", "mentory.v1.Empty", "kudos.v1.KudosList"),
        ]
        assert "kudos.proto" in [file.name for file in described.descriptors.file]


def test_handler_errors_arrive_with_their_wire_code(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    plugin = mentory.plugin.Plugin(SERVICE, socket_path=kudos_daemon.socket_path)

    @plugin.method("give")
    async def give_or_fail(request: kudos_pb2.KudosGiveRequest, call: mentory.plugin.Call) -> Any:
        if request.text == "crash":
            raise RuntimeError("the handler broke")
        if request.text == "wrong type":
            return kudos_pb2.KudosList()
        if request.text == "huge":
            return kudos_pb2.Kudos(text="x" * (2 << 20))  # more than the daemon's frame limit (1 MiB)
        raise MentoryError(ErrorCode.NOT_FOUND, f"nobody called {request.to}", reason="kudos.unknown_person")

    @plugin.method("list")
    def busy(request: mentory.pb.Empty, call: mentory.plugin.Call) -> kudos_pb2.KudosList:  # a plain function
        raise MentoryError(ErrorCode.CONFLICT, "the list is being rebuilt", reason="kudos.busy")

    @plugin.snapshot("kudos")
    def snapshot() -> kudos_pb2.KudosList:
        return kudos_pb2.KudosList()

    with serving(plugin), kudos_daemon.connect() as client:
        error = call_error(give, client, "zed", "thanks")
        assert (error.code, error.message, error.reason) == (
            ErrorCode.NOT_FOUND,
            "nobody called zed",
            "kudos.unknown_person",
        )
        error = call_error(client.call, "kudos", "list")
        assert (error.code, error.reason) == (ErrorCode.CONFLICT, "kudos.busy")
        # Any other exception is INTERNAL, naming the method and the exception; the plugin keeps serving.
        error = call_error(give, client, "zed", "crash")
        assert error.code == ErrorCode.INTERNAL
        assert "kudos.give" in error.message and "RuntimeError: the handler broke" in error.message
        error = call_error(give, client, "zed", "wrong type")
        assert error.code == ErrorCode.INTERNAL and "must be a kudos.v1.Kudos" in error.message
        error = call_error(give, client, "zed", "huge")
        assert error.code == ErrorCode.INTERNAL and "max_frame_length" in error.message, error
        assert call_error(give, client, "zed", "again").code == ErrorCode.NOT_FOUND
        # A body the request type cannot parse is the caller's fault.
        error = call_error(client.call, "kudos", "give", b"\xff\xff\xff")
        assert error.code == ErrorCode.INVALID_ARGUMENT and "kudos.v1.KudosGiveRequest" in error.message


def test_published_events_reach_subscribers(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    plugin = kudos_plugin.build(kudos_daemon.socket_path, max_kudos=10)
    with serving(plugin) as thread, kudos_daemon.connect() as client:
        give(client, "ana", "before anyone listened")
        with client.subscribe(["kudos"]) as events:
            snapshot = events.get(timeout=DEADLINE_SECONDS)
            assert snapshot.kind == EventKind.SNAPSHOT
            # Bodies arrive decoded (with this module's classes: kudos_pb2 is imported here).
            assert isinstance(snapshot.body, kudos_pb2.KudosList)
            assert [k.text for k in snapshot.body.kudos] == ["before anyone listened"]

            given = give(client, "bo", "a change")  # the handler publishes it
            change = events.get(timeout=DEADLINE_SECONDS)
            assert change.kind == EventKind.CHANGE and change.sequence == snapshot.sequence + 1
            assert change.body == given

            # Published from outside any handler, as a dict of the change's fields.
            thread.run(plugin.publish("kudos", {"number": 99, "to": "cy", "text": "from a timer"}))
            change = events.get(timeout=DEADLINE_SECONDS)
            assert change.body.text == "from a timer"

    with pytest.raises(ValueError):
        asyncio.run(plugin.publish("nonsense", {}))
    with pytest.raises(TypeError):
        asyncio.run(plugin.publish("kudos", kudos_pb2.KudosList()))
    with pytest.raises(mentory.ConnectionClosed):  # not registered now
        asyncio.run(plugin.publish("kudos", kudos_pb2.Kudos()))


def test_calls_fail_unavailable_while_the_plugin_is_away(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    with kudos_daemon.connect() as client:
        error = call_error(give, client, "ana", "too early")
        assert error.code == ErrorCode.UNAVAILABLE and "kudos" in error.message

        plugin = kudos_plugin.build(kudos_daemon.socket_path, max_kudos=10)
        with serving(plugin):
            assert give(client, "ana", "now").number == 1

        def unavailable() -> bool:
            try:
                give(client, "ana", "gone")
            except MentoryError as raised:
                assert raised.code == ErrorCode.UNAVAILABLE, raised
                return True
            return False

        wait_until(unavailable, "calls to fail once the plugin disconnected")

        # Back again (served anew, on a new event loop, as a new process would): calls work again.
        with serving(plugin):
            assert give(client, "ana", "back").number == 2
            assert asyncio.run(plugin.wait_registered(DEADLINE_SECONDS)) is not None  # from any loop, once registered


def test_the_plugin_registers_again_after_the_daemon_restarts(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    plugin = kudos_plugin.build(kudos_daemon.socket_path, max_kudos=10)
    plugin.backoff = FAST
    with serving(plugin):
        with kudos_daemon.connect() as client:
            assert give(client, "ana", "before").number == 1
        first_epoch = plugin.registered_reply.epoch if plugin.registered_reply else None
        kudos_daemon.restart()
        wait_until(
            lambda: plugin.registrations == 2 and plugin.state is mentory.plugin.PluginState.REGISTERED,
            "the plugin to register with the new daemon",
        )
        assert plugin.registered_reply is not None and plugin.registered_reply.epoch != first_epoch
        with kudos_daemon.connect() as client:
            assert give(client, "ana", "after").number == 2  # the same process: its state survived


def test_the_plugin_is_back_at_once_after_a_restart_whatever_its_back_off(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    """After a registration that worked is lost, retries come every quarter second (quick retries),
    not after the back-off: with a back-off of 10 minutes, the plugin still answers the new daemon."""
    plugin = kudos_plugin.build(kudos_daemon.socket_path, max_kudos=10)
    plugin.backoff = mentory.Backoff(initial=600.0, maximum=600.0, jitter=0.0)
    with serving(plugin):
        kudos_daemon.stop()
        # Down long enough for the default back-off to have grown past 2 s; the plugin keeps trying.
        time.sleep(3)
        kudos_daemon.start()
        ready = time.monotonic()
        wait_until(
            lambda: plugin.registrations == 2 and plugin.state is mentory.plugin.PluginState.REGISTERED,
            "the plugin to register with the restarted daemon",
        )
        with kudos_daemon.connect() as client:
            assert give(client, "ana", "after").number == 1
        print(f"prompt reconnect: registered {time.monotonic() - ready:.3f} s after the daemon was ready")


def test_quick_retries_follow_a_lost_registration_then_the_back_off() -> None:
    backoff = mentory.Backoff(jitter=0.0)
    assert backoff.delay_after_loss(0, 1.0) == 0.25
    assert backoff.delay_after_loss(0, None) == 1.0  # never registered: the back-off
    assert backoff.delay_after_loss(2, 30.0) == 4.0  # past the window: the back-off, counted since
    assert mentory.Backoff(quick_window=0.0, jitter=0.0).delay_after_loss(0, 0.0) == 1.0
    with pytest.raises(ValueError):
        mentory.Backoff(quick_interval=0.01)


def test_calls_beyond_max_in_flight_are_refused(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    plugin = empty_plugin(kudos_daemon.socket_path, max_in_flight=1)
    entered = threading.Event()
    release = threading.Event()

    @plugin.method("give")
    def slow_give(request: kudos_pb2.KudosGiveRequest, call: mentory.plugin.Call) -> kudos_pb2.Kudos:
        entered.set()
        release.wait(DEADLINE_SECONDS)  # a plain function runs on a worker thread: the loop stays free
        return kudos_pb2.Kudos(to=request.to, text=request.text)

    results: List[Any] = []
    with serving(plugin), kudos_daemon.connect() as client:
        first = threading.Thread(target=lambda: results.append(give(client, "ana", "slow")))
        first.start()
        try:
            wait_until(entered.is_set, "the first call to reach its handler")
            assert plugin.in_flight == 1
            error = call_error(client.call, "kudos", "list")
            assert error.code == ErrorCode.TOO_MANY_REQUESTS and "max_in_flight" in error.message
        finally:
            release.set()
            first.join(DEADLINE_SECONDS)
        assert [kudos.text for kudos in results] == ["slow"]
        wait_until(lambda: plugin.in_flight == 0, "the first call to finish")
        assert client.call("kudos", "list", reply_type=kudos_pb2.KudosList) == kudos_pb2.KudosList()


def test_a_handler_past_its_deadline_is_cancelled(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon = make_daemon(config={"plugins": {"kudos": {}}, "limits": {"pluginCallTimeoutMilliseconds": 500}})
    plugin = empty_plugin(daemon.socket_path)
    cancelled = threading.Event()
    deadlines: List[Optional[float]] = []

    @plugin.method("give")
    async def never(request: kudos_pb2.KudosGiveRequest, call: mentory.plugin.Call) -> kudos_pb2.Kudos:
        deadlines.append(call.deadline)
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    with serving(plugin), daemon.connect() as client:
        assert call_error(give, client, "ana", "wait").code == ErrorCode.DEADLINE_EXCEEDED
        wait_until(cancelled.is_set, "the plugin to cancel the handler at the call's deadline")
        assert deadlines and deadlines[0] is not None
        wait_until(lambda: plugin.in_flight == 0, "the call to leave the plugin")
        assert client.call("kudos", "list", reply_type=kudos_pb2.KudosList) == kudos_pb2.KudosList()


def test_an_undeclared_plugin_waits_until_a_reload_declares_it(daemon) -> None:  # type: ignore[no-untyped-def]
    plugin = kudos_plugin.build(daemon.socket_path, max_kudos=1)  # this daemon declares no plugin yet
    thread = PluginThread(plugin).start()
    try:
        wait_until(lambda: "plugin.register(kudos)" in daemon.log(), "mentoryd to refuse the undeclared plugin")
        assert plugin.state is mentory.plugin.PluginState.WAITING, plugin.state
        error = plugin.last_error
        assert isinstance(error, MentoryError) and error.reason == mentory.plugin.NOT_DECLARED, error
        assert error.code == ErrorCode.PERMISSION_DENIED and "kudos" in error.message
        daemon.config_path.write_text(json.dumps(KUDOS_CONFIG))
        pid = daemon.process.pid
        with daemon.connect() as client:
            client.daemon.reload()
            thread.wait_registered()  # the daemon closed the waiting connection; the plugin registered at once
            assert client.call("kudos", "list", reply_type=kudos_pb2.KudosList) == kudos_pb2.KudosList()
        assert daemon.process.pid == pid and daemon.process.poll() is None, "no daemon restart"
    finally:
        thread.stop()


def test_an_untrusted_socket_stops_the_plugin(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(mentory.SocketTrustError, match="none of the trusted uids"):
        asyncio.run(asyncio.wait_for(empty_plugin(kudos_daemon.socket_path, trusted_uids=[os.getuid() + 4242]).serve(), DEADLINE_SECONDS))


def test_subscribers_get_a_reset_from_the_plugin_when_it_comes_back(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    plugin = kudos_plugin.build(kudos_daemon.socket_path, max_kudos=10)
    with kudos_daemon.connect() as client:
        with serving(plugin):
            give(client, "ana", "one")
            events = client.subscribe(["kudos"])
            assert events.get(timeout=DEADLINE_SECONDS).kind == EventKind.SNAPSHOT
            give(client, "ana", "two")
            assert events.get(timeout=DEADLINE_SECONDS).kind == EventKind.CHANGE
        with events, serving(plugin):  # the subscription stays while the plugin is away
            reset = events.get(timeout=DEADLINE_SECONDS)
            assert reset.kind == EventKind.RESET
            assert [k.text for k in reset.body.kudos] == ["one", "two"]
            give(client, "ana", "three")
            change = events.get(timeout=DEADLINE_SECONDS)
            assert change.kind == EventKind.CHANGE and change.sequence > reset.sequence


def test_a_plugin_must_answer_everything_its_schema_declares() -> None:
    plugin = mentory.plugin.Plugin(SERVICE, socket_path="/nonexistent/d.sock")

    @plugin.method("give")
    async def give_kudos(request: kudos_pb2.KudosGiveRequest, call: mentory.plugin.Call) -> kudos_pb2.Kudos:
        return kudos_pb2.Kudos()

    assert plugin.problems() == ["method 'list' has no handler", "topic 'kudos' has no snapshot taker"]
    with pytest.raises(ValueError, match="has no handler"):
        asyncio.run(plugin.serve())
    with pytest.raises(ValueError, match="no method 'take'"):
        plugin.method("take")
    with pytest.raises(ValueError, match="no topic 'news'"):
        plugin.snapshot("news")
    with pytest.raises(TypeError, match="service descriptor"):
        mentory.plugin.Plugin(kudos_pb2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_in_flight"):
        mentory.plugin.Plugin(SERVICE, max_in_flight=0)


def test_stop_does_not_wait_for_an_unanswered_registration(tmp_path: Path) -> None:
    registrations: List[mentory.pb.Envelope] = []

    def respond(connection: socket.socket, hello: mentory.pb.Envelope) -> None:
        send_envelope(connection, welcome())
        registration = read_envelope(connection)
        if registration is not None:
            registrations.append(registration)
        read_envelope(connection)  # never answers; returns when the plugin hangs up

    server = FakeServer(str(tmp_path / "fake.sock"), respond)
    try:
        # A registration timeout longer than the test waits: only stop() can end this promptly.
        plugin = empty_plugin(server.path, timeout=DEADLINE_SECONDS * 4)
        thread = PluginThread(plugin).start()
        wait_until(lambda: bool(registrations), "the plugin to send its registration")
        assert plugin.state is mentory.plugin.PluginState.CONNECTING
        thread.stop()
    finally:
        server.close()
    [envelope] = registrations
    request = mentory.pb.PluginRegisterRequest.FromString(envelope.request.body)
    assert (envelope.request.namespace, envelope.request.method) == ("plugin", "register")
    assert request == plugin.registration()
    assert request.plugin_protocol_version == mentory.plugin.PLUGIN_PROTOCOL_VERSION == 1
    assert [file.name for file in request.descriptors.file] == ["kudos.proto"]  # mentory.proto: the daemon has it


def start_example(socket_path: str, log: Path) -> "subprocess.Popen[bytes]":
    with open(log, "ab") as output:
        return subprocess.Popen(
            [sys.executable, str(EXAMPLE_DIR / "kudos_plugin.py"), "--socket", socket_path, "--max-kudos", "5"],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
            preexec_fn=die_with_parent,
        )


def test_the_example_plugin_runs_as_written(kudos_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "kudos.log"
    process = start_example(kudos_daemon.socket_path, log)
    try:
        with kudos_daemon.connect() as client:

            def served() -> bool:
                try:
                    give(client, "ana", "first")
                    return True
                except MentoryError as error:
                    assert error.code == ErrorCode.UNAVAILABLE, error
                    assert process.poll() is None, log.read_text()
                    return False

            wait_until(served, "the example plugin to serve kudos")
            error = call_error(give, client, "ana", "  ")
            assert (error.code, error.reason) == (ErrorCode.INVALID_ARGUMENT, "kudos.empty_text")
            listed = client.call("kudos", "list", reply_type=kudos_pb2.KudosList)
            assert [(k.to, k.text, k.from_client) for k in listed.kudos] == [("ana", "first", "tests")]
        process.send_signal(signal.SIGTERM)
        assert process.wait(DEADLINE_SECONDS) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_example_plugin_exits_77_when_refused(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Refused for good (INVALID_ARGUMENT): another plugin already publishes the example's topic, kudos.
    daemon = make_daemon(config={"plugins": {"kudos": {}, "rival": {}}})
    rival = kudos_plugin.build(daemon.socket_path, max_kudos=1).registration()
    rival.namespace = "rival"
    with daemon.connect() as holder:
        holder.call("plugin", "register", rival, reply_type=mentory.pb.PluginRegisterReply)
        log = tmp_path / "kudos.log"
        process = start_example(daemon.socket_path, log)
        try:
            assert process.wait(DEADLINE_SECONDS) == kudos_plugin.EXIT_REFUSED, log.read_text()
            assert "INVALID_ARGUMENT" in log.read_text() and "rival" in log.read_text(), log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


# -- calls on the caller's behalf (Call.call, plugin.call) -------------------------------------------------------


def diary_plugin(socket_path: str) -> mentory.plugin.Plugin:
    """A kudos plugin whose ``list`` lists the caller's diary, as kudos, through ``call.call``."""
    plugin = empty_plugin(socket_path)

    @plugin.method("list")
    async def list_diary(request: mentory.pb.Empty, call: mentory.plugin.Call) -> kudos_pb2.KudosList:
        listed = await call.call("diary.list", {})  # for the caller, with the caller's access
        assert isinstance(listed, mentory.pb.DiaryListReply)
        return kudos_pb2.KudosList(kudos=[kudos_pb2.Kudos(to=entry.title, text=entry.text) for entry in listed.entries])

    return plugin


def test_a_plugin_calls_another_namespace_for_its_caller(kudos_daemon) -> None:  # type: ignore[no-untyped-def]
    with serving(diary_plugin(kudos_daemon.socket_path)), kudos_daemon.connect() as client:
        client.diary.add("2026-11-10", "monday", "a good day", "pleasant")
        listed = client.call("kudos", "list", reply_type=kudos_pb2.KudosList)
        assert [(kudos.to, kudos.text) for kudos in listed.kudos] == [("monday", "a good day")]


#: Runs as another uid: calls kudos.list, which the plugin answers with diary.list on its behalf, then
#: diary.list itself; prints the two error codes.
DENIED_CALLER = """
import sys
import mentory
with mentory.connect(sys.argv[1], client_name="denied") as client:
    codes = []
    for namespace, method in (("kudos", "list"), ("diary", "list")):
        try:
            client.call(namespace, method, reply_type=bytes)
            codes.append("ok")
        except mentory.MentoryError as error:
            codes.append(f"{int(error.code)}:{error.message}")
    print("\\n".join(codes))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run the caller as another uid than the daemon's")
def test_a_caller_denied_diary_gets_permission_denied_through_the_plugin(make_daemon) -> None:  # type: ignore[no-untyped-def]
    import shutil
    import tempfile

    import google.protobuf

    nobody = 65534
    # An interpreter the other uid may run: this one, or the system's, if every folder on its way lets it.
    candidates = [os.path.realpath(sys.executable), os.path.realpath(shutil.which("python3", path="/usr/bin") or "")]
    reachable = [
        path
        for path in candidates
        if os.path.isfile(path)
        and os.stat(path).st_mode & 0o001
        and all(os.stat(folder).st_mode & 0o001 for folder in Path(path).parents)
    ]
    if not reachable:
        pytest.skip("no Python interpreter another uid may run")
    interpreter = reachable[0]
    # A folder the other uid can reach: the socket (mode 0666) and a copy of the package and protobuf.
    shared = Path(tempfile.mkdtemp(prefix="mentory-denied-"))
    try:
        shared.chmod(0o755)
        packages = shared / "packages"
        shutil.copytree(Path(mentory.__file__).parent, packages / "mentory")
        shutil.copytree(Path(google.protobuf.__file__).parent.parent, packages / "google")
        for path in [packages, *packages.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        daemon = make_daemon(
            socket_path=shared / "d.sock",
            config={
                **KUDOS_CONFIG,
                "socket": {"mode": "0666"},
                "access": {"rules": [f"deny uid={nobody} diary.*"]},
            },
        )
        with serving(diary_plugin(daemon.socket_path)), daemon.connect() as client:
            client.diary.add("2026-11-10", "monday", "a good day", "pleasant")
            caller = subprocess.run(
                [interpreter, "-c", DENIED_CALLER, daemon.socket_path],
                # Pure-Python protobuf: the copied C extension may not be built for that interpreter.
                env={"PYTHONPATH": str(packages), "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"},
                user=nobody,
                group=nobody,
                extra_groups=[],
                cwd=str(shared),
                capture_output=True,
                text=True,
                timeout=DEADLINE_SECONDS,
                preexec_fn=die_with_parent,
            )
            assert caller.returncode == 0, caller.stderr
            through_plugin, direct = caller.stdout.strip().splitlines()
            denied = f"{int(ErrorCode.PERMISSION_DENIED)}:"
            assert through_plugin.startswith(denied) and "diary.list" in through_plugin, through_plugin
            assert direct.startswith(denied), direct
            # The plugin itself (the daemon's uid) and other callers still get the diary through it.
            listed = client.call("kudos", "list", reply_type=kudos_pb2.KudosList)
            assert [kudos.text for kudos in listed.kudos] == ["a good day"]
        daemon.stop()  # before its socket's folder goes
    finally:
        shutil.rmtree(shared, ignore_errors=True)
