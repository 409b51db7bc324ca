"""The README's complete examples (its python blocks that import mentory) run as written."""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from support import die_with_parent

README = Path(__file__).resolve().parents[1] / "README.md"
KUDOS_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kudos"


def _blocks() -> List[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return [block for block in blocks if "import mentory" in block]


def _examples() -> List[str]:
    """The client examples."""
    return [block for block in _blocks() if "mentory.plugin" not in block]


def _plugin_examples() -> List[str]:
    """The plugin example: it serves namespace kudos (examples/kudos) and calls it."""
    return [block for block in _blocks() if "mentory.plugin" in block]


def _run(source: str, socket_path: str, cwd: Path, **environment: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-c", source],
        cwd=cwd,
        env=dict(os.environ, MENTORY_SOCKET=socket_path, PYTHONDONTWRITEBYTECODE="1", **environment),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=die_with_parent,
    )


def test_readme_has_runnable_examples() -> None:
    assert len(_examples()) >= 2
    assert len(_plugin_examples()) == 1


@pytest.mark.parametrize("index", range(2))
def test_readme_example_runs(index: int, daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source = _examples()[index]
    for attempt in range(2):  # the second run must also pass: the sync example handles its CONFLICT
        result = _run(source, daemon.socket_path, tmp_path)
        assert result.returncode == 0, f"example {index} failed:\n{result.stdout}\n{result.stderr}"
        if index == 0:
            assert "SNAPSHOT" in result.stdout and "CHANGE" in result.stdout
            assert ("today already has an entry" in result.stdout) == (attempt == 1)
        else:
            assert "100 answers" in result.stdout and "SNAPSHOT" in result.stdout


def test_readme_plugin_example_runs(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    daemon = make_daemon(config={"plugins": {"kudos": {}}})
    for attempt in range(2):  # a second plugin process registers the namespace again
        result = _run(_plugin_examples()[0], daemon.socket_path, tmp_path, PYTHONPATH=str(KUDOS_EXAMPLE))
        assert result.returncode == 0, f"the plugin example failed:\n{result.stdout}\n{result.stderr}"
        assert "kudos #1 to ana from readme-caller" in result.stdout
        assert "INVALID_ARGUMENT kudos.empty_text" in result.stdout
