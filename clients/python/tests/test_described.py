"""Calling a plugin's namespace with no generated code: the client learns its types from session.describe.

The plugin here serves namespace ``habits`` from a schema built at run time in a private descriptor
pool, so protobuf's default pool (where generated ``*_pb2`` modules put their messages) never holds
``habits.v1``: every message the client returns for it is built from the daemon's descriptors.
"""

import asyncio
from typing import Any, Dict, Iterator

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, text_format
from google.protobuf.message import Message

import mentory
import mentory.plugin
from mentory import ErrorCode, EventKind
from support import DEADLINE_SECONDS
from test_plugin import PluginThread, serving

HABITS_PROTO = """
name: "habits.proto"
package: "habits.v1"
dependency: "mentory.proto"
syntax: "proto3"
message_type {
  name: "TrackRequest"
  field { name: "name" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL json_name: "name" }
  field { name: "done" number: 2 type: TYPE_BOOL label: LABEL_OPTIONAL json_name: "done" }
}
message_type {
  name: "Habit"
  field { name: "name" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL json_name: "name" }
  field { name: "streak" number: 2 type: TYPE_UINT32 label: LABEL_OPTIONAL json_name: "streak" }
}
message_type {
  name: "HabitList"
  field { name: "habits" number: 1 type: TYPE_MESSAGE label: LABEL_REPEATED type_name: ".habits.v1.Habit" json_name: "habits" }
}
service {
  name: "Habits"
  method { name: "track" input_type: ".habits.v1.TrackRequest" output_type: ".habits.v1.Habit" }
  method { name: "list" input_type: ".mentory.v1.Empty" output_type: ".habits.v1.HabitList" }
  options {
    [mentory.v1.namespace]: "habits"
    [mentory.v1.namespace_version]: 1
    [mentory.v1.topic] { name: "habits" change: "habits.v1.Habit" snapshot: "habits.v1.HabitList" }
  }
}
"""

HABITS_CONFIG: Dict[str, Any] = {
    "plugins": {"habits": {}},
    "limits": {"pluginCallTimeoutMilliseconds": 60000},
}


def habits_plugin(socket_path: str) -> mentory.plugin.Plugin:
    """A plugin for namespace habits, its schema in a pool of its own; handlers answer with dicts."""
    pool = descriptor_pool.DescriptorPool()
    for file in (descriptor_pb2.DESCRIPTOR, mentory.pb.DESCRIPTOR.dependencies[1], mentory.pb.DESCRIPTOR):
        pool.AddSerializedFile(file.serialized_pb)
    pool.AddSerializedFile(text_format.Parse(HABITS_PROTO, descriptor_pb2.FileDescriptorProto()).SerializeToString())
    plugin = mentory.plugin.Plugin(pool.FindServiceByName("habits.v1.Habits"), socket_path=socket_path)
    streaks: Dict[str, int] = {}

    @plugin.method("track")
    async def track(request: Any, call: mentory.plugin.Call) -> Dict[str, Any]:
        streaks[request.name] = streaks.get(request.name, 0) + 1 if request.done else 0
        habit = {"name": request.name, "streak": streaks[request.name]}
        await plugin.publish("habits", habit)
        return habit

    @plugin.method("list")
    async def list_habits(request: Any, call: mentory.plugin.Call) -> Dict[str, Any]:
        return {"habits": [{"name": name, "streak": streak} for name, streak in sorted(streaks.items())]}

    @plugin.snapshot("habits")
    async def snapshot() -> Dict[str, Any]:
        return await list_habits(None, None)  # type: ignore[arg-type]

    return plugin


def not_generated(message: Any, full_name: str) -> None:
    """``message`` is a decoded message of type ``full_name`` whose class no generated module made."""
    assert isinstance(message, Message), message
    assert message.DESCRIPTOR.full_name == full_name
    assert message.DESCRIPTOR.file.pool is not descriptor_pool.Default()


@pytest.fixture
def habits_daemon(make_daemon):  # type: ignore[no-untyped-def]
    return make_daemon(config=HABITS_CONFIG)


@pytest.fixture
def habits(habits_daemon) -> Iterator[PluginThread]:  # type: ignore[no-untyped-def]
    with serving(habits_plugin(habits_daemon.socket_path)) as thread:
        yield thread


def test_no_generated_code_for_the_namespace_exists_here() -> None:
    with pytest.raises(KeyError):
        descriptor_pool.Default().FindMessageTypeByName("habits.v1.Habit")


