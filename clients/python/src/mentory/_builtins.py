"""The daemon's built-in namespaces, ``diary``, ``mentor`` and ``reachability``, in memory, for
:mod:`mentory.testing`.

They answer as mentoryd's handlers do (Sources/Handlers): the same checks in the same order, with the
same wire codes and messages (the field limits of docs/PROTOCOL.md, one diary entry per day, the seven
emotions, ...), and publish the same changes. They are kept small: no storage failures, no reply size
budget (a page stops at its limit, not at a frame's size).
"""

import datetime
import os
import re
import uuid
from typing import Callable, Dict, List, Optional, Tuple

from google.protobuf.message import Message

from ._enums import ErrorCode
from . import _messages as pb
from .errors import MentoryError

#: Publishes a change: ``(topic, message)``.
Publish = Callable[[str, Message], None]

# The field limits (Sources/MentoryDomain/DomainFieldLimits.swift), in UTF-8 bytes or items.
DIARY_TITLE = ("DiaryAddRequest.title", 256, "UTF-8 bytes")
DIARY_TEXT = ("DiaryAddRequest.text", 65_536, "UTF-8 bytes")
DIARY_ANALYSIS = ("DiaryAddRequest.analysis", 16_384, "UTF-8 bytes")
MENTOR_CONTENT = ("MentorSetRequest.content", 16_384, "UTF-8 bytes")
ACTION_ITEM_COUNT = ("action_items (DiaryAddRequest, MentorSetRequest)", 32, "items")
ACTION_ITEM_TEXT = ("ActionItem.text", 512, "UTF-8 bytes")
ID = ("ActionItem.id and every id field of a request", 64, "UTF-8 bytes")
PEER_NAME = ("PeerState.peer", 64, "UTF-8 bytes")
PEER_COUNT = ("peers known to reachability", 64, "items")

DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 1000
SNAPSHOT_LIMIT = 100

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_DAY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def invalid(message: str) -> MentoryError:
    return MentoryError(ErrorCode.INVALID_ARGUMENT, message)


def not_found(what: str) -> MentoryError:
    return MentoryError(ErrorCode.NOT_FOUND, f"{what} was not found")


def check_size(value: int, limit: Tuple[str, int, str], field: Optional[str] = None) -> None:
    name, maximum, unit = limit
    if value > maximum:
        raise invalid(f"{field or name} has {value} {unit}, over the limit of {maximum}")


def check_text(text: str, limit: Tuple[str, int, str], field: Optional[str] = None) -> None:
    check_size(len(text.encode("utf-8")), limit, field)


def quoted(value: str) -> str:
    """``value`` for an error message: quoted, cut to at most 60 bytes when over 64 (FieldLimits.quoted)."""
    size = len(value.encode("utf-8"))
    if size <= 64:
        return f"'{value}'"
    cut = ""
    for character in value:
        if len((cut + character).encode("utf-8")) > 60:
            break
        cut += character
    return f"'{cut}…' ({size} bytes)"


def blank(text: str) -> bool:
    return not text.strip()


def canonical_id(text: str) -> Optional[str]:
    """A UUID in lowercase, or ``None`` when ``text`` is not one (EntityID.canonical)."""
    return text.lower() if _UUID.match(text) else None


def normalized_id(text: str) -> str:
    return canonical_id(text) or text


def lookup_id(text: str, field: str) -> str:
    check_text(text, ID, field)
    return normalized_id(text)


def is_day(text: str) -> bool:
    """Whether ``text`` is a real day written YYYY-MM-DD (CalendarDay)."""
    if not _DAY.match(text):
        return False
    try:
        datetime.date(int(text[0:4]), int(text[5:7]), int(text[8:10]))
    except ValueError:
        return False
    return True


def time_ordered_id(unix_ms: int) -> str:
    """A version 7 UUID: the first 48 bits ``unix_ms``, the rest random (EntityID.timeOrdered)."""
    data = bytearray(os.urandom(16))
    data[0:6] = (max(0, unix_ms) & 0xFFFF_FFFF_FFFF).to_bytes(6, "big")
    data[6] = (data[6] & 0x0F) | 0x70
    data[8] = (data[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(data)))


def normalized_items(items: List[pb.ActionItem]) -> List[pb.ActionItem]:
    """Checked action items, with a fresh UUID for those without an id (ActionItems.normalized)."""
    check_size(len(items), ACTION_ITEM_COUNT)
    seen = set()
    result = []
    for index, item in enumerate(items, start=1):
        if blank(item.text):
            raise invalid(f"action item {index} has no text")
        check_text(item.text, ACTION_ITEM_TEXT, f"the text of action item {index}")
        check_text(item.id, ID, f"the id of action item {index}")
        normalized = pb.ActionItem(
            id=str(uuid.uuid4()) if not item.id else normalized_id(item.id), text=item.text, done=item.done
        )
        if normalized.id in seen:
            raise invalid(f"action item id {quoted(normalized.id)} appears twice")
        seen.add(normalized.id)
        result.append(normalized)
    return result


