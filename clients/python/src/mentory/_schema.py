"""The methods and topics of every namespace, read from the schema itself.

Each namespace is a ``service`` in ``mentory.proto`` or ``mentory_domain.proto`` (its rpcs are the
methods, its ``(topic)`` options the topics); the tables below are built from those declarations in
the generated ``mentory_pb2`` and ``mentory_domain_pb2`` modules when this module is imported, so
nothing here names a method. Everything else
(typed namespace methods, :meth:`Client.call` with dicts, event decoding) looks types up here. A
method or topic added to either file needs only ``scripts/generate-protos.sh``.
"""

from typing import Dict, Optional, Tuple, Type

from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from ._described import message_class
from . import _messages as pb


def _message_class(descriptor: Descriptor) -> Type[Message]:
    """The class of a message descriptor: the generated one for the default pool's, else a class
    built for it (a plugin's schema may live in a pool of its own)."""
    return message_class(descriptor)


def _load() -> Tuple[
    Dict[Tuple[str, str], Tuple[Type[Message], Type[Message]]],
    Dict[str, Tuple[Type[Message], Type[Message]]],
    Dict[str, int],
]:
    methods: Dict[Tuple[str, str], Tuple[Type[Message], Type[Message]]] = {}
    topics: Dict[str, Tuple[Type[Message], Type[Message]]] = {}
    versions: Dict[str, int] = {}
    pool = pb.DESCRIPTOR.pool
    services = list(pb.DESCRIPTOR.services_by_name.values()) + list(pb.DOMAIN_DESCRIPTOR.services_by_name.values())
    for service in services:
        options = service.GetOptions()
        namespace = options.Extensions[pb.namespace]
        if not namespace:
            raise ImportError(f"{service.file.name}: service {service.name} has no (mentory.v1.namespace) option")
        versions[namespace] = options.Extensions[pb.namespace_version]
        for method in service.methods:
            methods[(namespace, method.name)] = (
                _message_class(method.input_type),
                _message_class(method.output_type),
            )
        for topic in options.Extensions[pb.topic]:
            topics[topic.name] = (
                _message_class(pool.FindMessageTypeByName(topic.change)),
                _message_class(pool.FindMessageTypeByName(topic.snapshot)),
            )
    return methods, topics, versions


_methods, _topics, _versions = _load()

#: (namespace, method) -> (request message type, reply message type), in declaration order
METHODS: Dict[Tuple[str, str], Tuple[Type[Message], Type[Message]]] = _methods

#: topic -> (CHANGE body type, SNAPSHOT/RESET body type)
TOPICS: Dict[str, Tuple[Type[Message], Type[Message]]] = _topics

#: namespace -> the version of its interface
NAMESPACE_VERSIONS: Dict[str, int] = _versions


def method_types(namespace: str, method: str) -> Optional[Tuple[Type[Message], Type[Message]]]:
    """The (request, reply) types of a known method, or ``None``."""
    return METHODS.get((namespace, method))


def event_body_type(topic: str, kind: int) -> Optional[Type[Message]]:
    """The body type of an event of ``kind`` on ``topic``, or ``None`` for a topic not in the table."""
    types = TOPICS.get(topic)
    if types is None:
        return None
    return types[0] if kind == pb.EVENT_KIND_CHANGE else types[1]
