"""Request builders for the typed namespace methods, shared by the sync and asyncio clients.

Each builder takes friendly Python values (``"warm"``, ``datetime.date``, plain strings for
action items) and returns the request message from :data:`mentory._schema.METHODS`. Every builder
also takes ``**fields``: any other field of the request message by its proto name, so a field
added to the schema later is usable after regenerating the protobuf code alone.
"""

import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional, Type, Union

from google.protobuf.message import Message

from ._enums import Emotion, MentorCharacter, enum_value
from . import _messages as pb
from ._schema import METHODS

#: An action item as a caller may give it: its text, a dict of its fields, or the message.
ActionItemLike = Union[str, Mapping[str, Any], pb.ActionItem]
#: A day: ``"YYYY-MM-DD"`` or a :class:`datetime.date`.
DayLike = Union[str, datetime.date]


def build(namespace: str, method: str, fields: Mapping[str, Any]) -> Message:
    """The request message of ``namespace.method`` with ``fields`` set; ``None`` values are left unset."""
    request_type: Type[Message] = METHODS[(namespace, method)][0]
    return request_type(**{key: value for key, value in fields.items() if value is not None})


def action_items(items: Optional[Iterable[ActionItemLike]]) -> Optional[List[pb.ActionItem]]:
    """Normalises action items: a string is an item with that text (the daemon assigns its id)."""
    if items is None:
        return None
    result: List[pb.ActionItem] = []
    for item in items:
        if isinstance(item, str):
            result.append(pb.ActionItem(text=item))
        elif isinstance(item, pb.ActionItem):
            result.append(item)
        else:
            result.append(pb.ActionItem(**dict(item)))
    return result


def day(value: Optional[DayLike]) -> Optional[str]:
    """``"YYYY-MM-DD"`` for a date; strings pass through (the daemon validates them)."""
    if value is None or isinstance(value, str):
        return value
    return value.isoformat()


def mentor_set(
    content: str, character: Union[str, int], todos: Optional[Iterable[ActionItemLike]], fields: Dict[str, Any]
) -> Message:
    return build(
        "mentor",
        "set",
        dict(
            fields,
            content=content,
            character=enum_value(MentorCharacter, character, "mentor character"),
            action_items=action_items(todos),
        ),
    )


def diary_add(
    record_date: DayLike,
    title: str,
    text: str,
    emotion: Union[str, int],
    analysis: Optional[str],
    suggestions: Optional[Iterable[ActionItemLike]],
    fields: Dict[str, Any],
) -> Message:
    return build(
        "diary",
        "add",
        dict(
            fields,
            record_date=day(record_date),
            title=title,
            text=text,
            emotion=enum_value(Emotion, emotion, "emotion"),
            analysis=analysis,
            action_items=action_items(suggestions),
        ),
    )


def diary_list(limit: int, before: Optional[DayLike], fields: Dict[str, Any]) -> Message:
    return build("diary", "list", dict(fields, limit=limit, before=day(before)))
