"""mentory.testing: a plugin's handlers run against the in-memory host, with no daemon and no socket.

The plugin under test serves ``moods`` (moods_schema.py): ``recent`` reads the caller's diary on their
behalf, ``withStreak`` also calls ``streaks`` (faked here), ``mentor`` calls through ``plugin.client``
with the plugin's own rights, ``purge`` is privileged. None of these tests starts a daemon.
"""

import asyncio
from typing import Any, List

import pytest

import mentory
import mentory.plugin
import mentory.testing
from mentory import ErrorCode, MentoryError, pb
from mentory.testing import AsyncPluginHost, Caller, PluginHost

from moods_schema import MOODS, STREAKS

OWNER = Caller(uid=1001, client_name="owner")
DENIED = Caller(uid=1000, client_name="denied")
DAY = "2026-11-20"


def moods_plugin() -> mentory.plugin.Plugin:
    """A fresh ``moods`` plugin (a plugin is hosted by one host at a time)."""
    plugin = mentory.plugin.Plugin(MOODS)
    types = plugin.methods
    MoodList = types["recent"][1]
    Mood = plugin.topics["moods"][0]

    async def moods(request: Any, call: mentory.plugin.Call) -> Any:
        listed = await call.call("diary.list", {"limit": request.days or 7})
        reply = MoodList(moods=[Mood(day=entry.record_date, emotion=entry.emotion) for entry in listed.entries])
        if reply.moods:
            await plugin.publish("moods", reply.moods[0])
        return reply

    @plugin.method("recent")
    async def recent(request: Any, call: mentory.plugin.Call) -> Any:
        return await moods(request, call)

    @plugin.method("withStreak")
    async def with_streak(request: Any, call: mentory.plugin.Call) -> Any:
        reply = await moods(request, call)
        streak = await call.call("streaks.current", {"habit": "diary"})  # a dict: types from session.describe
        reply.streak = streak.days
        return reply

    @plugin.method("mentor")
    async def mentor(request: Any, call: mentory.plugin.Call) -> Any:
        assert plugin.client is not None
        return await plugin.client.call("mentor.get", {})  # the plugin's own rights, not the caller's

    @plugin.method("purge")
    def purge(request: Any, call: mentory.plugin.Call) -> Any:  # a plain function: runs on the executor
        return pb.Empty()

    @plugin.snapshot("moods")
    def snapshot() -> Any:
        return MoodList()

    return plugin


def add_entry(host: PluginHost, caller: Caller = OWNER, day: str = DAY, **fields: Any) -> Any:
    request = {"recordDate": day, "title": "walk", "text": "a long walk by the river", "emotion": "EMOTION_PLEASANT"}
    request.update(fields)
    return host.call("diary.add", request, caller=caller)


def refused(work: Any) -> MentoryError:
    with pytest.raises(MentoryError) as raised:
        work()
    return raised.value


# -- calls on the caller's behalf --------------------------------------------------------------------


def test_a_method_reads_the_callers_diary_on_their_behalf() -> None:
    with PluginHost(moods_plugin(), access_rules=["deny uid=1000 diary.*"]) as host:
        add_entry(host, day="2026-11-19", emotion="EMOTION_UNPLEASANT")
        add_entry(host, day="2026-11-20")
        reply = host.call("recent", {"days": 7}, caller=OWNER)
        assert [(mood.day, mood.emotion) for mood in reply.moods] == [
            ("2026-11-20", pb.EMOTION_PLEASANT),
            ("2026-11-19", pb.EMOTION_UNPLEASANT),
        ]
        assert reply.DESCRIPTOR.full_name == "moods.v1.MoodList"
        assert [mood.day for mood in host.published("moods")] == ["2026-11-20"]
        assert host.call("moods.recent", {"days": 1}, caller=OWNER).moods[0].day == "2026-11-20"


def test_a_caller_denied_diary_is_refused_on_their_behalf() -> None:
    with PluginHost(moods_plugin(), access_rules=["deny uid=1000 diary.*"]) as host:
        add_entry(host)
        error = refused(lambda: host.call("recent", caller=DENIED))
        assert error.code == ErrorCode.PERMISSION_DENIED
        assert error.reason == mentory.testing.DENIED_ON_BEHALF == "session.denied_on_behalf"
        assert error.message == (
            "permission denied: you may not call diary.list, which was called on your behalf by moods"
            " (moods -> diary.list); the access rules that refuse it to you refuse it to what you call"
        )
        assert host.published("moods") == []
        # The same caller calling diary itself gets the daemon's plain refusal.
        direct = refused(lambda: host.call("diary.list", caller=DENIED))
        assert (direct.code, direct.message, direct.reason) == (
            ErrorCode.PERMISSION_DENIED,
            "permission denied: you may not call diary.list",
            "",
        )


