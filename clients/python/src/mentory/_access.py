"""mentoryd's access policy (``access.rules``), for :mod:`mentory.testing`'s in-memory host.

The rules read and decide as the daemon's (Sources/MentoryEngine/Access/AccessPolicy.swift,
docs/CONFIGURATION.md, "Access rules"): ``allow|deny WHO WHAT [WHAT...]``, WHO ``any``, ``uid=N`` or
``gid=N`` (primary or supplementary group), WHAT ``namespace.method``, ``namespace.*``, ``*``,
``subscribe:TOPIC`` or ``subscribe:*``; the first rule that matches the caller and the action decides,
none matching allows; root and the daemon's own user pass every rule; a caller whose credentials are
unknown matches every deny rule and no allow rule. A method's privilege is checked before the rules.
"""

from dataclasses import dataclass
from typing import FrozenSet, Iterable, List, Optional, Sequence

from . import _messages as pb


@dataclass(frozen=True)
class Credentials:
    """A peer as the kernel reports it; ``groups`` are its supplementary groups."""

    uid: int
    gid: int
    groups: FrozenSet[int] = frozenset()

    def is_member(self, gid: int) -> bool:
        return self.gid == gid or gid in self.groups


def _matches(pattern: str, action: str) -> bool:
    """Whether ``pattern`` (``*``, a prefix ending in ``*``, or the whole action) names ``action``;
    ``*`` names every call but no subscription."""
    if pattern == "*":
        return not action.startswith("subscribe:")
    if pattern.endswith("*"):
        return action.startswith(pattern[:-1])
    return action == pattern


@dataclass(frozen=True)
class Rule:
    allows: bool
    #: ``"any"``, ``"uid"`` or ``"gid"``.
    who: str
    number: int
    actions: Sequence[str]

    @staticmethod
    def parse(text: str) -> "Rule":
        words = text.split()
        if len(words) < 3 or words[0] not in ("allow", "deny"):
            raise ValueError(f"access rule '{text}' must read: allow|deny WHO WHAT [WHAT...]")
        who, number = words[1], 0
        if who.startswith("uid=") or who.startswith("gid="):
            try:
                number = int(who[4:])
                if not 0 <= number <= 0xFFFF_FFFF or not who[4:].isdigit():
                    raise ValueError
            except ValueError:
                raise ValueError(f"access rule '{text}': '{who}' needs a numeric {who[:3]}") from None
            who = who[:3]
        elif who != "any":
            raise ValueError(f"access rule '{text}': WHO must be any, uid=N or gid=N")
        return Rule(words[0] == "allow", who, number, tuple(words[2:]))

    def matches_caller(self, credentials: Credentials) -> bool:
        if self.who == "any":
            return True
        if self.who == "uid":
            return credentials.uid == self.number
        return credentials.is_member(self.number)

    def names(self, action: str) -> bool:
        return any(_matches(pattern, action) for pattern in self.actions)

    def grants_explicitly(self, action: str) -> bool:
        if not self.allows or self.who == "any":
            return False
        return any(pattern not in ("*", "subscribe:*") and _matches(pattern, action) for pattern in self.actions)


class AccessPolicy:
    """The rules, in order, and the daemon's user (trusted like root; ``None``: only root)."""

    def __init__(self, rules: Iterable[str] = (), daemon_uid: Optional[int] = None) -> None:
        self.rules: List[Rule] = [Rule.parse(rule) for rule in rules]
        self.daemon_uid = daemon_uid

    def permits(self, privilege: int, credentials: Optional[Credentials]) -> bool:
        """Whether ``credentials`` hold ``privilege`` (a method's ``(mentory.v1.privilege)``)."""
        if privilege == pb.PRIVILEGE_UNSPECIFIED:
            return True
        if credentials is None:
            return False
        if privilege == pb.PRIVILEGE_OWNER:
            return credentials.uid == 0 or credentials.uid == self.daemon_uid
        return credentials.uid == 0

    def allows_call(
        self, credentials: Optional[Credentials], namespace: str, method: str, privilege: int = pb.PRIVILEGE_UNSPECIFIED
    ) -> bool:
        """Whether a caller with ``credentials`` (``None``: unknown) may call ``namespace.method``."""
        return self.allows(credentials, f"{namespace}.{method}", privilege)

    def allows_subscription(self, credentials: Optional[Credentials], topic: str) -> bool:
        """Whether the ``subscribe:`` rules let a caller with ``credentials`` subscribe to ``topic``."""
        return self.allows(credentials, f"subscribe:{topic}")

    def allows_privileged_subscription(self, credentials: Optional[Credentials], topic: str) -> bool:
        """Whether a caller with ``credentials`` may subscribe to ``topic``, which declares no ``reads``:
        root, the daemon's user, and a uid or group a rule allows ``subscribe:TOPIC`` by name."""
        return self.allows(credentials, f"subscribe:{topic}", pb.PRIVILEGE_OWNER)

    def allows(
        self, credentials: Optional[Credentials], action: str, privilege: int = pb.PRIVILEGE_UNSPECIFIED
    ) -> bool:
        """Whether a caller with ``credentials`` may take ``action`` (``namespace.method`` or
        ``subscribe:TOPIC``), which ``privilege`` guards."""
        rules = [rule for rule in self.rules if rule.names(action)]
        if self.permits(privilege, credentials):
            return self._allows(credentials, rules)
        if privilege != pb.PRIVILEGE_OWNER or credentials is None:
            return False
        for rule in rules:
            if rule.matches_caller(credentials):
                if not rule.allows:
                    return False
                if rule.grants_explicitly(action):
                    return True
        return False

    def _allows(self, credentials: Optional[Credentials], rules: List[Rule]) -> bool:
        if credentials is None:
            return not any(not rule.allows for rule in rules)  # fail closed
        if credentials.uid == 0 or credentials.uid == self.daemon_uid:
            return True
        for rule in rules:
            if rule.matches_caller(credentials):
                return rule.allows
        return True
