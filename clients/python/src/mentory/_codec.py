"""Turning what a caller passes to ``call`` into request bytes, and reply bytes into messages."""

from typing import Any, Mapping, Optional, Type, Union

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from ._enums import EventKind
from ._proto import mentory_pb2 as pb
from ._schema import event_body_type, method_types
from .errors import ProtocolError
from .events import Event

#: What ``call`` accepts as a request: a message, a dict (JSON field names or proto names), raw bytes, or nothing.
RequestLike = Union[Message, Mapping[str, Any], bytes, None]


def encode_request(
    namespace: str, method: str, request: RequestLike, request_type: Optional[Type[Message]] = None
) -> bytes:
    """The request body for ``namespace.method``. Raises ``TypeError`` for a message of the wrong type
    and for a dict when the request type is unknown (pass ``request_type``)."""
    types = method_types(namespace, method)
    expected = request_type or (types[0] if types else None)
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
            raise TypeError(f"{namespace}.{method} is not in mentory's method table: pass request_type= for a dict")
        try:
            return json_format.ParseDict(dict(request), expected()).SerializeToString()
        except json_format.ParseError as error:
            raise ValueError(f"invalid {expected.DESCRIPTOR.full_name} for {namespace}.{method}: {error}") from None
    raise TypeError(f"cannot send a {type(request).__name__} as a request body")


def decode_reply(
    namespace: str, method: str, body: bytes, reply_type: Optional[Type[Message]] = None
) -> Union[Message, bytes]:
    """The reply as its registered (or the given) message type; raw bytes for an unknown method."""
    types = method_types(namespace, method)
    message_type = reply_type or (types[1] if types else None)
    if message_type is None:
        return body
    return parse(message_type, body, f"the reply of {namespace}.{method}")


def parse(message_type: Type[Message], body: bytes, what: str) -> Message:
    message = message_type()
    try:
        message.ParseFromString(body)
    except DecodeError as error:
        raise ProtocolError(f"{what} is not a valid {message_type.DESCRIPTOR.full_name}: {error}") from None
    return message


def decode_event(event: pb.Event) -> Event:
    """An :class:`Event` with its body decoded by the topic's message type (raw bytes for unknown topics)."""
    body_type = event_body_type(event.topic, event.kind)
    body: Union[Message, bytes] = event.body
    if body_type is not None:
        body = parse(body_type, event.body, f"the body of a {event.topic} event")
    try:
        kind = EventKind(event.kind)
    except ValueError:
        kind = event.kind
    return Event(topic=event.topic, kind=kind, sequence=event.sequence, epoch=event.epoch, body=body)