def test_the_rules_read_as_the_daemons() -> None:
    rules = [
        "allow gid=2000 diary.list",
        "deny gid=2000 diary.*",
        "deny any moods.recent",
    ]
    with PluginHost(moods_plugin(), access_rules=rules, daemon_uid=990) as host:
        add_entry(host, caller=Caller())
        # The first rule that matches decides; supplementary groups count as gid=N.
        assert len(host.call("diary.list", caller=Caller(uid=1003, groups=(2000,))).entries) == 1
        assert refused(lambda: add_entry(host, caller=Caller(uid=1003, gid=2000), day="2026-11-21")).code == (
            ErrorCode.PERMISSION_DENIED
        )
        # Root and the daemon's own user pass every rule; anyone else is refused moods.recent.
        assert len(host.call("recent", caller=Caller(uid=0)).moods) == 1
        assert len(host.call("recent", caller=Caller(uid=990)).moods) == 1
        assert refused(lambda: host.call("recent", caller=OWNER)).code == ErrorCode.PERMISSION_DENIED
        # A peer whose credentials are unknown matches every deny rule and no allow rule.
        unknown = Caller(known=False)
        assert refused(lambda: host.call("diary.list", caller=unknown)).code == ErrorCode.PERMISSION_DENIED
        assert host.call("mentor.get", caller=unknown) == pb.MentorState()
    with pytest.raises(ValueError, match=r"access rule 'allow diary\.\*' must read: allow\|deny WHO WHAT"):
        PluginHost(moods_plugin(), access_rules=["allow diary.*"])
    with pytest.raises(ValueError, match="WHO must be any, uid=N or gid=N"):
        PluginHost(moods_plugin(), access_rules=["deny user=1 diary.*"])


def test_a_privileged_method_answers_only_its_holders() -> None:
    with PluginHost(moods_plugin(), access_rules=["allow any moods.*", "allow uid=1002 moods.purge"]) as host:
        assert host.call("purge") == pb.Empty()  # root
        assert host.call("purge", caller=Caller(uid=1002)) == pb.Empty()  # granted by name to a uid
        error = refused(lambda: host.call("purge", caller=OWNER))  # "allow any" never grants a privilege
        assert (error.code, error.message) == (
            ErrorCode.PERMISSION_DENIED,
            "permission denied: you may not call moods.purge",
        )


def test_a_call_on_behalf_counts_against_the_callers_budget() -> None:
    with PluginHost(moods_plugin(), uid_requests_in_flight=1) as host:
        error = refused(lambda: host.call("recent", caller=OWNER))
        assert error.code == ErrorCode.TOO_MANY_REQUESTS
        assert error.message.startswith(
            "moods -> diary.list was refused: it is made on behalf of a caller (uid 1001) whose uid is at its budget"
        )
    with PluginHost(moods_plugin(), uid_requests_in_flight=2) as host:
        assert host.call("recent", caller=OWNER).moods == []


# -- fakes -------------------------------------------------------------------------------------------


def test_a_fake_serves_another_namespace_for_the_caller() -> None:
    seen: List[Any] = []

    def current(request: Any, call: mentory.testing.FakeCall) -> Any:
        seen.append((request.habit, call.caller.uid, call.chain))
        return {"habit": request.habit, "days": 4}

    with PluginHost(moods_plugin(), access_rules=["deny uid=1000 streaks.*"]) as host:
        host.fake(STREAKS, current=current)
        add_entry(host)
        reply = host.call("withStreak", caller=OWNER)
        assert (len(reply.moods), reply.streak) == (1, 4)
        assert seen == [("diary", 1001, ("moods", "streaks"))]
        error = refused(lambda: host.call("withStreak", caller=DENIED))
        assert (error.code, error.reason) == (ErrorCode.PERMISSION_DENIED, "session.denied_on_behalf")
        assert "streaks.current, which was called on your behalf by moods (moods -> streaks.current)" in error.message
        assert host.call("streaks.current", {"habit": "x"}).days == 4  # a test calls a fake as a client


