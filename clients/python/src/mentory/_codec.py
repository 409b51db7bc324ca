"""Turning what a caller passes to ``call`` into request bytes, and reply bytes into messages."""

from typing import Any, Mapping, Optional, Tuple, Type, Union

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from ._enums import EventKind
from . import _messages as pb
from .errors import MentoryError, ProtocolError
from .events import Event

#: What ``call`` accepts as a request: a message, a dict (JSON field names or proto names), raw bytes, or nothing.
RequestLike = Union[Message, Mapping[str, Any], bytes, None]


def encode_request(namespace: str, method: str, request: RequestLike, expected: Optional[Type[Message]]) -> bytes:
    """The request body for ``namespace.method``, whose request type is ``expected`` (``None``: unknown).
    Raises ``TypeError`` for a message of the wrong type and for a dict when the request type is unknown."""
    if request is None:
        return b""
    if isinstance(request, (bytes, bytearray, memoryview)):
        return bytes(request)
    if isinstance(request, Message):
        if expected is not None and request.DESCRIPTOR.full_name != expected.DESCRIPTOR.full_name:
            raise TypeError(
                f"{namespace}.{method} takes a {expected.DESCRIPTOR.full_name}, not a {request.DESCRIPTOR.full_name}"
            )
        return request.SerializeToString()
    if isinstance(request, Mapping):
        if expected is None:
            raise TypeError(
                f"{namespace}.{method} is neither in mentory's method table nor in the daemon's session.describe: "
                "pass request_type= for a dict"
            )
        try:
            return json_format.ParseDict(dict(request), expected()).SerializeToString()
        except json_format.ParseError as error:
            raise ValueError(f"invalid {expected.DESCRIPTOR.full_name} for {namespace}.{method}: {error}") from None
    raise TypeError(f"cannot send a {type(request).__name__} as a request body")


def decode_reply(namespace: str, method: str, body: bytes, message_type: Optional[type]) -> Union[Message, bytes]:
    """The reply decoded as ``message_type``; the raw bytes when that is ``None`` (unknown) or ``bytes``."""
    if message_type is None or message_type is bytes:
        return body
    return parse(message_type, body, f"the reply of {namespace}.{method}")


def parse(message_type: Type[Message], body: bytes, what: str) -> Message:
    message = message_type()
    try:
        message.ParseFromString(body)
    except DecodeError as error:
        raise ProtocolError(f"{what} is not a valid {message_type.DESCRIPTOR.full_name}: {error}") from None
    return message


def decode_event(event: pb.Event, types: Optional[Tuple[Type[Message], Type[Message]]]) -> Event:
    """An :class:`Event` with its body decoded by the topic's (change, snapshot) ``types``; raw bytes
    when they are ``None`` (a topic neither mentory.proto nor the daemon's session.describe knows)."""
    try:
        kind = EventKind(event.kind)
    except ValueError:
        kind = event.kind
    if event.kind == pb.EVENT_KIND_ENDED:
        # The daemon ended the subscription; the event carries why, and no body.
        error = MentoryError(event.error.code, event.error.message, event.error.reason)
        return Event(topic=event.topic, kind=kind, sequence=event.sequence, epoch=event.epoch, body=b"", error=error)
    body_type = None if types is None else types[0] if event.kind == pb.EVENT_KIND_CHANGE else types[1]
    body: Union[Message, bytes] = event.body
    if body_type is not None:
        body = parse(body_type, event.body, f"the body of a {event.topic} event")
    return Event(topic=event.topic, kind=kind, sequence=event.sequence, epoch=event.epoch, body=body)
