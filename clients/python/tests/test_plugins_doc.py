"""docs/PLUGINS.md's Python walk-through runs as written.

The blocks marked ``<!-- walk-through: NAME -->`` are taken from the page: the schema, the protoc
command, the plugin, the daemon's configuration, the caller and its output, and the plugin's tests.
protoc generates the plugin's module in one folder; the plugin runs there as a process of its own
(dying with the test); the caller runs in another folder, where no generated code for the namespace
exists. The plugin's tests (``test_habits.py``, mentory.testing) run in the plugin's folder with no
daemon at all.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

import mentory
from support import DEADLINE_SECONDS, die_with_parent, wait_until

PLUGINS_MD = Path(__file__).resolve().parents[3] / "docs" / "PLUGINS.md"


def walk_through() -> Dict[str, str]:
    blocks = re.findall(r"<!-- walk-through: (\S+) -->\n```[a-z]*\n(.*?)```", PLUGINS_MD.read_text(), flags=re.S)
    return dict(blocks)


def python_environment(**extra: str) -> Dict[str, str]:
    """This interpreter first on PATH (as ``python3``), so the doc's commands use the package under test."""
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "MENTORY_SOCKET")}
    environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + environment.get("PATH", "")
    environment["PYTHONDONTWRITEBYTECODE"] = "1"
    environment.update(extra)
    return environment


def test_the_walk_through_has_every_part() -> None:
    assert set(walk_through()) == {
        "habits.proto",
        "generate.sh",
        "habits_plugin.py",
        "mentoryd.json",
        "caller.py",
        "caller.out",
        "test_habits.py",
    }


def generate(parts: Dict[str, str], plugin_dir: Path) -> None:
    """The plugin's folder as the walk-through makes it: habits.proto, habits_plugin.py, habits_pb2.py."""
    if shutil.which("protoc") is None:
        pytest.fail("protoc is needed (apt-get install protobuf-compiler; scripts/install-deps.sh)", pytrace=False)
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "python3")):
        pytest.fail(f"no python3 beside {sys.executable}: run the tests from a virtual environment", pytrace=False)
    plugin_dir.mkdir()
    for name in ("habits.proto", "habits_plugin.py"):
        (plugin_dir / name).write_text(parts[name])
    generated = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", parts["generate.sh"]],
        cwd=plugin_dir,
        env=python_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=die_with_parent,
    )
    assert generated.returncode == 0, generated.stderr
    assert "import mentory_pb2" in (plugin_dir / "habits_pb2.py").read_text()  # as protoc wrote it


def test_the_plugins_tests_run_without_a_daemon(tmp_path: Path) -> None:
    parts = walk_through()
    plugin_dir = tmp_path / "plugin"
    generate(parts, plugin_dir)
    (plugin_dir / "test_habits.py").write_text(parts["test_habits.py"])
    # No daemon: the socket named leads nowhere, and nothing may need one.
    environment = python_environment(MENTORY_SOCKET=str(tmp_path / "no-daemon.sock"))
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "t"),
         "test_habits.py"],
        cwd=plugin_dir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS * 4,
        preexec_fn=die_with_parent,
    )
    assert tested.returncode == 0, f"{tested.stdout}\n{tested.stderr}"
    assert "2 passed" in tested.stdout, tested.stdout
    assert not (tmp_path / "no-daemon.sock").exists()


def test_the_python_walk_through_runs(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("protoc") is None:
        pytest.fail("protoc is needed (apt-get install protobuf-compiler; scripts/install-deps.sh)", pytrace=False)
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "python3")):
        pytest.fail(f"no python3 beside {sys.executable}: run the tests from a virtual environment", pytrace=False)
    parts = walk_through()
    plugin_dir = tmp_path / "plugin"
    caller_dir = tmp_path / "caller"
    generate(parts, plugin_dir)
    caller_dir.mkdir()
    (caller_dir / "caller.py").write_text(parts["caller.py"])

    daemon = make_daemon(config=json.loads(parts["mentoryd.json"]))
    log = tmp_path / "plugin.log"
    with open(log, "ab") as output:
        plugin = subprocess.Popen(
            [sys.executable, "habits_plugin.py"],
            cwd=plugin_dir,
            env=python_environment(MENTORY_SOCKET=daemon.socket_path),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
    try:
        with daemon.connect() as client:

            def registered() -> bool:
                assert plugin.poll() is None, log.read_text()
                [state] = [p for p in client.status().plugins if p.name == "habits"]
                return state.state == mentory.pb.PLUGIN_STATE_CONNECTED

            wait_until(registered, "the walk-through's plugin to register")
        called = subprocess.run(
            [sys.executable, "caller.py"],
            cwd=caller_dir,
            env=python_environment(MENTORY_SOCKET=daemon.socket_path),
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS * 2,
            preexec_fn=die_with_parent,
        )
        assert called.returncode == 0, f"{called.stdout}\n{called.stderr}\n{log.read_text()}"
        assert called.stdout == parts["caller.out"]
        assert not list(caller_dir.glob("*_pb2.py"))
        plugin.send_signal(signal.SIGTERM)
        assert plugin.wait(DEADLINE_SECONDS) == 0, log.read_text()
    finally:
        if plugin.poll() is None:
            plugin.kill()
            plugin.wait()