class Diary:
    """Namespace ``diary``: one entry per calendar day (DiaryHandler over InMemorySessionStore)."""

    namespace = "diary"

    def __init__(self, publish: Publish, now_ms: Callable[[], int]) -> None:
        self._publish = publish
        self._now_ms = now_ms
        self.entries: Dict[str, pb.DiaryEntry] = {}
        self._by_day: Dict[str, str] = {}

    def answer(self, method: str, request: Message, caller: pb.PluginCaller) -> Message:
        if method == "add":
            return self.add(request)  # type: ignore[arg-type]
        if method == "get":
            return self.existing(lookup_id(request.id, "id"))  # type: ignore[attr-defined]
        if method == "list":
            return self.list(request)  # type: ignore[arg-type]
        if method == "delete":
            return self.delete(request)  # type: ignore[arg-type]
        if method == "setSuggestionDone":
            return self.set_suggestion_done(request)  # type: ignore[arg-type]
        raise AssertionError(method)

    def add(self, request: pb.DiaryAddRequest) -> pb.DiaryEntry:
        if not is_day(request.record_date):
            raise invalid(f"the record date must be a real day written YYYY-MM-DD, not {quoted(request.record_date)}")
        if blank(request.title):
            raise invalid("the diary entry's title is empty")
        check_text(request.title, DIARY_TITLE)
        if blank(request.text):
            raise invalid("the diary entry's text is empty")
        check_text(request.text, DIARY_TEXT)
        if request.HasField("analysis"):
            check_text(request.analysis, DIARY_ANALYSIS)
        if not 1 <= int(request.emotion) <= 7:
            raise invalid("the emotion must be one of the seven, from veryUnpleasant to veryPleasant")
        now = self._now_ms()
        if not request.id:
            entry_id = time_ordered_id(now)
        else:
            check_text(request.id, ID, "DiaryAddRequest.id")
            canonical = canonical_id(request.id)
            if canonical is None:
                raise invalid(f"the entry id must be a UUID, not {quoted(request.id)}")
            entry_id = canonical
        entry = pb.DiaryEntry(
            id=entry_id,
            record_date=request.record_date,
            created_at_unix_ms=request.created_at_unix_ms or now,
            title=request.title,
            text=request.text,
            emotion=request.emotion,
            action_items=normalized_items(list(request.action_items)),
        )
        if request.HasField("analysis"):
            entry.analysis = request.analysis
        existing = self.entries.get(entry.id)
        if existing is not None:
            if existing != entry:
                raise MentoryError(
                    ErrorCode.CONFLICT,
                    f"a different entry with id {entry.id} already exists; delete it first to replace it",
                )
            return entry  # an import repeated: nothing changes, nothing is published
        same_day = self._by_day.get(entry.record_date)
        if same_day is not None:
            raise MentoryError(
                ErrorCode.CONFLICT,
                f"there is already an entry for {entry.record_date} (id {same_day}); delete it first",
            )
        self.entries[entry.id] = entry
        self._by_day[entry.record_date] = entry.id
        self._publish("diary", pb.DiaryChange(added=entry))
        return entry

    def existing(self, entry_id: str) -> pb.DiaryEntry:
        entry = self.entries.get(entry_id)
        if entry is None:
            raise not_found(f"diary entry {quoted(entry_id)}")
        return entry

    def page(self, limit: int, before: Optional[str]) -> Tuple[List[pb.DiaryEntry], Optional[str]]:
        days = sorted((day for day in self._by_day if before is None or day < before), reverse=True)
        entries = [self.entries[self._by_day[day]] for day in days[:limit]]
        return entries, (entries[-1].record_date if len(days) > limit and entries else None)

    def list(self, request: pb.DiaryListRequest) -> pb.DiaryListReply:
        limit = request.limit or DEFAULT_LIST_LIMIT
        if limit > MAX_LIST_LIMIT:
            raise invalid(f"list at most {MAX_LIST_LIMIT} entries at a time, not {limit}")
        before = request.before if request.HasField("before") else None
        if before is not None and not is_day(before):
            raise invalid(f"'before' must be a date written YYYY-MM-DD, not {quoted(before)}")
        entries, next_before = self.page(limit, before)
        reply = pb.DiaryListReply(entries=entries)
        if next_before is not None:
            reply.next_before = next_before
        return reply

    def snapshot(self) -> pb.DiarySnapshot:
        entries, next_before = self.page(SNAPSHOT_LIMIT, None)
        snapshot = pb.DiarySnapshot(entries=entries)
        if next_before is not None:
            snapshot.next_before = next_before
        return snapshot

    def delete(self, request: pb.DiaryDeleteRequest) -> pb.DiaryEntry:
        entry_id = lookup_id(request.id, "id")
        entry = self.entries.pop(entry_id, None)
        if entry is None:
            raise not_found(f"diary entry {quoted(entry_id)}")
        del self._by_day[entry.record_date]
        self._publish("diary", pb.DiaryChange(deleted_id=entry.id))
        return entry

    def set_suggestion_done(self, request: pb.DiarySuggestionDoneRequest) -> pb.DiaryEntry:
        entry_id = lookup_id(request.entry_id, "entry_id")
        item_id = lookup_id(request.suggestion_id, "suggestion_id")
        entry = self.entries.get(entry_id)
        if entry is None:
            raise not_found(f"diary entry {entry_id}")
        items = [item for item in entry.action_items if item.id == item_id]
        if not items:
            raise not_found(f"action item {item_id} of diary entry {entry_id}")
        if items[0].done != request.done:
            items[0].done = request.done
            self._publish("diary", pb.DiaryChange(updated=entry))
        return entry


