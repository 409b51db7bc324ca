"""``mentory.proto``'s messages under the module name protoc gives them: ``mentory_pb2``.

A plugin's own ``.proto`` file imports ``mentory.proto`` for mentory's options
(``protoc -I "$(python3 -m mentory --proto-path)" ...``), and the Python code protoc generates for it
says ``import mentory_pb2``. This module is that import: it *is* :mod:`mentory.pb`
(``mentory._proto.mentory_pb2``), so the generated code works as protoc wrote it and both names
share one set of classes.
"""

import sys

from mentory._proto import mentory_pb2 as _generated
from mentory._proto.mentory_pb2 import *  # noqa: F401,F403 - for type checkers and star imports

sys.modules[__name__] = _generated
