"""mentory.testing's built-in namespaces answer as the real daemon does.

The same calls, in the same order, go to a real mentoryd and to the in-memory host: each must succeed
on both or fail on both with the same code, message and reason (ids, which each side draws at random,
are compared as ``<id>``). This is the one test of mentory.testing that needs a daemon.
"""

import re
from typing import Any, Callable, List, Optional, Tuple

import mentory
from mentory import MentoryError
from mentory.testing import PluginHost

from test_testing import moods_plugin

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
DAY = "2026-11-20"


def entry(**fields: Any) -> dict:
    request = {"recordDate": DAY, "title": "walk", "text": "by the river", "emotion": "EMOTION_PLEASANT"}
    request.update(fields)
    return request


#: (method, request); a callable request is given the replies so far (for ids the calls make).
CALLS: List[Tuple[str, Any]] = [
    ("diary.add", entry()),
    ("diary.add", entry()),  # one entry per day
    ("diary.add", entry(recordDate="2026-11-21", emotion=0)),
    ("diary.add", entry(recordDate="2026-11-21", emotion=8)),
    ("diary.add", entry(recordDate="2026-02-30")),
    ("diary.add", entry(recordDate="20261121")),
    ("diary.add", entry(recordDate="")),
    ("diary.add", entry(recordDate="2026-11-21", title=" \t")),
    ("diary.add", entry(recordDate="2026-11-21", title="é" * 129)),
    ("diary.add", entry(recordDate="2026-11-21", text="")),
    ("diary.add", entry(recordDate="2026-11-21", text="x" * 65_537)),
    ("diary.add", entry(recordDate="2026-11-21", analysis="x" * 16_385)),
    ("diary.add", entry(recordDate="2026-11-21", id="nope")),
    ("diary.add", entry(recordDate="2026-11-21", id="x" * 65)),
    ("diary.add", entry(recordDate="2026-11-21", actionItems=[{"text": "a"}] * 33)),
    ("diary.add", entry(recordDate="2026-11-21", actionItems=[{"text": "a"}, {"text": "  "}])),
    ("diary.add", entry(recordDate="2026-11-21", actionItems=[{"text": "x" * 513}])),
    ("diary.add", entry(recordDate="2026-11-21", actionItems=[{"text": "a", "id": "y" * 65}])),
    ("diary.add", entry(recordDate="2026-11-21", actionItems=[{"text": "a", "id": "k"}, {"text": "b", "id": "k"}])),
    ("diary.add", entry(recordDate="2026-11-22", actionItems=[{"text": "stretch", "id": "s1"}])),
    ("diary.get", {"id": "gone"}),
    ("diary.get", {"id": "z" * 65}),
    ("diary.get", {"id": "ü" * 40}),
    ("diary.list", {"limit": 1001}),
    ("diary.list", {"before": "soon"}),
    ("diary.list", {"limit": 1, "before": "2026-11-22"}),
    ("diary.delete", {"id": "gone"}),
    ("diary.setSuggestionDone", {"entryId": "gone", "suggestionId": "s1", "done": True}),
    ("diary.setSuggestionDone", lambda replies: {"entryId": replies[19].id, "suggestionId": "s2", "done": True}),
    ("diary.setSuggestionDone", lambda replies: {"entryId": replies[19].id, "suggestionId": "s1", "done": True}),
    ("diary.delete", lambda replies: {"id": replies[0].id}),
    ("diary.nothing", None),
    ("mentor.set", {"content": " ", "character": "MENTOR_CHARACTER_COOL"}),
    ("mentor.set", {"content": "hi"}),
    ("mentor.set", {"content": "hi", "character": 3}),
    ("mentor.set", {"content": "x" * 16_385, "character": 1}),
    ("mentor.set", {"content": "hi", "character": 1, "actionItems": [{"text": ""}]}),
    ("mentor.completeTodo", {"id": "x"}),
    ("mentor.set", {"content": "hi", "character": 2, "actionItems": [{"text": "rest", "id": "r"}]}),
    ("mentor.completeTodo", {"id": "r"}),
    ("reachability.report", {"peer": ""}),
    ("reachability.report", {"peer": "my phone"}),
    ("reachability.report", {"peer": "p" * 65}),
    ("reachability.report", {"peer": "watch", "isPaired": True}),
]


def outcome(call: Callable[[], Any]) -> Tuple[Any, Optional[Tuple[int, str, str]]]:
    try:
        return call(), None
    except MentoryError as error:
        return None, (int(error.code), UUID.sub("<id>", error.message), error.reason)


def run(call: Callable[[str, Any], Any]) -> List[Tuple[Any, Optional[Tuple[int, str, str]]]]:
    replies: List[Any] = []
    outcomes = []
    for method, request in CALLS:
        body = request(replies) if callable(request) else request
        reply, error = outcome(lambda: call(method, body))
        replies.append(reply)
        outcomes.append((reply, error))
    return outcomes


def test_the_built_ins_answer_as_the_daemon_does(client: mentory.Client) -> None:
    daemon = run(lambda method, request: client.call(method, request))
    with PluginHost(moods_plugin()) as host:
        hosted = run(lambda method, request: host.call(method, request))
    for (method, _), (daemon_reply, daemon_error), (hosted_reply, hosted_error) in zip(CALLS, daemon, hosted):
        assert hosted_error == daemon_error, method
        if daemon_reply is None:
            continue
        assert type(hosted_reply).DESCRIPTOR.full_name == type(daemon_reply).DESCRIPTOR.full_name, method
        # Equal but for what each side draws or stamps: ids and times.
        for reply in (daemon_reply, hosted_reply):
            for message in [reply] + list(getattr(reply, "entries", [])):
                for name in ("id", "created_at_unix_ms", "updated_at_unix_ms"):
                    if name in message.DESCRIPTOR.fields_by_name:
                        message.ClearField(name)
            if reply.DESCRIPTOR.full_name == "mentory.v1.MentorState" and reply.HasField("message"):
                reply.message.ClearField("updated_at_unix_ms")
        assert hosted_reply == daemon_reply, method
