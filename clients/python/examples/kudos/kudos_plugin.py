"""The `kudos` plugin: serves namespace `kudos` (kudos.proto) from this process.

    python kudos_plugin.py [--socket PATH] [--max-kudos N]

mentoryd must declare it: ``{"plugins": {"kudos": {}}}`` in its configuration. Then
``kudos.give`` stores praise (the newest ``--max-kudos`` are kept, in memory) and publishes it on
topic ``kudos``; ``kudos.list`` returns what is kept, which is also the topic's snapshot. Runs until
SIGINT or SIGTERM, reconnecting whenever the daemon restarts; exits 77 when the daemon refuses the
registration for good (not declared, not allowed), so a supervisor does not restart it in a loop.
"""

import argparse
import collections
import logging
import sys
from typing import Deque, Optional, Sequence

import mentory
import mentory.plugin
from mentory import ErrorCode, MentoryError
from mentory.journal import configure_logging

import kudos_pb2

#: The longest praise accepted, in characters.
MAX_TEXT_CHARACTERS = 280

EXIT_REFUSED = 77


def build(socket_path: Optional[str], max_kudos: int) -> mentory.plugin.Plugin:
    """The plugin, with its handlers; `max_kudos` bounds what it keeps."""
    plugin = mentory.plugin.Plugin(
        kudos_pb2.DESCRIPTOR.services_by_name["KudosService"], socket_path=socket_path, client_name="kudos-plugin"
    )
    kept: Deque[kudos_pb2.Kudos] = collections.deque(maxlen=max_kudos)
    numbers = iter(range(1, sys.maxsize))

    @plugin.method("give")
    async def give(request: kudos_pb2.KudosGiveRequest, call: mentory.plugin.Call) -> kudos_pb2.Kudos:
        if not request.to.strip():
            raise MentoryError(ErrorCode.INVALID_ARGUMENT, "say who the kudos are for (to)", reason="kudos.no_recipient")
        if not request.text.strip():
            raise MentoryError(ErrorCode.INVALID_ARGUMENT, "say what the kudos are for (text)", reason="kudos.empty_text")
        if len(request.text) > MAX_TEXT_CHARACTERS:
            raise MentoryError(
                ErrorCode.INVALID_ARGUMENT,
                f"the text has {len(request.text)} characters; at most {MAX_TEXT_CHARACTERS} are kept",
                reason="kudos.text_too_long",
            )
        kudos = kudos_pb2.Kudos(
            number=next(numbers), to=request.to, text=request.text, from_client=call.caller.client_name
        )
        kept.append(kudos)
        await plugin.publish("kudos", kudos)
        return kudos

    @plugin.method("list")
    async def list_kudos(request: mentory.pb.Empty, call: mentory.plugin.Call) -> kudos_pb2.KudosList:
        return kudos_pb2.KudosList(kudos=list(kept))

    @plugin.snapshot("kudos")
    async def snapshot() -> kudos_pb2.KudosList:
        return kudos_pb2.KudosList(kudos=list(kept))

    return plugin


def main(arguments: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Serves mentoryd namespace 'kudos'.")
    parser.add_argument("--socket", help="mentoryd's socket (default: $MENTORY_SOCKET, then the standard paths)")
    parser.add_argument("--max-kudos", type=int, default=100, help="how many kudos to keep (default 100)")
    options = parser.parse_args(arguments)
    if options.max_kudos < 1:
        parser.error("--max-kudos must be at least 1")
    # Under systemd each line goes to the journal with its own priority; run by hand, plain lines.
    configure_logging(logging.INFO)
    try:
        build(options.socket, options.max_kudos).run()
    except MentoryError as error:
        logging.error("giving up: %s", error)
        return EXIT_REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
