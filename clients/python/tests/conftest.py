"""Fixtures: a real mentoryd process per test, on a socket under the test's temporary directory.

The daemon binary comes from ``$MENTORYD_BIN`` (a file) or ``$MENTORYD_BIN_DIR`` (the folder
``swift build --show-bin-path`` prints); scripts/test-python.sh sets the latter. Every daemon dies
with the test: the fixture's finalizer stops it, and ``PR_SET_PDEATHSIG`` kills it if pytest
itself dies.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

import pytest

import mentory
from support import die_with_parent

REPO_ROOT = Path(__file__).resolve().parents[3]
START_DEADLINE_SECONDS = 30.0
STOP_DEADLINE_SECONDS = 15.0


def daemon_binary() -> Path:
    explicit = os.environ.get("MENTORYD_BIN")
    if explicit:
        return Path(explicit)
    directory = os.environ.get("MENTORYD_BIN_DIR") or str(REPO_ROOT / ".build" / "debug")
    return Path(directory) / "mentoryd"


class Daemon:
    """One mentoryd process. ``restart()`` starts a new process on the same socket and state directory."""

    def __init__(
        self,
        directory: Path,
        backend: str = "memory",
        config: Optional[Dict[str, object]] = None,
        arguments: Optional[List[str]] = None,
        socket_path: Optional[Path] = None,
    ) -> None:
        self.directory = directory
        self.socket_path = str(socket_path or directory / "d.sock")
        self.state_dir = directory / "state"
        self.log_path = directory / "mentoryd.log"
        self.config_path = directory / "mentoryd.json"
        self.config_path.write_text(json.dumps(config or {}))
        self.backend = backend
        self.arguments = list(arguments or [])
        self.process: Optional["subprocess.Popen[bytes]"] = None

    def start(self) -> "Daemon":
        binary = daemon_binary()
        if not binary.is_file():
            pytest.fail(f"no mentoryd binary at {binary}: build it or set MENTORYD_BIN_DIR", pytrace=False)
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("MENTORYD_") and not key.startswith("MENTORY_") and key != "NOTIFY_SOCKET"
        }
        environment["MENTORYD_STORAGE_BACKEND"] = self.backend
        command = [
            str(binary),
            "--socket", self.socket_path,
            "--state-dir", str(self.state_dir),
            "--config", str(self.config_path),
            "--log-level", "debug",
        ] + self.arguments
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                preexec_fn=die_with_parent,
            )
        self._wait_until_serving()
        return self

    def _wait_until_serving(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        last_error: Optional[BaseException] = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if os.path.exists(self.socket_path):
                try:
                    with mentory.connect(self.socket_path, client_name="probe", timeout=5) as client:
                        client.ping()
                    return
                except mentory.SocketTrustError:
                    return  # serving; the test checks the refusal itself
                except mentory.MentoryError as error:
                    last_error = error
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"mentoryd did not start ({last_error}); its log:\n{self.log()}", pytrace=False)

    def stop(self) -> Optional[int]:
        """SIGTERM, then SIGKILL if it has not exited within the deadline; returns the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_DEADLINE_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill()
        status = self.process.returncode
        self.process = None
        return status

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> "Daemon":
        self.stop()
        return self.start()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def connect(self, **options: object) -> mentory.Client:
        return mentory.connect(self.socket_path, client_name="tests", **options)  # type: ignore[arg-type]

    def aconnect(self, **options: object):  # type: ignore[no-untyped-def]
        return mentory.aio.connect(self.socket_path, client_name="tests", **options)  # type: ignore[arg-type]


DaemonFactory = Callable[..., Daemon]


@pytest.fixture
def make_daemon(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[DaemonFactory]:
    """Starts daemons for one test (``make_daemon(backend="sqlite", config={...})``) and stops them after it."""
    daemons: List[Daemon] = []

    def make(directory: Optional[Path] = None, **options: object) -> Daemon:
        # A short directory: a Unix socket path must stay under 108 bytes.
        daemon = Daemon(directory or tmp_path_factory.mktemp("d"), **options)  # type: ignore[arg-type]
        daemons.append(daemon)
        return daemon.start()

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for daemon in daemons:
        daemon.stop()
        if failed:
            sys.stderr.write(f"\n--- mentoryd log ({daemon.log_path}) ---\n{daemon.log()[-20000:]}\n")


@pytest.fixture
def daemon(make_daemon: DaemonFactory) -> Daemon:
    """A daemon on the in-memory store."""
    return make_daemon()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[mentory.Client]:
    with daemon.connect() as connected:
        yield connected


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: "pytest.CallInfo[None]") -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, "rep_" + report.when, report)
