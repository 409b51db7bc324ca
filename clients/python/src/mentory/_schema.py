"""The one table of methods and topics, taken from docs/PROTOCOL.md.

Everything else (typed namespace methods, :meth:`Client.call` with dicts, event decoding) looks
types up here. A method added to the daemon needs one row here; a field added to a message needs
only ``scripts/generate-protos.sh``.
"""

from typing import Dict, Optional, Tuple, Type

from google.protobuf.message import Message
from google.protobuf.wrappers_pb2 import UInt32Value

from ._proto import mentory_pb2 as pb

#: (namespace, method) -> (request message type, reply message type)
METHODS: Dict[Tuple[str, str], Tuple[Type[Message], Type[Message]]] = {
    ("session", "ping"): (pb.Empty, pb.Empty),
    ("session", "status"): (pb.Empty, pb.StatusReply),
    ("session", "subscribe"): (pb.SubscribeRequest, pb.SubscribeReply),
    ("session", "unsubscribe"): (pb.UnsubscribeRequest, pb.Empty),
    ("session", "metrics"): (pb.MetricsRequest, pb.MetricsReply),
    ("mentor", "set"): (pb.MentorSetRequest, pb.MentorState),
    ("mentor", "get"): (pb.Empty, pb.MentorState),
    ("mentor", "completeTodo"): (pb.MentorCompleteTodoRequest, pb.MentorState),
    ("reachability", "report"): (pb.PeerState, pb.PeerState),
    ("reachability", "get"): (pb.Empty, pb.ReachabilitySnapshot),
    ("diary", "add"): (pb.DiaryAddRequest, pb.DiaryEntry),
    ("diary", "get"): (pb.DiaryGetRequest, pb.DiaryEntry),
    ("diary", "list"): (pb.DiaryListRequest, pb.DiaryListReply),
    ("diary", "delete"): (pb.DiaryDeleteRequest, pb.DiaryEntry),
    ("diary", "setSuggestionDone"): (pb.DiarySuggestionDoneRequest, pb.DiaryEntry),
    ("storage", "backup"): (pb.StorageBackupRequest, pb.StorageBackupReply),
    ("storage", "backupRead"): (pb.StorageBackupReadRequest, pb.StorageBackupReadReply),
    ("daemon", "reload"): (pb.DaemonReloadRequest, pb.DaemonReloadReply),
    ("debug", "freezeEngine"): (UInt32Value, pb.Empty),
}

#: topic -> (CHANGE body type, SNAPSHOT/RESET body type)
TOPICS: Dict[str, Tuple[Type[Message], Type[Message]]] = {
    "mentor": (pb.MentorState, pb.MentorState),
    "reachability": (pb.PeerState, pb.ReachabilitySnapshot),
    "diary": (pb.DiaryChange, pb.DiarySnapshot),
}


def method_types(namespace: str, method: str) -> Optional[Tuple[Type[Message], Type[Message]]]:
    """The (request, reply) types of a known method, or ``None``."""
    return METHODS.get((namespace, method))


def event_body_type(topic: str, kind: int) -> Optional[Type[Message]]:
    """The body type of an event of ``kind`` on ``topic``, or ``None`` for a topic not in the table."""
    types = TOPICS.get(topic)
    if types is None:
        return None
    return types[0] if kind == pb.EVENT_KIND_CHANGE else types[1]
