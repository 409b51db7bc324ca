"""Every built-in method that is safe to call, through the sync and the asyncio API."""

import asyncio
import datetime
import os
from pathlib import Path

import pytest

import mentory
from mentory import pb
from support import wait_until


def test_ping_status_and_welcome(client: mentory.Client) -> None:
    client.ping()
    status = client.status()
    assert status.epoch == client.welcome.epoch != 0
    assert status.connections >= 1
    namespaces = {handler.namespace for handler in status.handlers}
    assert {"session", "mentor", "diary", "reachability"} <= namespaces
    assert client.welcome.protocol_version == mentory.PROTOCOL_VERSION
    assert client.max_frame_length == 1024 * 1024


def test_every_registered_method_is_in_the_table(client: mentory.Client) -> None:
    """The daemon's handler list and the client's method table agree (storage/debug are optional handlers)."""
    for handler in client.welcome.handlers:
        for method in handler.methods:
            assert (handler.namespace, method) in mentory.METHODS, f"{handler.namespace}.{method} missing"
        for topic in handler.topics:
            assert topic in mentory.TOPICS


def test_mentor_set_get_and_complete_todo(client: mentory.Client) -> None:
    assert not client.mentor.get().HasField("message")
    state = client.mentor.set("Focus on one thing.", character="cool", todos=["write tests", {"text": "ship"}])
    assert state.message.content == "Focus on one thing."
    assert state.message.character == mentory.MentorCharacter.COOL
    assert [item.text for item in state.message.action_items] == ["write tests", "ship"]
    assert all(item.id for item in state.message.action_items)
    first = state.message.action_items[0].id
    done = client.mentor.complete_todo(first)
    assert [item.done for item in done.message.action_items] == [True, False]
    assert client.mentor.get() == done
    warm = client.mentor.set("Rest.", "WARM")
    assert warm.message.character == mentory.MentorCharacter.WARM
    assert len(warm.message.action_items) == 0


def test_diary_add_get_list_delete_and_suggestions(client: mentory.Client) -> None:
    days = [datetime.date(2026, 11, day) for day in (1, 2, 3)]
    added = [
        client.diary.add(day, f"title {day.day}", "text", emotion="pleasant", suggestions=["walk"])
        for day in days
    ]
    assert added[0].record_date == "2026-11-01"
    assert added[0].emotion == mentory.Emotion.PLEASANT
    assert client.diary.get(added[1].id) == added[1]
    listed = client.diary.list()
    assert [entry.record_date for entry in listed.entries] == ["2026-11-03", "2026-11-02", "2026-11-01"]
    page = client.diary.list(limit=1, before="2026-11-03")
    assert [entry.record_date for entry in page.entries] == ["2026-11-02"]
    suggestion = added[0].action_items[0]
    ticked = client.diary.set_suggestion_done(added[0].id, suggestion.id)
    assert ticked.action_items[0].done
    untick = client.diary.set_suggestion_done(added[0].id, suggestion.id, done=False)
    assert not untick.action_items[0].done
    deleted = client.diary.delete(added[2].id)
    assert deleted.id == added[2].id
    assert [entry.id for entry in client.diary.list().entries] == [added[1].id, added[0].id]


def test_diary_add_with_import_fields(client: mentory.Client) -> None:
    entry = client.diary.add(
        "2026-10-01", "imported", "text", 4, analysis="calm", id="5f0e8a36-5a5e-4c57-8c3b-9c1d2c1f1a11",
        created_at_unix_ms=1_700_000_000_000,
    )
    assert entry.id == "5f0e8a36-5a5e-4c57-8c3b-9c1d2c1f1a11"
    assert entry.created_at_unix_ms == 1_700_000_000_000
    assert entry.analysis == "calm"
    assert entry.emotion == mentory.Emotion.NEUTRAL


def test_reachability_report_get_and_unreachable_on_close(daemon, client: mentory.Client) -> None:  # type: ignore[no-untyped-def]
    with daemon.connect() as phone:
        stored = phone.reachability.report("phone", is_paired=True, is_app_installed=True, is_reachable=True)
        assert stored.updated_at_unix_ms > 0
        peers = client.reachability.get().peers
        assert [(p.peer, p.is_reachable) for p in peers] == [("phone", True)]
    # The reporting connection closed: the daemon marks the peer unreachable (asynchronously).
    wait_until(lambda: not client.reachability.get().peers[0].is_reachable, "the peer to become unreachable")
    peers = client.reachability.get().peers
    assert [(p.peer, p.is_reachable) for p in peers] == [("phone", False)]


