"""The official Python client for mentoryd.

Synchronous::

    import mentory

    with mentory.connect() as client:
        client.ping()
        client.mentor.set("Ship it.", character="cool", todos=["write tests"])
        for event in client.subscribe(["mentor"]):
            print(event.kind.name, event.body)

asyncio: :func:`mentory.aio.connect` with the same methods, awaited.

Serving a namespace of your own from this process (an out-of-process plugin): :mod:`mentory.plugin`.

The generated protobuf messages are available as :mod:`mentory.pb` (``mentory.pb.DiaryEntry``, …): the
protocol's, from ``mentory.proto``, and the built-in domain's, from ``mentory_domain.proto``. Both files
ship in the package, in :data:`PROTO_PATH` (``python3 -m mentory --proto-path``), for plugins' schemas
to import.
"""

import os as _os

from . import aio, discovery, journal, plugin
from ._connection import DEFAULT_MAX_INCOMING_FRAME, PROTOCOL_VERSION
from ._enums import Emotion, ErrorCode, EventKind, MentorCharacter
from . import _messages as pb
from ._schema import METHODS, TOPICS
from .client import Client, Subscription, connect
from .errors import ConnectionClosed, MentoryError, ProtocolError, SocketTrustError, Timeout
from .events import Backoff, Event, Position

__version__ = "0.1.0"

#: The folder holding ``mentory.proto`` and ``mentory_domain.proto`` (the package's copies of the daemon's
#: schema), for ``protoc -I``.
PROTO_PATH = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_proto")

__all__ = [
    "aio",
    "discovery",
    "journal",
    "plugin",
    "pb",
    "connect",
    "Client",
    "Subscription",
    "Event",
    "Position",
    "Backoff",
    "ErrorCode",
    "EventKind",
    "Emotion",
    "MentorCharacter",
    "METHODS",
    "TOPICS",
    "MentoryError",
    "ConnectionClosed",
    "ProtocolError",
    "Timeout",
    "SocketTrustError",
    "PROTOCOL_VERSION",
    "DEFAULT_MAX_INCOMING_FRAME",
    "PROTO_PATH",
]
