"""Every generated message and enum of the daemon's schema in one module, :mod:`mentory.pb`.

The protocol's (``mentory_pb2``, from ``mentory.proto``: ``pb.Envelope``, ``pb.Empty``, ``pb.ErrorCode``, ...)
and the built-in domain's (``mentory_domain_pb2``, from ``mentory_domain.proto``, which imports
``mentory.proto``: ``pb.DiaryEntry``, ``pb.MentorState``, ``pb.Emotion``, ...), under one name as before
the domain had a file of its own. ``pb.DESCRIPTOR`` is ``mentory.proto``'s file descriptor and
``pb.DOMAIN_DESCRIPTOR`` ``mentory_domain.proto``'s.
"""

from ._proto import mentory_domain_pb2 as _domain
from ._proto import mentory_pb2 as _protocol
from ._proto.mentory_domain_pb2 import *  # noqa: F401,F403
from ._proto.mentory_pb2 import *  # noqa: F401,F403

#: ``mentory.proto``'s file descriptor: the protocol's messages, its namespaces and the schema options.
DESCRIPTOR = _protocol.DESCRIPTOR
#: ``mentory_domain.proto``'s file descriptor: the built-in domain's messages and namespaces.
DOMAIN_DESCRIPTOR = _domain.DESCRIPTOR
