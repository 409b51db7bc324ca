"""Logging for plugins and programs that systemd runs: each line with its own journal priority.

Under systemd, a service's standard error is a stream into the journal (``JOURNAL_STREAM`` names it), and
journald files every line with the unit's default priority, unless the line starts with a syslog priority prefix
such as ``<4>`` (``SyslogLevelPrefix=``, on by default). :func:`configure_logging` installs a handler that writes
those prefixes when standard error is the journal, and plain, timestamped lines when run by hand; the same choice
the daemon and ``mentory-advisor`` make with their ``JournalLogHandler``.
"""

import logging
import os
import sys
from typing import Optional, TextIO

__all__ = ["JournalFormatter", "configure_logging", "stream_is_journal", "syslog_priority"]


def stream_is_journal(stream: Optional[TextIO] = None) -> bool:
    """Whether ``stream`` (standard error by default) is the journal stream systemd named in ``JOURNAL_STREAM``."""
    named = os.environ.get("JOURNAL_STREAM", "")
    device, _, inode = named.partition(":")
    if not device.isdigit() or not inode.isdigit():
        return False
    try:
        status = os.fstat((stream or sys.stderr).fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return status.st_dev == int(device) and status.st_ino == int(inode)


def syslog_priority(level: int) -> int:
    """The syslog priority of a :mod:`logging` level: 2 (crit) for CRITICAL, 3, 4, 6 (info) for INFO, 7 below."""
    if level >= logging.CRITICAL:
        return 2
    if level >= logging.ERROR:
        return 3
    if level >= logging.WARNING:
        return 4
    if level >= logging.INFO:
        return 6
    return 7


class JournalFormatter(logging.Formatter):
    """Prefixes every line of a record (a traceback's too) with the record's syslog priority, ``<N>``.

    No timestamp by default: the journal stamps each line itself.
    """

    def __init__(self, fmt: str = "%(name)s: %(message)s") -> None:
        super().__init__(fmt)

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in super().format(record).splitlines() or [""])


def configure_logging(level: int = logging.INFO, stream: Optional[TextIO] = None) -> logging.Handler:
    """Sends the root logger's records at ``level`` and above to ``stream`` (standard error by default).

    With :class:`JournalFormatter` when that stream is the journal, else as ``time LEVEL name: message``.
    Returns the handler it added.
    """
    target = stream or sys.stderr
    handler = logging.StreamHandler(target)
    if stream_is_journal(target):
        handler.setFormatter(JournalFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler
