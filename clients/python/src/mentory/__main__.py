"""``python3 -m mentory --proto-path`` prints the folder holding ``mentory.proto`` and
``mentory_domain.proto``, for ``protoc -I``.

A plugin's schema imports ``mentory.proto`` (for the ``(mentory.v1.namespace)``, ``namespace_version``
and ``topic`` options), and ``mentory_domain.proto`` if it uses the built-in domain's messages
(``mentory.v1.DiaryEntry``, ...); the package ships both::

    protoc -I "$(python3 -m mentory --proto-path)" -I . --python_out=. habits.proto
"""

import argparse
import sys
from typing import Optional, Sequence

from . import PROTO_PATH


def main(arguments: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m mentory", description="The mentory package's helpers.")
    parser.add_argument(
        "--proto-path", action="store_true", help="print the folder holding mentory.proto and mentory_domain.proto (for protoc -I)"
    )
    options = parser.parse_args(arguments)
    if not options.proto_path:
        parser.print_help()
        return 2
    print(PROTO_PATH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
