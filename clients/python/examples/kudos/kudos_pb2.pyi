import mentory_pb2 as _mentory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Kudos(_message.Message):
    __slots__ = ["from_client", "number", "text", "to"]
    FROM_CLIENT_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    from_client: str
    number: int
    text: str
    to: str
    def __init__(self, number: _Optional[int] = ..., to: _Optional[str] = ..., text: _Optional[str] = ..., from_client: _Optional[str] = ...) -> None: ...

class KudosGiveRequest(_message.Message):
    __slots__ = ["text", "to"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    text: str
    to: str
    def __init__(self, to: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class KudosList(_message.Message):
    __slots__ = ["kudos"]
    KUDOS_FIELD_NUMBER: _ClassVar[int]
    kudos: _containers.RepeatedCompositeFieldContainer[Kudos]
    def __init__(self, kudos: _Optional[_Iterable[_Union[Kudos, _Mapping]]] = ...) -> None: ...
