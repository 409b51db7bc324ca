"""Python enums mirroring the schema's enums.

They are built from the generated module at import time, so a regenerated schema with new
values needs no change here (for type checkers they are ``Any``: their members are only known
at run time). A member's name is the proto name without its prefix
(``ERROR_CODE_NOT_FOUND`` becomes ``ErrorCode.NOT_FOUND``).
"""

from enum import IntEnum
from typing import Any, Union, cast

from . import _messages as pb


def _mirror(name: str, enum_type: Any, prefix: str) -> Any:
    members = [(key[len(prefix):] if key.startswith(prefix) else key, value) for key, value in enum_type.items()]
    return IntEnum(name, members, module=__name__)


#: Stable wire error codes (``mentory.v1.ErrorCode``); ``int(code)`` is the number on the wire.
ErrorCode: Any = _mirror("ErrorCode", pb.ErrorCode, "ERROR_CODE_")
ErrorCode.__doc__ = "Stable wire error codes (mentory.v1.ErrorCode)."

#: What an event carries (``mentory.v1.EventKind``): ``CHANGE``, ``SNAPSHOT``, ``RESET`` or ``ENDED``.
EventKind: Any = _mirror("EventKind", pb.EventKind, "EVENT_KIND_")
EventKind.__doc__ = "The kind of an event (mentory.v1.EventKind)."

#: The mentor's voice (``mentory.v1.MentorCharacter``): ``COOL`` or ``WARM``.
MentorCharacter: Any = _mirror("MentorCharacter", pb.MentorCharacter, "MENTOR_CHARACTER_")
MentorCharacter.__doc__ = "The mentor's character (mentory.v1.MentorCharacter)."

#: A diary entry's emotion (``mentory.v1.Emotion``), ``VERY_UNPLEASANT`` 1 … ``VERY_PLEASANT`` 7.
Emotion: Any = _mirror("Emotion", pb.Emotion, "EMOTION_")
Emotion.__doc__ = "A diary entry's emotion (mentory.v1.Emotion)."


def code_of(value: int) -> Union[IntEnum, int]:
    """The :data:`ErrorCode` member for ``value``, or ``value`` itself when this schema does not know it."""
    try:
        return cast(IntEnum, ErrorCode(value))
    except ValueError:
        return value


def enum_value(enum: Any, value: Union[str, int], what: str) -> int:
    """Accepts an enum member, its number, or its name in any case (``"warm"``, ``"VERY_PLEASANT"``)."""
    if isinstance(value, str):
        key = value.strip().upper().replace("-", "_").replace(" ", "_")
        try:
            return int(enum[key])
        except KeyError:
            names = ", ".join(m.name.lower() for m in enum if m.value != 0)
            raise ValueError(f"{value!r} is not a valid {what}; use one of {names}") from None
    return int(value)
