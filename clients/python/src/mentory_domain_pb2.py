"""``mentory_domain.proto``'s messages under the module name protoc gives them: ``mentory_domain_pb2``.

A plugin's own ``.proto`` file that uses the built-in domain's messages (``mentory.v1.DiaryEntry``, ...)
imports ``mentory_domain.proto`` (``protoc -I "$(python3 -m mentory --proto-path)" ...``), and the Python
code protoc generates for it says ``import mentory_domain_pb2``. This module is that import: it *is*
``mentory._proto.mentory_domain_pb2``, so the generated code works as protoc wrote it and both names
share one set of classes.
"""

import sys

from mentory._proto import mentory_domain_pb2 as _generated
from mentory._proto.mentory_domain_pb2 import *  # noqa: F401,F403 - for type checkers and star imports

sys.modules[__name__] = _generated
