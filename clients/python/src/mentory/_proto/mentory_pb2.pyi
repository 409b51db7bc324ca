from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ERROR_CODE_ALREADY_HANDSHAKEN: ErrorCode
ERROR_CODE_CONFLICT: ErrorCode
ERROR_CODE_DEADLINE_EXCEEDED: ErrorCode
ERROR_CODE_DUPLICATE_REQUEST_ID: ErrorCode
ERROR_CODE_FRAME_TOO_LARGE: ErrorCode
ERROR_CODE_HANDSHAKE_REQUIRED: ErrorCode
ERROR_CODE_HANDSHAKE_TIMEOUT: ErrorCode
ERROR_CODE_INTERNAL: ErrorCode
ERROR_CODE_INVALID_ARGUMENT: ErrorCode
ERROR_CODE_MALFORMED_MESSAGE: ErrorCode
ERROR_CODE_NOT_FOUND: ErrorCode
ERROR_CODE_PERMISSION_DENIED: ErrorCode
ERROR_CODE_SHUTTING_DOWN: ErrorCode
ERROR_CODE_STARTUP_FAILED: ErrorCode
ERROR_CODE_STORAGE_FAILURE: ErrorCode
ERROR_CODE_TOO_MANY_CONNECTIONS: ErrorCode
ERROR_CODE_TOO_MANY_REQUESTS: ErrorCode
ERROR_CODE_TRUNCATED_FRAME: ErrorCode
ERROR_CODE_UNAVAILABLE: ErrorCode
ERROR_CODE_UNKNOWN_METHOD: ErrorCode
ERROR_CODE_UNKNOWN_NAMESPACE: ErrorCode
ERROR_CODE_UNSPECIFIED: ErrorCode
ERROR_CODE_UNSUPPORTED_VERSION: ErrorCode
EVENT_KIND_CHANGE: EventKind
EVENT_KIND_ENDED: EventKind
EVENT_KIND_RESET: EventKind
EVENT_KIND_SNAPSHOT: EventKind
INSTANCE_KIND_SYSTEM: InstanceKind
INSTANCE_KIND_UNSPECIFIED: InstanceKind
INSTANCE_KIND_USER: InstanceKind
METRIC_TYPE_COUNTER: MetricType
METRIC_TYPE_GAUGE: MetricType
METRIC_TYPE_HISTOGRAM: MetricType
METRIC_TYPE_UNSPECIFIED: MetricType
NAMESPACE_FIELD_NUMBER: _ClassVar[int]
NAMESPACE_VERSION_FIELD_NUMBER: _ClassVar[int]
PLUGIN_STATE_CONNECTED: PluginState
PLUGIN_STATE_FAILED: PluginState
PLUGIN_STATE_UNSPECIFIED: PluginState
PLUGIN_STATE_WAITING: PluginState
PRIVILEGE_FIELD_NUMBER: _ClassVar[int]
PRIVILEGE_OWNER: Privilege
PRIVILEGE_ROOT: Privilege
PRIVILEGE_UNSPECIFIED: Privilege
TOPIC_FIELD_NUMBER: _ClassVar[int]
namespace: _descriptor.FieldDescriptor
namespace_version: _descriptor.FieldDescriptor
privilege: _descriptor.FieldDescriptor
topic: _descriptor.FieldDescriptor

class ConnectionError(_message.Message):
    __slots__ = ["closing", "error"]
    CLOSING_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    closing: bool
    error: Error
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ..., closing: bool = ...) -> None: ...

