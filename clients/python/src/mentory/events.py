"""Events, resume positions and the reconnect backoff of subscriptions."""

import json
import random
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ._enums import EventKind

__all__ = ["Event", "Position", "Backoff"]


@dataclass(frozen=True)
class Event:
    """One event of a subscription.

    ``kind`` is a :data:`mentory.EventKind` member (``CHANGE``, ``SNAPSHOT``, ``RESET`` or ``ENDED``).
    An ``ENDED`` event says the daemon ended the subscription to ``topic`` (a reload took away the
    subscriber's right to read it): ``error`` is the :class:`mentory.MentoryError` saying why, and no
    more events follow on the topic.

    ``body`` is decoded with the topic's message type (``mentor``: ``MentorState``;
    ``reachability``: ``PeerState`` for a change, ``ReachabilitySnapshot`` otherwise; ``diary``:
    ``DiaryChange`` for a change, ``DiarySnapshot`` otherwise). Any other topic (a plugin's) is
    decoded with the types the daemon's ``session.describe`` gives; for a topic it does not
    describe, ``body`` is the raw bytes. (It is typed ``Any`` because its type follows ``topic``
    and ``kind``; :data:`mentory.TOPICS` lists mentory.proto's types.)

    A ``SNAPSHOT`` (first event after subscribing) and a ``RESET`` (sent instead of changes that
    were missed, e.g. after the daemon restarted) both carry the topic's whole state: replace
    what you hold, do not merge.
    """

    topic: str
    kind: int
    sequence: int
    epoch: int
    body: Any
    #: ``ENDED`` only: why the subscription ended (a :class:`mentory.MentoryError`).
    error: Optional[Any] = None

    @property
    def is_change(self) -> bool:
        return int(self.kind) == int(EventKind.CHANGE)

    @property
    def is_snapshot(self) -> bool:
        return int(self.kind) == int(EventKind.SNAPSHOT)

    @property
    def is_reset(self) -> bool:
        return int(self.kind) == int(EventKind.RESET)

    @property
    def is_ended(self) -> bool:
        return int(self.kind) == int(EventKind.ENDED)


_TOKEN_VERSION = 1


@dataclass(frozen=True)
class Position:
    """Where a subscriber is: per topic, the epoch and the sequence number of the last event handed over.

    Pass it (or its :meth:`token`) as ``resume=`` to continue a subscription later, also from
    another process: the daemon replays what was missed, or sends a ``RESET`` when it cannot
    (the epoch changed because the daemon restarted, or the changes left its ring).
    """

    topics: Mapping[str, Tuple[int, int]] = field(default_factory=dict)

    @property
    def epoch(self) -> Optional[int]:
        """The daemon epoch every topic's sequence belongs to; ``None`` when empty or (briefly, while
        resets arrive after a restart) when topics are in different epochs."""
        epochs = {epoch for epoch, _ in self.topics.values()}
        return epochs.pop() if len(epochs) == 1 else None

    @property
    def sequences(self) -> Dict[str, int]:
        """Per topic, the sequence number of the last event handed over."""
        return {topic: sequence for topic, (_, sequence) in self.topics.items()}

    def advanced(self, event: Event) -> "Position":
        """This position after ``event``."""
        topics = dict(self.topics)
        topics[event.topic] = (event.epoch, event.sequence)
        return Position(topics)

    def includes(self, event: Event) -> bool:
        """Whether ``event`` is a change this position already covers (same epoch, not newer)."""
        known = self.topics.get(event.topic)
        return event.is_change and known is not None and known[0] == event.epoch and event.sequence <= known[1]

    def token(self) -> str:
        """A string to store and later pass as ``resume=`` (see :meth:`from_token`)."""
        return json.dumps(
            {"v": _TOKEN_VERSION, "topics": {t: [e, s] for t, (e, s) in sorted(self.topics.items())}},
            separators=(",", ":"),
        )

    @classmethod
    def from_token(cls, token: str) -> "Position":
        """The position :meth:`token` wrote. Raises ``ValueError`` for anything else."""
        try:
            data = json.loads(token)
            if data.get("v") != _TOKEN_VERSION:
                raise ValueError(f"unsupported position token version {data.get('v')!r}")
            return cls({str(t): (int(e), int(s)) for t, (e, s) in data["topics"].items()})
        except (TypeError, KeyError, AttributeError, json.JSONDecodeError) as error:
            raise ValueError(f"not a mentory position token: {token!r} ({error})") from None


@dataclass(frozen=True)
class Backoff:
    """How a subscription waits between reconnection attempts.

    Attempt ``n`` (0-based) waits ``min(maximum, initial * multiplier**n) * uniform(1, 1 + jitter)``
    seconds. ``initial`` is at least one second so that a restarting daemon is not hammered.
    ``max_attempts`` ``None`` retries forever; otherwise the last error is raised after that many
    failed attempts in a row.

    A plugin (:class:`mentory.plugin.Plugin`) whose registration worked and was then lost (a daemon
    restart) retries every ``quick_interval`` seconds (jittered the same way) for ``quick_window``
    seconds after the loss, so that it answers again within a fraction of a second of the daemon's
    being ready instead of after a back-off that grew while the daemon was down; each attempt is
    one failed connect or handshake, at most about four a second. Then, and before the first
    registration, it backs off as above. ``quick_window=0`` turns quick retries off.
    """

    initial: float = 1.0
    maximum: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.25
    max_attempts: Optional[int] = None
    quick_interval: float = 0.25
    quick_window: float = 30.0

    def __post_init__(self) -> None:
        if self.initial < 1.0:
            raise ValueError("Backoff.initial must be at least 1 second")
        if self.maximum < self.initial or self.multiplier < 1.0 or self.jitter < 0:
            raise ValueError("Backoff needs maximum >= initial, multiplier >= 1 and jitter >= 0")
        if self.quick_interval < 0.1 or self.quick_window < 0:
            raise ValueError("Backoff needs quick_interval >= 0.1 s and quick_window >= 0")

    def is_quick(self, since_loss: Optional[float]) -> bool:
        """Whether an attempt ``since_loss`` seconds after a working connection was lost (``None``:
        none worked yet) is a quick retry."""
        return since_loss is not None and since_loss < self.quick_window

    def delay_after_loss(self, attempt: int, since_loss: Optional[float]) -> float:
        """Seconds to wait before the next attempt: ``quick_interval`` (jittered) within
        ``quick_window`` of the loss of a working connection, else :meth:`delay` of ``attempt``,
        the attempts counted since the quick retries ended."""
        if self.is_quick(since_loss):
            return self.quick_interval * random.uniform(1.0, 1.0 + self.jitter)
        return self.delay(attempt)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt`` (0-based) after a connection was lost."""
        base = min(self.maximum, self.initial * self.multiplier ** min(attempt, 64))
        return base * random.uniform(1.0, 1.0 + self.jitter)
