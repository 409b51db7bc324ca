"""Message classes for namespaces this package has no generated code for, built from ``session.describe``.

``session.describe`` lists every namespace the daemon serves (plugins' included) with the full names
of its methods' and topics' messages, and a ``FileDescriptorSet`` holding them and everything they
import. :class:`DescribedSchema` adds those files to a private ``DescriptorPool`` and makes a message
class for each name with protobuf's message factory, so a client can encode a dict into a plugin's
request type and decode its replies and events without any generated code.

Where this process already has generated code for a message (its file, by the same name, is in
protobuf's default pool: ``mentory.proto``, the well-known types, or a plugin's ``*_pb2`` module the
caller imported), that generated class is used instead, so ``mentory.pb.Empty`` stays
``mentory.pb.Empty`` and an imported ``kudos_pb2.Kudos`` comes back as itself.
"""

import logging
from typing import Dict, Optional, Set, Tuple, Type

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from . import _messages as pb

logger = logging.getLogger("mentory")

Types = Tuple[Type[Message], Type[Message]]


def message_class(descriptor: Descriptor) -> Type[Message]:
    """The class of a message descriptor from any pool (the generated one for the default pool's)."""
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf before 4.22
        from google.protobuf import message_factory, symbol_database

        if descriptor.file.pool is descriptor_pool.Default():
            return symbol_database.Default().GetSymbol(descriptor.full_name)  # type: ignore[no-any-return]
        return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)  # type: ignore[no-any-return]
    return GetMessageClass(descriptor)  # type: ignore[no-any-return]


class DescribedSchema:
    """What one ``session.describe`` reply says, with message classes for every method and topic.

    A file the reply's descriptors cannot build (or a message they lack) leaves out only the
    methods and topics that need it; nothing here raises for a daemon's odd answer.
    """

    def __init__(self, reply: Optional[pb.DescribeReply] = None) -> None:
        reply = reply or pb.DescribeReply()
        self.reply = reply
        #: (namespace, method) -> (request type, reply type)
        self.methods: Dict[Tuple[str, str], Types] = {}
        #: topic -> (CHANGE body type, SNAPSHOT and RESET body type)
        self.topics: Dict[str, Types] = {}
        #: namespace -> its version (0: a declared plugin that is not connected, so nothing is known)
        self.namespaces: Dict[str, int] = {}
        self._pool = descriptor_pool.DescriptorPool()
        self._files = {file.name: file for file in reply.descriptors.file}
        self._added: Set[str] = set()
        self._broken: Set[str] = set()
        for name in self._files:
            self._add_file(name, ())
        for namespace in reply.namespaces:
            self.namespaces[namespace.namespace] = namespace.version
            for method in namespace.methods:
                types = self._pair(method.request, method.reply, f"{namespace.namespace}.{method.name}")
                if types is not None:
                    self.methods[(namespace.namespace, method.name)] = types
            for topic in namespace.topics:
                types = self._pair(topic.change, topic.snapshot, f"topic {topic.name}")
                if types is not None:
                    self.topics[topic.name] = types

    def message_type(self, full_name: str) -> Type[Message]:
        """The class of a message the daemon described (``KeyError`` if it described none by that name)."""
        descriptor = self._pool.FindMessageTypeByName(full_name)
        try:
            generated = descriptor_pool.Default().FindMessageTypeByName(full_name)
        except KeyError:
            generated = None
        if generated is not None and generated.file.name == descriptor.file.name:
            return message_class(generated)
        return message_class(descriptor)

    def _pair(self, first: str, second: str, what: str) -> Optional[Types]:
        try:
            return self.message_type(first), self.message_type(second)
        except (KeyError, TypeError) as error:
            logger.warning("session.describe: cannot build the messages of %s: %s", what, error)
            return None

    def _add_file(self, name: str, chain: Tuple[str, ...]) -> bool:
        if name in self._added:
            return True
        if name in self._broken or name in chain:
            return False
        proto = self._files.get(name)
        if proto is None:
            # Not in the reply: a file protobuf itself ships (e.g. google/protobuf/descriptor.proto).
            try:
                known = descriptor_pool.Default().FindFileByName(name)
            except KeyError:
                logger.warning("session.describe: the descriptors lack %s", name)
                self._broken.add(name)
                return False
            proto = descriptor_pb2.FileDescriptorProto.FromString(known.serialized_pb)
        if not all(self._add_file(dependency, chain + (name,)) for dependency in proto.dependency):
            self._broken.add(name)
            return False
        try:
            self._pool.AddSerializedFile(proto.SerializeToString())
        except (TypeError, ValueError) as error:
            logger.warning("session.describe: cannot use the descriptors of %s: %s", name, error)
            self._broken.add(name)
            return False
        self._added.add(name)
        return True
