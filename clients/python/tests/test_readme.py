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


def _examples() -> List[str]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return [block for block in blocks if "import mentory" in block]


def test_readme_has_runnable_examples() -> None:
    assert len(_examples()) >= 2


@pytest.mark.parametrize("index", range(2))
def test_readme_example_runs(index: int, daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source = _examples()[index]
    environment = dict(os.environ, MENTORY_SOCKET=daemon.socket_path, PYTHONDONTWRITEBYTECODE="1")
    for attempt in range(2):  # the second run must also pass: the sync example handles its CONFLICT
        result = subprocess.run(
            [sys.executable, "-c", source],
            cwd=tmp_path,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=die_with_parent,
        )
        assert result.returncode == 0, f"example {index} failed:\n{result.stdout}\n{result.stderr}"
        if index == 0:
            assert "SNAPSHOT" in result.stdout and "CHANGE" in result.stdout
            assert ("today already has an entry" in result.stdout) == (attempt == 1)
        else:
            assert "100 answers" in result.stdout and "SNAPSHOT" in result.stdout