def test_call_on_a_plugin_namespace_returns_a_decoded_message(habits_daemon, habits) -> None:  # type: ignore[no-untyped-def]
    with habits_daemon.connect() as client:
        habit = client.call("habits.track", {"name": "walk", "done": True})
        not_generated(habit, "habits.v1.Habit")
        assert (habit.name, habit.streak) == ("walk", 1)
        # The older spelling, a message built from the described class, and proto field names.
        request_type = client.message_type("habits.v1.TrackRequest")
        assert client.call("habits", "track", request_type(name="walk", done=True)).streak == 2
        assert client.call("habits.track", request={"name": "read"}).streak == 0
        listed = client.call("habits.list")
        not_generated(listed, "habits.v1.HabitList")
        assert [(h.name, h.streak) for h in listed.habits] == [("read", 0), ("walk", 2)]
        # reply_type=bytes keeps the raw body; request_type= and bytes requests work as before.
        raw = client.call("habits.list", reply_type=bytes)
        assert isinstance(raw, bytes) and type(listed).FromString(raw) == listed
        assert client.call("habits.track", b"").name == ""
        assert client.call("habits.track", {"name": "x"}, request_type=request_type).name == "x"
        # A dict that does not fit the request type, and a message of another type, fail before sending.
        with pytest.raises(ValueError, match="habits.v1.TrackRequest"):
            client.call("habits.track", {"colour": "red"})
        with pytest.raises(TypeError, match="habits.v1.TrackRequest"):
            client.call("habits.track", mentory.pb.Empty())
        # Built-in namespaces keep their generated classes.
        assert type(client.call("mentor.get")) is mentory.pb.MentorState
        described = client.describe()
        assert "habits" in [namespace.namespace for namespace in described.namespaces]


def test_the_client_learns_a_namespace_registered_after_it_connected(habits_daemon) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with habits_daemon.aconnect() as client:
            # Declared but not connected: described without methods, so a dict cannot be encoded yet.
            with pytest.raises(mentory.MentoryError) as raised:
                await client.call("habits.track", {"name": "walk"})
            assert raised.value.code == ErrorCode.UNAVAILABLE
            assert (await client.describe()).namespaces  # the schema is cached now
            thread = PluginThread(habits_plugin(habits_daemon.socket_path)).start()
            try:
                await asyncio.get_running_loop().run_in_executor(None, thread.wait_registered)
                # The cached describe lists no method track: the client describes again and finds it.
                habit = await client.call("habits.track", {"name": "walk", "done": True})
                not_generated(habit, "habits.v1.Habit")
                assert habit.streak == 1
            finally:
                await asyncio.get_running_loop().run_in_executor(None, thread.stop)

    asyncio.run(asyncio.wait_for(scenario(), DEADLINE_SECONDS * 2))


def test_subscriptions_decode_a_plugin_topic(habits_daemon, habits) -> None:  # type: ignore[no-untyped-def]
    with habits_daemon.connect() as client:
        client.call("habits.track", {"name": "walk", "done": True})
        with client.subscribe(["habits", "mentor"]) as events:
            snapshots = [events.get(timeout=DEADLINE_SECONDS) for _ in range(2)]
            by_topic = {event.topic: event for event in snapshots}
            assert set(by_topic) == {"habits", "mentor"}
            assert all(event.kind == EventKind.SNAPSHOT for event in snapshots)
            not_generated(by_topic["habits"].body, "habits.v1.HabitList")
            assert [(h.name, h.streak) for h in by_topic["habits"].body.habits] == [("walk", 1)]
            assert type(by_topic["mentor"].body) is mentory.pb.MentorState

            client.call("habits.track", {"name": "walk", "done": True})
            change = events.get(timeout=DEADLINE_SECONDS)
            assert (change.topic, change.kind) == ("habits", EventKind.CHANGE)
            not_generated(change.body, "habits.v1.Habit")
            assert (change.body.name, change.body.streak) == ("walk", 2)


def test_the_asyncio_client_decodes_too(habits_daemon, habits) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with habits_daemon.aconnect() as client:
            # Concurrent first calls share one session.describe.
            replies = await asyncio.gather(*(client.call("habits.track", {"name": f"h{i}"}) for i in range(5)))
            assert sorted(reply.name for reply in replies) == [f"h{i}" for i in range(5)]
            async with client.subscribe(["habits"]) as events:
                async for event in events:
                    not_generated(event.body, "habits.v1.HabitList")
                    assert len(event.body.habits) == 5
                    break

    asyncio.run(asyncio.wait_for(scenario(), DEADLINE_SECONDS * 2))