def test_a_fakes_error_reaches_the_caller_as_it_came() -> None:
    async def current(request: Any, call: mentory.testing.FakeCall) -> Any:
        raise MentoryError(ErrorCode.UNAVAILABLE, "its plugin 'streaks' is not connected", reason="streaks.away")

    with PluginHost(moods_plugin()) as host:
        host.fake(STREAKS, {"current": current})
        error = refused(lambda: host.call("withStreak", caller=OWNER))
        assert (error.code, error.message, error.reason) == (
            ErrorCode.UNAVAILABLE,
            "its plugin 'streaks' is not connected",
            "streaks.away",
        )


def test_a_fake_named_without_a_schema_takes_and_answers_bytes() -> None:
    Streak = mentory.plugin.Plugin(STREAKS).methods["current"][1]
    plugin = moods_plugin()

    @plugin.method("withStreak")
    async def with_streak(request: Any, call: mentory.plugin.Call) -> Any:
        streak = await call.call("tally.count", b"\x08\x01", reply_type=Streak)
        return {"streak": streak.days}

    with PluginHost(plugin) as host:
        host.fake("tally", count=lambda request, call: Streak(days=len(request)))
        assert host.call("withStreak").streak == 2


def test_calls_that_would_loop_or_reach_nothing_are_refused() -> None:
    plugin = moods_plugin()

    @plugin.method("recent")
    async def recent(request: Any, call: mentory.plugin.Call) -> Any:
        return await call.call("moods.purge", {})

    @plugin.method("withStreak")
    async def with_streak(request: Any, call: mentory.plugin.Call) -> Any:
        return await call.call("session.status", b"", reply_type=bytes)

    async def back(request: Any, call: mentory.testing.FakeCall) -> Any:
        return await call.call("moods.recent", {})

    with PluginHost(plugin) as host:
        cycle = refused(lambda: host.call("recent"))
        assert (cycle.code, cycle.message) == (
            ErrorCode.INTERNAL,
            "a call cycle was refused: moods -> moods (moods.purge); a handler may call only namespaces that do"
            " not call it back",
        )
        nowhere = refused(lambda: host.call("withStreak"))
        assert nowhere.code == ErrorCode.INTERNAL
        assert "moods called session.status, which no handler or plugin serves" in nowhere.message
        host.fake(STREAKS, current=back)
        assert "a call cycle was refused: streaks -> moods" in refused(lambda: host.call("streaks.current")).message
        unknown = refused(lambda: host.call("moods.nothing"))
        assert (unknown.code, unknown.message) == (
            ErrorCode.UNKNOWN_METHOD,
            "namespace 'moods' has no method 'nothing'",
        )
        assert refused(lambda: host.call("elsewhere.x")).code == ErrorCode.UNKNOWN_NAMESPACE


# -- the plugin's own behaviour ------------------------------------------------------------------------


def test_handler_failures_answer_as_the_daemon_passes_them_on() -> None:
    plugin = moods_plugin()

    @plugin.method("recent")
    async def recent(request: Any, call: mentory.plugin.Call) -> Any:
        if request.days == 1:
            raise MentoryError(ErrorCode.INVALID_ARGUMENT, "ask for more days", reason="moods.too_few")
        if request.days == 2:
            raise KeyError("oops")
        if request.days == 3:
            return pb.Empty()  # the wrong reply type
        await asyncio.Event().wait()  # never set: past the deadline, cancelled

    with PluginHost(plugin, timeout=0.05) as host:
        own = refused(lambda: host.call("recent", {"days": 1}))
        assert (own.code, own.message, own.reason) == (ErrorCode.INVALID_ARGUMENT, "ask for more days", "moods.too_few")
        bug = refused(lambda: host.call("recent", {"days": 2}))
        assert (bug.code, bug.message) == (ErrorCode.INTERNAL, "moods.recent failed: KeyError: 'oops'")
        assert isinstance(bug.__cause__, KeyError)  # pytest shows the handler's traceback
        wrong = refused(lambda: host.call("recent", {"days": 3}))
        assert wrong.code == ErrorCode.INTERNAL and "must be a moods.v1.MoodList" in wrong.message
        late = refused(lambda: host.call("recent", {"days": 4}))
        assert (late.code, late.message) == (
            ErrorCode.DEADLINE_EXCEEDED,
            "moods.recent was not answered within its deadline of 50 ms",
        )