def test_call_with_dicts_messages_and_bytes(client: mentory.Client) -> None:
    entry = client.call(
        "diary", "add", {"recordDate": "2026-09-09", "title": "t", "text": "x", "emotion": "EMOTION_NEUTRAL"}
    )
    assert isinstance(entry, pb.DiaryEntry)
    assert client.call("diary", "get", {"id": entry.id}) == entry
    assert client.call("diary", "get", pb.DiaryGetRequest(id=entry.id)) == entry
    raw = client.call("diary", "get", pb.DiaryGetRequest(id=entry.id).SerializeToString())
    assert raw == entry
    assert client.call("session", "ping") == pb.Empty()
    with pytest.raises(TypeError):
        client.call("diary", "get", pb.DiaryListRequest())
    with pytest.raises(TypeError):
        client.call("weather", "get", {"city": "Oslo"})


def test_call_unknown_method_returns_raw_bytes_or_the_given_type(client: mentory.Client) -> None:
    # An unknown namespace and method still round-trip; the error proves the request reached the daemon.
    with pytest.raises(mentory.MentoryError) as raised:
        client.call("weather", "get", b"\x08\x01")
    assert raised.value.code == mentory.ErrorCode.UNKNOWN_NAMESPACE
    # A known method called through reply_type decodes with that type.
    reply = client.call("session", "status", reply_type=pb.StatusReply)
    assert isinstance(reply, pb.StatusReply)


def test_storage_backup(make_daemon, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    daemon = make_daemon(backend="sqlite")
    destination = tmp_path / "backup.sqlite"
    with daemon.connect() as client:
        client.diary.add("2026-11-05", "t", "x", "neutral")
        if os.getuid() == 0:
            reply = client.storage.backup(str(destination))
            assert reply.diary_entries == 1
            assert reply.bytes == destination.stat().st_size > 0
            assert destination.stat().st_mode & 0o777 == 0o600
            assert destination.read_bytes().startswith(b"SQLite format 3\x00")
            assert [path.name for path in tmp_path.iterdir()] == ["backup.sqlite"], "no partial file is left"
            with pytest.raises(FileExistsError):
                client.storage.backup(str(destination))
        else:
            with pytest.raises(mentory.MentoryError) as raised:
                client.storage.backup(str(destination))
            assert raised.value.code == mentory.ErrorCode.PERMISSION_DENIED


def test_daemon_reload(client: mentory.Client) -> None:
    if os.getuid() == 0:
        assert isinstance(client.daemon.reload(), pb.DaemonReloadReply)
    else:
        with pytest.raises(mentory.MentoryError) as raised:
            client.daemon.reload()
        assert raised.value.code == mentory.ErrorCode.PERMISSION_DENIED


def test_async_calls(daemon) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        async with daemon.aconnect() as client:
            await client.ping()
            status = await client.status()
            assert status.epoch == client.welcome.epoch
            state = await client.mentor.set("Async.", "warm", todos=["a"])
            assert (await client.mentor.get()) == state
            state = await client.mentor.complete_todo(state.message.action_items[0].id)
            assert state.message.action_items[0].done
            entry = await client.diary.add("2026-11-10", "t", "x", "very_pleasant", suggestions=["s"])
            assert (await client.diary.get(entry.id)) == entry
            assert [e.id for e in (await client.diary.list(limit=5)).entries] == [entry.id]
            ticked = await client.diary.set_suggestion_done(entry.id, entry.action_items[0].id)
            assert ticked.action_items[0].done
            assert (await client.diary.delete(entry.id)).id == entry.id
            assert len((await client.diary.list()).entries) == 0
            peer = await client.reachability.report("watch", is_reachable=True)
            assert peer.peer == "watch"
            assert [p.peer for p in (await client.reachability.get()).peers] == ["watch"]
            reply = await client.call("diary", "list", {"limit": 1})
            assert isinstance(reply, pb.DiaryListReply)

    asyncio.run(run())


def test_await_connect_without_context_manager(daemon) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        client = await daemon.aconnect()
        try:
            await client.ping()
        finally:
            await client.close()
        assert client.closed
        with pytest.raises(mentory.ConnectionClosed):
            await client.ping()

    asyncio.run(run())


def test_client_is_usable_from_several_threads(client: mentory.Client) -> None:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: client.status().epoch, range(64)))
    assert set(results) == {client.welcome.epoch}
