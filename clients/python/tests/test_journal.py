"""Plugins' log lines carry their own journal priority when standard error is the journal."""

import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import logging, os, sys
    from mentory.journal import configure_logging
    if sys.argv[1] == "journal":
        status = os.fstat(2)
        os.environ["JOURNAL_STREAM"] = f"{status.st_dev}:{status.st_ino}"
    elif sys.argv[1] == "elsewhere":
        os.environ["JOURNAL_STREAM"] = "1:1"
    configure_logging(logging.DEBUG)
    log = logging.getLogger("kudos")
    log.debug("detail")
    log.info("registered")
    log.warning("slow")
    try:
        raise ValueError("bad")
    except ValueError:
        log.exception("failed")
    """
)


def run(mode: str) -> list:
    environment = {key: value for key, value in os.environ.items() if key != "JOURNAL_STREAM"}
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, env=environment, timeout=60, check=True
    )
    return result.stderr.splitlines()


def test_lines_carry_their_priority_when_stderr_is_the_journal() -> None:
    lines = run("journal")
    assert lines[:4] == ["<7>kudos: detail", "<6>kudos: registered", "<4>kudos: slow", "<3>kudos: failed"]
    # The traceback's lines are the error's too, so that the journal keeps them together at its priority.
    assert len(lines) > 4 and all(line.startswith("<3>") for line in lines[3:])
    assert lines[-1] == "<3>ValueError: bad"


def test_plain_lines_when_stderr_is_not_the_journal() -> None:
    for mode in ("terminal", "elsewhere"):
        lines = run(mode)
        assert not any(line.startswith("<") for line in lines), lines
        assert " WARNING kudos: slow" in lines[2]