def test_plugin_client_acts_with_the_plugins_rights() -> None:
    with PluginHost(moods_plugin(), access_rules=["deny uid=1000 mentor.*"]) as host:
        host.call("mentor.set", {"content": "Ship it.", "character": "MENTOR_CHARACTER_COOL"})
        assert host.call("mentor", caller=DENIED).message.content == "Ship it."
    denied_plugin = Caller(uid=1000, client_name="moods-plugin")
    with PluginHost(moods_plugin(), access_rules=["deny uid=1000 mentor.*"], plugin_caller=denied_plugin) as host:
        error = refused(lambda: host.call("mentor", caller=OWNER))
        assert (error.code, error.message) == (
            ErrorCode.PERMISSION_DENIED,
            "permission denied: you may not call mentor.get",
        )


def test_snapshots_and_publications() -> None:
    with PluginHost(moods_plugin(), clock=lambda: 1_795_300_000.0) as host:
        assert host.snapshot("moods").DESCRIPTOR.full_name == "moods.v1.MoodList"
        entry = add_entry(host)
        assert entry.created_at_unix_ms == 1_795_300_000_000
        assert [e.id for e in host.snapshot("diary").entries] == [entry.id]
        assert [change.WhichOneof("change") for change in host.published("diary")] == ["added"]
        host.run(host.plugin.publish("moods", {"day": DAY}))
        assert [(p.topic, p.namespace) for p in host.publications] == [("diary", "diary"), ("moods", "moods")]
        with pytest.raises(ValueError, match="no hosted namespace has a topic 'nope'"):
            host.published("nope")


def test_a_snapshot_is_taken_only_for_a_caller_who_may_subscribe() -> None:
    rules = ["deny uid=1000 diary.*", "deny uid=1002 subscribe:moods"]
    with PluginHost(moods_plugin(), access_rules=rules) as host:
        assert host.snapshot("moods", caller=OWNER).moods == []
        # moods declares reads: diary.list, so its events go only to those who may read the diary.
        error = refused(lambda: host.snapshot("moods", caller=DENIED))
        assert (error.code, error.message) == (
            ErrorCode.PERMISSION_DENIED,
            "permission denied: you may not call session.subscribe(moods): its events carry what diary.list"
            " returns, which you may not call",
        )
        assert refused(lambda: host.snapshot("diary", caller=DENIED)).code == ErrorCode.PERMISSION_DENIED
        assert refused(lambda: host.snapshot("moods", caller=Caller(uid=1002))).message.endswith(
            "access.rules deny subscribe:moods"
        )


def test_the_async_host_registers_the_plugin_while_it_hosts_it() -> None:
    plugin = moods_plugin()

    async def main() -> None:
        assert plugin.state is mentory.plugin.PluginState.STOPPED
        async with AsyncPluginHost(plugin, access_rules=["deny uid=1000 diary.*"]) as host:
            assert plugin.state is mentory.plugin.PluginState.REGISTERED
            assert (await plugin.wait_registered(timeout=1)).plugin == "moods"
            with pytest.raises(RuntimeError, match="serving or hosted already"):
                await AsyncPluginHost(plugin).start()
            await host.call("diary.add", {"recordDate": DAY, "title": "t", "text": "x", "emotion": 4}, caller=OWNER)
            assert len((await host.call("recent", caller=OWNER)).moods) == 1
            with pytest.raises(MentoryError) as error:
                await host.call("recent", caller=1000)
            assert error.value.reason == "session.denied_on_behalf"
        assert plugin.state is mentory.plugin.PluginState.STOPPED
        assert plugin.client is None

    asyncio.run(main())


def test_a_plugin_without_every_handler_is_refused() -> None:
    with pytest.raises(ValueError, match="method 'recent' has no handler"):
        PluginHost(mentory.plugin.Plugin(MOODS))


# -- the built-in namespaces, as the daemon answers them ----------------------------------------------------


