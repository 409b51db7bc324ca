import mentory_pb2 as _mentory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
EMOTION_NEUTRAL: Emotion
EMOTION_PLEASANT: Emotion
EMOTION_SLIGHTLY_PLEASANT: Emotion
EMOTION_SLIGHTLY_UNPLEASANT: Emotion
EMOTION_UNPLEASANT: Emotion
EMOTION_UNSPECIFIED: Emotion
EMOTION_VERY_PLEASANT: Emotion
EMOTION_VERY_UNPLEASANT: Emotion
MENTOR_CHARACTER_COOL: MentorCharacter
MENTOR_CHARACTER_UNSPECIFIED: MentorCharacter
MENTOR_CHARACTER_WARM: MentorCharacter

class ActionItem(_message.Message):
    __slots__ = ["done", "id", "text"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    done: bool
    id: str
    text: str
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., done: bool = ...) -> None: ...

class DiaryAddRequest(_message.Message):
    __slots__ = ["action_items", "analysis", "created_at_unix_ms", "emotion", "id", "record_date", "text", "title"]
    ACTION_ITEMS_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    EMOTION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_DATE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    action_items: _containers.RepeatedCompositeFieldContainer[ActionItem]
    analysis: str
    created_at_unix_ms: int
    emotion: Emotion
    id: str
    record_date: str
    text: str
    title: str
    def __init__(self, record_date: _Optional[str] = ..., title: _Optional[str] = ..., text: _Optional[str] = ..., emotion: _Optional[_Union[Emotion, str]] = ..., analysis: _Optional[str] = ..., action_items: _Optional[_Iterable[_Union[ActionItem, _Mapping]]] = ..., id: _Optional[str] = ..., created_at_unix_ms: _Optional[int] = ...) -> None: ...

class DiaryChange(_message.Message):
    __slots__ = ["added", "deleted_id", "updated"]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    DELETED_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    added: DiaryEntry
    deleted_id: str
    updated: DiaryEntry
    def __init__(self, added: _Optional[_Union[DiaryEntry, _Mapping]] = ..., updated: _Optional[_Union[DiaryEntry, _Mapping]] = ..., deleted_id: _Optional[str] = ...) -> None: ...

class DiaryDeleteRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DiaryEntry(_message.Message):
    __slots__ = ["action_items", "analysis", "created_at_unix_ms", "emotion", "id", "record_date", "text", "title"]
    ACTION_ITEMS_FIELD_NUMBER: _ClassVar[int]
    ANALYSIS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    EMOTION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_DATE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    action_items: _containers.RepeatedCompositeFieldContainer[ActionItem]
    analysis: str
    created_at_unix_ms: int
    emotion: Emotion
    id: str
    record_date: str
    text: str
    title: str
    def __init__(self, id: _Optional[str] = ..., record_date: _Optional[str] = ..., created_at_unix_ms: _Optional[int] = ..., title: _Optional[str] = ..., text: _Optional[str] = ..., emotion: _Optional[_Union[Emotion, str]] = ..., analysis: _Optional[str] = ..., action_items: _Optional[_Iterable[_Union[ActionItem, _Mapping]]] = ...) -> None: ...

class DiaryGetRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DiaryListReply(_message.Message):
    __slots__ = ["entries", "next_before"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DiaryEntry]
    next_before: str
    def __init__(self, entries: _Optional[_Iterable[_Union[DiaryEntry, _Mapping]]] = ..., next_before: _Optional[str] = ...) -> None: ...

class DiaryListRequest(_message.Message):
    __slots__ = ["before", "limit"]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    before: str
    limit: int
    def __init__(self, limit: _Optional[int] = ..., before: _Optional[str] = ...) -> None: ...

class DiarySnapshot(_message.Message):
    __slots__ = ["entries", "next_before"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DiaryEntry]
    next_before: str
    def __init__(self, entries: _Optional[_Iterable[_Union[DiaryEntry, _Mapping]]] = ..., next_before: _Optional[str] = ...) -> None: ...

class DiarySuggestionDoneRequest(_message.Message):
    __slots__ = ["done", "entry_id", "suggestion_id"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    SUGGESTION_ID_FIELD_NUMBER: _ClassVar[int]
    done: bool
    entry_id: str
    suggestion_id: str
    def __init__(self, entry_id: _Optional[str] = ..., suggestion_id: _Optional[str] = ..., done: bool = ...) -> None: ...

class MentorCompleteTodoRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class MentorMessage(_message.Message):
    __slots__ = ["action_items", "character", "content", "updated_at_unix_ms"]
    ACTION_ITEMS_FIELD_NUMBER: _ClassVar[int]
    CHARACTER_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    action_items: _containers.RepeatedCompositeFieldContainer[ActionItem]
    character: MentorCharacter
    content: str
    updated_at_unix_ms: int
    def __init__(self, content: _Optional[str] = ..., character: _Optional[_Union[MentorCharacter, str]] = ..., action_items: _Optional[_Iterable[_Union[ActionItem, _Mapping]]] = ..., updated_at_unix_ms: _Optional[int] = ...) -> None: ...

class MentorSetRequest(_message.Message):
    __slots__ = ["action_items", "character", "content"]
    ACTION_ITEMS_FIELD_NUMBER: _ClassVar[int]
    CHARACTER_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    action_items: _containers.RepeatedCompositeFieldContainer[ActionItem]
    character: MentorCharacter
    content: str
    def __init__(self, content: _Optional[str] = ..., character: _Optional[_Union[MentorCharacter, str]] = ..., action_items: _Optional[_Iterable[_Union[ActionItem, _Mapping]]] = ...) -> None: ...

class MentorState(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: MentorMessage
    def __init__(self, message: _Optional[_Union[MentorMessage, _Mapping]] = ...) -> None: ...

class PeerState(_message.Message):
    __slots__ = ["is_app_installed", "is_paired", "is_reachable", "peer", "updated_at_unix_ms"]
    IS_APP_INSTALLED_FIELD_NUMBER: _ClassVar[int]
    IS_PAIRED_FIELD_NUMBER: _ClassVar[int]
    IS_REACHABLE_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    is_app_installed: bool
    is_paired: bool
    is_reachable: bool
    peer: str
    updated_at_unix_ms: int
    def __init__(self, peer: _Optional[str] = ..., is_paired: bool = ..., is_app_installed: bool = ..., is_reachable: bool = ..., updated_at_unix_ms: _Optional[int] = ...) -> None: ...

class ReachabilitySnapshot(_message.Message):
    __slots__ = ["peers"]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[PeerState]
    def __init__(self, peers: _Optional[_Iterable[_Union[PeerState, _Mapping]]] = ...) -> None: ...

class MentorCharacter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Emotion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