class Mentor:
    """Namespace ``mentor``: the day's mentor message; the latest ``set`` wins (MentorHandler)."""

    namespace = "mentor"

    def __init__(self, publish: Publish, now_ms: Callable[[], int]) -> None:
        self._publish = publish
        self._now_ms = now_ms
        self.state = pb.MentorState()

    def answer(self, method: str, request: Message, caller: pb.PluginCaller) -> Message:
        if method == "get":
            return self.state
        if method == "set":
            return self.set(request)  # type: ignore[arg-type]
        if method == "completeTodo":
            return self.complete_todo(request)  # type: ignore[arg-type]
        raise AssertionError(method)

    def snapshot(self) -> pb.MentorState:
        return self.state

    def set(self, request: pb.MentorSetRequest) -> pb.MentorState:
        if blank(request.content):
            raise invalid("the mentor message's content is empty")
        check_text(request.content, MENTOR_CONTENT)
        if request.character not in (pb.MENTOR_CHARACTER_COOL, pb.MENTOR_CHARACTER_WARM):
            raise invalid("the mentor character must be cool or warm")
        items = normalized_items(list(request.action_items))
        if self._is_same(request):
            return self.state
        message = pb.MentorMessage(
            content=request.content, character=request.character, action_items=items, updated_at_unix_ms=self._now_ms()
        )
        self.state = pb.MentorState(message=message)
        self._publish("mentor", self.state)
        return self.state

    def _is_same(self, request: pb.MentorSetRequest) -> bool:
        if not self.state.HasField("message"):
            return False
        held = self.state.message
        if (held.content, held.character, len(held.action_items)) != (
            request.content,
            request.character,
            len(request.action_items),
        ):
            return False
        return all(
            asked.text == item.text and asked.done == item.done and (not asked.id or normalized_id(asked.id) == item.id)
            for asked, item in zip(request.action_items, held.action_items)
        )

    def complete_todo(self, request: pb.MentorCompleteTodoRequest) -> pb.MentorState:
        check_text(request.id, ID, "id")
        item_id = normalized_id(request.id)
        items = [item for item in self.state.message.action_items if item.id == item_id]
        if not self.state.HasField("message") or not items:
            raise not_found(f"mentor action item {quoted(item_id)}")
        if items[0].done:
            return self.state
        updated = pb.MentorState()
        updated.CopyFrom(self.state)
        for item in updated.message.action_items:
            if item.id == item_id:
                item.done = True
        updated.message.updated_at_unix_ms = self._now_ms()
        self.state = updated
        self._publish("mentor", self.state)
        return self.state


class Reachability:
    """Namespace ``reachability``: companion devices' states as they report them (ReachabilityHandler)."""

    namespace = "reachability"

    def __init__(self, publish: Publish, now_ms: Callable[[], int]) -> None:
        self._publish = publish
        self._now_ms = now_ms
        self.peers: Dict[str, pb.PeerState] = {}

    def answer(self, method: str, request: Message, caller: pb.PluginCaller) -> Message:
        if method == "get":
            return self.snapshot()
        if method == "report":
            return self.report(request)  # type: ignore[arg-type]
        raise AssertionError(method)

    def snapshot(self) -> pb.ReachabilitySnapshot:
        return pb.ReachabilitySnapshot(peers=[self.peers[name] for name in sorted(self.peers)])

    def report(self, report: pb.PeerState) -> pb.PeerState:
        name = report.peer
        if not name:
            raise invalid("the peer name is empty")
        check_text(name, PEER_NAME)
        if not all(character.isalpha() or character in "0123456789-_." for character in name):
            raise invalid(f"peer name '{name}' may hold only letters, digits, '-', '_' and '.'")
        known = self.peers.get(name)
        if known is None:
            check_size(len(self.peers) + 1, PEER_COUNT, "the number of peers")
        elif (known.is_paired, known.is_app_installed, known.is_reachable) == (
            report.is_paired,
            report.is_app_installed,
            report.is_reachable,
        ):
            return known  # the same state again: no new timestamp, no event
        peer = pb.PeerState()
        peer.CopyFrom(report)
        peer.updated_at_unix_ms = self._now_ms()
        self.peers[name] = peer
        self._publish("reachability", peer)
        return peer