def test_the_diary_checks_as_the_daemon_does() -> None:
    with PluginHost(moods_plugin()) as host:
        first = add_entry(host)
        assert len(first.id) == 36 and first.id[14] == "7"  # a time-ordered UUID

        def invalid(message: str, **fields: Any) -> None:
            error = refused(lambda: add_entry(host, day="2026-11-21", **fields))
            assert (error.code, error.message) == (ErrorCode.INVALID_ARGUMENT, message)

        invalid("the emotion must be one of the seven, from veryUnpleasant to veryPleasant", emotion=0)
        invalid("the emotion must be one of the seven, from veryUnpleasant to veryPleasant", emotion=9)
        invalid("the diary entry's title is empty", title="  ")
        invalid("DiaryAddRequest.title has 257 UTF-8 bytes, over the limit of 256", title="x" * 257)
        invalid("the diary entry's text is empty", text="")
        invalid("action item 1 has no text", actionItems=[{"text": " "}])
        invalid("the entry id must be a UUID, not 'nope'", id="nope")
        error = refused(lambda: add_entry(host, day="2026-02-30"))
        assert error.message == "the record date must be a real day written YYYY-MM-DD, not '2026-02-30'"
        same_day = refused(lambda: add_entry(host))
        assert (same_day.code, same_day.message) == (
            ErrorCode.CONFLICT,
            f"there is already an entry for {DAY} (id {first.id}); delete it first",
        )
        missing = refused(lambda: host.call("diary.get", {"id": "gone"}))
        assert (missing.code, missing.message) == (ErrorCode.NOT_FOUND, "diary entry 'gone' was not found")
        too_many = refused(lambda: host.call("diary.list", {"limit": 1001}))
        assert too_many.message == "list at most 1000 entries at a time, not 1001"
        assert refused(lambda: host.call("diary.list", {"before": "soon"})).message == (
            "'before' must be a date written YYYY-MM-DD, not 'soon'"
        )
        # An import repeated is a no-op; items get ids; paging continues with next_before.
        imported = add_entry(
            host,
            day="2026-11-01",
            id=first.id.replace(first.id[:8], "0" * 8).upper(),
            actionItems=[{"text": "stretch"}],
        )
        assert (
            add_entry(
                host,
                day="2026-11-01",
                id=imported.id,
                createdAtUnixMs=imported.created_at_unix_ms,
                actionItems=[{"id": imported.action_items[0].id, "text": "stretch"}],
            )
            == imported
        )
        page = host.call("diary.list", {"limit": 1})
        assert ([e.record_date for e in page.entries], page.next_before) == ([DAY], DAY)
        rest = host.call("diary.list", {"limit": 1, "before": page.next_before})
        assert ([e.record_date for e in rest.entries], rest.HasField("next_before")) == (["2026-11-01"], False)
        done = host.call(
            "diary.setSuggestionDone",
            {"entryId": imported.id, "suggestionId": imported.action_items[0].id, "done": True},
        )
        assert done.action_items[0].done
        host.call("diary.delete", {"id": first.id})
        assert [c.WhichOneof("change") for c in host.published("diary")] == ["added", "added", "updated", "deleted_id"]


def test_the_mentor_and_reachability_check_as_the_daemon_does() -> None:
    with PluginHost(moods_plugin(), clock=lambda: 1_795_300_000.0) as host:
        error = refused(lambda: host.call("mentor.set", {"content": "hi"}))
        assert (error.code, error.message) == (ErrorCode.INVALID_ARGUMENT, "the mentor character must be cool or warm")
        state = host.call("mentor.set", {"content": "hi", "character": 2, "actionItems": [{"text": "rest"}]})
        assert host.call("mentor.set", {"content": "hi", "character": 2, "actionItems": [{"text": "rest"}]}) == state
        assert len(host.published("mentor")) == 1  # the same message again publishes nothing
        item = state.message.action_items[0].id
        assert host.call("mentor.completeTodo", {"id": item}).message.action_items[0].done
        assert (
            refused(lambda: host.call("mentor.completeTodo", {"id": "x"})).message
            == "mentor action item 'x' was not found"
        )
        bad = refused(lambda: host.call("reachability.report", {"peer": "my phone"}))
        assert bad.message == "peer name 'my phone' may hold only letters, digits, '-', '_' and '.'"
        peer = host.call("reachability.report", {"peer": "watch", "isPaired": True})
        assert peer.updated_at_unix_ms == 1_795_300_000_000
        assert host.snapshot("reachability").peers == [peer]
        assert host.published("reachability") == [peer]