class DaemonInstance(_message.Message):
    __slots__ = ["kind", "uid", "user_name"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    USER_NAME_FIELD_NUMBER: _ClassVar[int]
    kind: InstanceKind
    uid: int
    user_name: str
    def __init__(self, kind: _Optional[_Union[InstanceKind, str]] = ..., uid: _Optional[int] = ..., user_name: _Optional[str] = ...) -> None: ...

class DaemonReloadReply(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DaemonReloadRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DescribeReply(_message.Message):
    __slots__ = ["descriptors", "namespaces"]
    DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    descriptors: _descriptor_pb2.FileDescriptorSet
    namespaces: _containers.RepeatedCompositeFieldContainer[NamespaceDescription]
    def __init__(self, namespaces: _Optional[_Iterable[_Union[NamespaceDescription, _Mapping]]] = ..., descriptors: _Optional[_Union[_descriptor_pb2.FileDescriptorSet, _Mapping]] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ["namespace"]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Envelope(_message.Message):
    __slots__ = ["connection_error", "event", "hello", "plugin_call", "plugin_reply", "request", "response", "welcome"]
    CONNECTION_ERROR_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_CALL_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_REPLY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    connection_error: ConnectionError
    event: Event
    hello: Hello
    plugin_call: PluginCall
    plugin_reply: PluginReply
    request: Request
    response: Response
    welcome: Welcome
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., welcome: _Optional[_Union[Welcome, _Mapping]] = ..., request: _Optional[_Union[Request, _Mapping]] = ..., response: _Optional[_Union[Response, _Mapping]] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., connection_error: _Optional[_Union[ConnectionError, _Mapping]] = ..., plugin_call: _Optional[_Union[PluginCall, _Mapping]] = ..., plugin_reply: _Optional[_Union[PluginReply, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ["code", "message", "reason"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    reason: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ["body", "epoch", "error", "kind", "sequence", "topic"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    epoch: int
    error: Error
    kind: EventKind
    sequence: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., sequence: _Optional[int] = ..., kind: _Optional[_Union[EventKind, str]] = ..., body: _Optional[bytes] = ..., epoch: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class HandlerDescription(_message.Message):
    __slots__ = ["methods", "namespace", "topics"]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    methods: _containers.RepeatedScalarFieldContainer[str]
    namespace: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, namespace: _Optional[str] = ..., methods: _Optional[_Iterable[str]] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["client_name", "protocol_version"]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    protocol_version: int
    def __init__(self, protocol_version: _Optional[int] = ..., client_name: _Optional[str] = ...) -> None: ...

class MethodDescription(_message.Message):
    __slots__ = ["name", "privilege", "reply", "request"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIVILEGE_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    privilege: Privilege
    reply: str
    request: str
    def __init__(self, name: _Optional[str] = ..., request: _Optional[str] = ..., reply: _Optional[str] = ..., privilege: _Optional[_Union[Privilege, str]] = ...) -> None: ...

class MetricFamily(_message.Message):
    __slots__ = ["bucket_bounds", "help", "name", "samples", "type"]
    BUCKET_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    HELP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    bucket_bounds: _containers.RepeatedScalarFieldContainer[float]
    help: str
    name: str
    samples: _containers.RepeatedCompositeFieldContainer[MetricSample]
    type: MetricType
    def __init__(self, name: _Optional[str] = ..., help: _Optional[str] = ..., type: _Optional[_Union[MetricType, str]] = ..., bucket_bounds: _Optional[_Iterable[float]] = ..., samples: _Optional[_Iterable[_Union[MetricSample, _Mapping]]] = ...) -> None: ...

class MetricLabel(_message.Message):
    __slots__ = ["name", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class MetricSample(_message.Message):
    __slots__ = ["bucket_counts", "count", "labels", "sum", "value"]
    BUCKET_COUNTS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    bucket_counts: _containers.RepeatedScalarFieldContainer[int]
    count: int
    labels: _containers.RepeatedCompositeFieldContainer[MetricLabel]
    sum: float
    value: float
    def __init__(self, labels: _Optional[_Iterable[_Union[MetricLabel, _Mapping]]] = ..., value: _Optional[float] = ..., bucket_counts: _Optional[_Iterable[int]] = ..., count: _Optional[int] = ..., sum: _Optional[float] = ...) -> None: ...

class MetricsReply(_message.Message):
    __slots__ = ["families", "truncated"]
    FAMILIES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    families: _containers.RepeatedCompositeFieldContainer[MetricFamily]
    truncated: bool
    def __init__(self, families: _Optional[_Iterable[_Union[MetricFamily, _Mapping]]] = ..., truncated: bool = ...) -> None: ...

class MetricsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class MonitorCall(_message.Message):
    __slots__ = ["chain", "client_name", "code", "connection", "latency_us", "method", "namespace", "pid", "reply_bytes", "request_bytes", "request_id", "topic", "uid"]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    LATENCY_US_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    REPLY_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    chain: str
    client_name: str
    code: int
    connection: int
    latency_us: int
    method: str
    namespace: str
    pid: int
    reply_bytes: int
    request_bytes: int
    request_id: int
    topic: str
    uid: int
    def __init__(self, connection: _Optional[int] = ..., client_name: _Optional[str] = ..., uid: _Optional[int] = ..., pid: _Optional[int] = ..., namespace: _Optional[str] = ..., method: _Optional[str] = ..., request_id: _Optional[int] = ..., code: _Optional[int] = ..., latency_us: _Optional[int] = ..., request_bytes: _Optional[int] = ..., reply_bytes: _Optional[int] = ..., chain: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class MonitorEvent(_message.Message):
    __slots__ = ["bytes", "sequence", "topic"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    sequence: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., sequence: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class MonitorRecord(_message.Message):
    __slots__ = ["call", "event", "missed", "unix_ms"]
    CALL_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    call: MonitorCall
    event: MonitorEvent
    missed: int
    unix_ms: int
    def __init__(self, unix_ms: _Optional[int] = ..., call: _Optional[_Union[MonitorCall, _Mapping]] = ..., event: _Optional[_Union[MonitorEvent, _Mapping]] = ..., missed: _Optional[int] = ...) -> None: ...

class MonitorReply(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class MonitorRequest(_message.Message):
    __slots__ = ["namespaces", "topics"]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, namespaces: _Optional[_Iterable[str]] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class NamespaceDescription(_message.Message):
    __slots__ = ["methods", "namespace", "topics", "version"]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    methods: _containers.RepeatedCompositeFieldContainer[MethodDescription]
    namespace: str
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    version: int
    def __init__(self, namespace: _Optional[str] = ..., version: _Optional[int] = ..., methods: _Optional[_Iterable[_Union[MethodDescription, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ...) -> None: ...

class PluginCall(_message.Message):
    __slots__ = ["body", "call_id", "caller", "method", "namespace", "snapshot_topic", "timeout_ms"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_TOPIC_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    call_id: int
    caller: PluginCaller
    method: str
    namespace: str
    snapshot_topic: str
    timeout_ms: int
    def __init__(self, call_id: _Optional[int] = ..., namespace: _Optional[str] = ..., method: _Optional[str] = ..., body: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., caller: _Optional[_Union[PluginCaller, _Mapping]] = ..., snapshot_topic: _Optional[str] = ...) -> None: ...

class PluginCallReply(_message.Message):
    __slots__ = ["body"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    def __init__(self, body: _Optional[bytes] = ...) -> None: ...

class PluginCallRequest(_message.Message):
    __slots__ = ["body", "call_id", "method", "namespace"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    call_id: int
    method: str
    namespace: str
    def __init__(self, call_id: _Optional[int] = ..., namespace: _Optional[str] = ..., method: _Optional[str] = ..., body: _Optional[bytes] = ...) -> None: ...

class PluginCaller(_message.Message):
    __slots__ = ["client_name", "connection", "gid", "known", "pid", "uid"]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    connection: int
    gid: int
    known: bool
    pid: int
    uid: int
    def __init__(self, known: bool = ..., pid: _Optional[int] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., client_name: _Optional[str] = ..., connection: _Optional[int] = ...) -> None: ...

class PluginPublishRequest(_message.Message):
    __slots__ = ["body", "topic"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    topic: str
    def __init__(self, topic: _Optional[str] = ..., body: _Optional[bytes] = ...) -> None: ...

class PluginRegisterReply(_message.Message):
    __slots__ = ["call_timeout_ms", "epoch", "plugin"]
    CALL_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_FIELD_NUMBER: _ClassVar[int]
    call_timeout_ms: int
    epoch: int
    plugin: str
    def __init__(self, plugin: _Optional[str] = ..., epoch: _Optional[int] = ..., call_timeout_ms: _Optional[int] = ...) -> None: ...

class PluginRegisterRequest(_message.Message):
    __slots__ = ["descriptors", "methods", "namespace", "plugin_protocol_version", "topics", "version"]
    DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    descriptors: _descriptor_pb2.FileDescriptorSet
    methods: _containers.RepeatedCompositeFieldContainer[MethodDescription]
    namespace: str
    plugin_protocol_version: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    version: int
    def __init__(self, plugin_protocol_version: _Optional[int] = ..., namespace: _Optional[str] = ..., version: _Optional[int] = ..., methods: _Optional[_Iterable[_Union[MethodDescription, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ..., descriptors: _Optional[_Union[_descriptor_pb2.FileDescriptorSet, _Mapping]] = ...) -> None: ...

class PluginReply(_message.Message):
    __slots__ = ["body", "call_id", "error"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    call_id: int
    error: Error
    def __init__(self, call_id: _Optional[int] = ..., body: _Optional[bytes] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class PluginStatus(_message.Message):
    __slots__ = ["calls_in_flight", "name", "namespace", "reason", "since_unix_ms", "state"]
    CALLS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SINCE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    calls_in_flight: int
    name: str
    namespace: str
    reason: str
    since_unix_ms: int
    state: PluginState
    def __init__(self, name: _Optional[str] = ..., namespace: _Optional[str] = ..., state: _Optional[_Union[PluginState, str]] = ..., since_unix_ms: _Optional[int] = ..., calls_in_flight: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Request(_message.Message):
    __slots__ = ["body", "id", "method", "namespace", "timeout_ms"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    id: int
    method: str
    namespace: str
    timeout_ms: int
    def __init__(self, id: _Optional[int] = ..., namespace: _Optional[str] = ..., method: _Optional[str] = ..., body: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class Response(_message.Message):
    __slots__ = ["body", "error", "id"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    error: Error
    id: int
    def __init__(self, id: _Optional[int] = ..., body: _Optional[bytes] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ["connections", "epoch", "handlers", "instance", "plugins", "server_version", "subscribers", "topics", "uptime_seconds"]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HANDLERS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    PLUGINS_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    connections: int
    epoch: int
    handlers: _containers.RepeatedCompositeFieldContainer[HandlerDescription]
    instance: DaemonInstance
    plugins: _containers.RepeatedCompositeFieldContainer[PluginStatus]
    server_version: str
    subscribers: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicPosition]
    uptime_seconds: float
    def __init__(self, server_version: _Optional[str] = ..., uptime_seconds: _Optional[float] = ..., connections: _Optional[int] = ..., handlers: _Optional[_Iterable[_Union[HandlerDescription, _Mapping]]] = ..., subscribers: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicPosition, _Mapping]]] = ..., epoch: _Optional[int] = ..., plugins: _Optional[_Iterable[_Union[PluginStatus, _Mapping]]] = ..., instance: _Optional[_Union[DaemonInstance, _Mapping]] = ...) -> None: ...

class StorageBackupReadReply(_message.Message):
    __slots__ = ["data", "end"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    end: bool
    def __init__(self, data: _Optional[bytes] = ..., end: bool = ...) -> None: ...

class StorageBackupReadRequest(_message.Message):
    __slots__ = ["offset"]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    offset: int
    def __init__(self, offset: _Optional[int] = ...) -> None: ...

class StorageBackupReply(_message.Message):
    __slots__ = ["bytes", "chunk_bytes", "diary_entries"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    DIARY_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    chunk_bytes: int
    diary_entries: int
    def __init__(self, bytes: _Optional[int] = ..., diary_entries: _Optional[int] = ..., chunk_bytes: _Optional[int] = ...) -> None: ...

class StorageBackupRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SubscribeReply(_message.Message):
    __slots__ = ["epoch", "topics"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicPosition]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicPosition, _Mapping]]] = ..., epoch: _Optional[int] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ["topics"]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicSubscription]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicSubscription, _Mapping]]] = ...) -> None: ...

class TopicDeclaration(_message.Message):
    __slots__ = ["change", "name", "reads", "snapshot"]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    change: str
    name: str
    reads: _containers.RepeatedScalarFieldContainer[str]
    snapshot: str
    def __init__(self, name: _Optional[str] = ..., change: _Optional[str] = ..., snapshot: _Optional[str] = ..., reads: _Optional[_Iterable[str]] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ["change", "name", "reads", "snapshot"]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    change: str
    name: str
    reads: _containers.RepeatedScalarFieldContainer[str]
    snapshot: str
    def __init__(self, name: _Optional[str] = ..., change: _Optional[str] = ..., snapshot: _Optional[str] = ..., reads: _Optional[_Iterable[str]] = ...) -> None: ...

class TopicPosition(_message.Message):
    __slots__ = ["sequence", "topic"]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...

class TopicSubscription(_message.Message):
    __slots__ = ["epoch", "resume_after", "topic"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    resume_after: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., resume_after: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class UnsubscribeRequest(_message.Message):
    __slots__ = ["topics"]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ["epoch", "handlers", "max_frame_length", "protocol_version", "server_version"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HANDLERS_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_LENGTH_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    handlers: _containers.RepeatedCompositeFieldContainer[HandlerDescription]
    max_frame_length: int
    protocol_version: int
    server_version: str
    def __init__(self, protocol_version: _Optional[int] = ..., server_version: _Optional[str] = ..., handlers: _Optional[_Iterable[_Union[HandlerDescription, _Mapping]]] = ..., max_frame_length: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class Privilege(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class InstanceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MetricType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PluginState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
