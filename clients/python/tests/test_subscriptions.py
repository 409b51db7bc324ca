"""Subscriptions: snapshots, changes, resuming, restarts, slow consumers."""

import asyncio
from typing import List

import pytest

import mentory
from mentory import EventKind, pb
from support import DEADLINE_SECONDS, wait_until


def _next(subscription: mentory.Subscription) -> mentory.Event:
    return subscription.get(timeout=DEADLINE_SECONDS)


def test_snapshot_then_changes_sync(client: mentory.Client) -> None:
    client.mentor.set("Before.", "warm")
    with client.subscribe(["diary", "mentor"]) as subscription:
        snapshots = {event.topic: event for event in (_next(subscription), _next(subscription))}
        assert set(snapshots) == {"diary", "mentor"}
        assert all(event.kind == EventKind.SNAPSHOT and event.is_snapshot for event in snapshots.values())
        assert snapshots["mentor"].body.message.content == "Before."
        assert isinstance(snapshots["diary"].body, pb.DiarySnapshot) and len(snapshots["diary"].body.entries) == 0
        assert snapshots["mentor"].epoch == client.welcome.epoch

        client.mentor.set("After.", "cool")
        change = _next(subscription)
        assert (change.topic, change.kind, change.sequence) == ("mentor", EventKind.CHANGE, snapshots["mentor"].sequence + 1)
        assert isinstance(change.body, pb.MentorState) and change.body.message.content == "After."

        entry = client.diary.add("2026-11-01", "t", "x", "neutral")
        added = _next(subscription)
        assert (added.topic, added.kind) == ("diary", EventKind.CHANGE)
        assert added.body.WhichOneof("change") == "added" and added.body.added == entry
        client.diary.delete(entry.id)
        deleted = _next(subscription)
        assert deleted.body.deleted_id == entry.id and deleted.sequence == added.sequence + 1
        assert subscription.position.sequences == {"diary": deleted.sequence, "mentor": change.sequence}
        assert subscription.position.epoch == client.welcome.epoch


def test_reachability_events_use_their_types(client: mentory.Client) -> None:
    with client.subscribe(["reachability"]) as subscription:
        snapshot = _next(subscription)
        assert isinstance(snapshot.body, pb.ReachabilitySnapshot)
        client.reachability.report("phone", is_reachable=True)
        change = _next(subscription)
        assert isinstance(change.body, pb.PeerState) and change.body.peer == "phone"


def test_snapshot_then_changes_async(daemon) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        async with daemon.aconnect() as client:
            seen: List[mentory.Event] = []
            async with client.subscribe(["mentor"]) as subscription:
                assert (await subscription.start()).epoch == client.welcome.epoch  # idempotent
                async for event in subscription:
                    seen.append(event)
                    if event.is_snapshot:
                        await client.mentor.set("one", "warm")
                        await client.mentor.set("two", "warm")
                    if len(seen) == 3:
                        break
            assert [event.kind for event in seen] == [EventKind.SNAPSHOT, EventKind.CHANGE, EventKind.CHANGE]
            assert [event.sequence for event in seen] == [0, 1, 2]
            assert seen[2].body.message.content == "two"
            # A closed subscription ends the iteration.
            assert [event async for event in subscription] == []

    asyncio.run(asyncio.wait_for(run(), DEADLINE_SECONDS))


def test_resume_from_a_position_token_replays_changes(client: mentory.Client) -> None:
    with client.subscribe(["mentor"]) as first:
        _next(first)
        client.mentor.set("one", "warm")
        _next(first)
        token = first.position.token()
    client.mentor.set("two", "warm")
    client.mentor.set("three", "warm")
    with client.subscribe(["mentor"], resume=token) as resumed:
        replayed = [_next(resumed), _next(resumed)]
    assert [(event.kind, event.sequence) for event in replayed] == [(EventKind.CHANGE, 2), (EventKind.CHANGE, 3)]
    assert [event.body.message.content for event in replayed] == ["two", "three"]


def test_resume_from_another_epoch_gets_a_reset(client: mentory.Client) -> None:
    client.mentor.set("now", "warm")
    stale = mentory.Position({"mentor": (client.welcome.epoch ^ 1, 5)})
    with client.subscribe(["mentor"], resume=stale) as subscription:
        reset = _next(subscription)
    assert reset.kind == EventKind.RESET and reset.is_reset
    assert reset.body.message.content == "now"


def test_unknown_topic_is_invalid_argument(client: mentory.Client) -> None:
    with pytest.raises(mentory.MentoryError) as raised:
        client.subscribe(["diary", "weather"])
    assert raised.value.code == mentory.ErrorCode.INVALID_ARGUMENT


def test_resume_across_a_daemon_restart_gets_a_reset(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon = make_daemon(backend="sqlite")
    with daemon.connect() as subscriber:
        entry = subscriber.diary.add("2026-11-02", "kept", "x", "pleasant")
        old_epoch = subscriber.welcome.epoch
        subscription = subscriber.subscribe(["diary", "mentor"])
        first = [_next(subscription), _next(subscription)]
        assert {event.kind for event in first} == {EventKind.SNAPSHOT}

        # A new daemon on the same socket and state directory: a new epoch.
        daemon.restart()
        with daemon.connect() as client:
            assert client.welcome.epoch != old_epoch
            resets = {event.topic: event for event in (_next(subscription), _next(subscription))}
            assert {event.kind for event in resets.values()} == {EventKind.RESET}
            assert {event.epoch for event in resets.values()} == {client.welcome.epoch}
            assert [e.id for e in resets["diary"].body.entries] == [entry.id]  # the SQLite store kept it
            assert subscription.reconnects == 1
            assert subscription.position.epoch == client.welcome.epoch
            client.mentor.set("after the restart", "warm")
            change = _next(subscription)
            assert (change.topic, change.kind) == ("mentor", EventKind.CHANGE)
            assert change.sequence == resets["mentor"].sequence + 1
        # The subscriber's own connection died with the old daemon; its subscription did not.
        assert subscriber.closed


def test_short_get_timeouts_do_not_stop_the_reconnection(make_daemon) -> None:  # type: ignore[no-untyped-def]
    # Each get(timeout=0.2) gives up long before the reconnection's back-off (at least 1 s) ends;
    # the reconnection goes on regardless, and a later get returns the RESET.
    daemon = make_daemon(backend="sqlite")
    with daemon.connect() as subscriber:
        subscription = subscriber.subscribe(["mentor"])
        assert _next(subscription).kind == EventKind.SNAPSHOT
        daemon.restart()
        received: List[mentory.Event] = []

        def reset_arrived() -> bool:
            try:
                received.append(subscription.get(timeout=0.2))
            except mentory.Timeout:
                return False
            return True

        wait_until(reset_arrived, "the RESET after the restart")
        assert received[0].kind == EventKind.RESET
        assert subscription.reconnects == 1


def test_async_subscription_reconnects_after_a_restart(make_daemon) -> None:  # type: ignore[no-untyped-def]
    daemon = make_daemon(backend="sqlite")

    async def run() -> None:
        async with daemon.aconnect() as client:
            subscription = client.subscribe(["mentor"])
            iterator = subscription.__aiter__()
            snapshot = await iterator.__anext__()
            assert snapshot.is_snapshot
            await asyncio.get_running_loop().run_in_executor(None, daemon.restart)
            reset = await iterator.__anext__()
            assert reset.is_reset and reset.epoch != snapshot.epoch
            assert subscription.reconnects == 1

    asyncio.run(asyncio.wait_for(run(), DEADLINE_SECONDS))


def test_full_buffer_resubscribes_from_the_last_delivered_position(client: mentory.Client) -> None:
    with client.subscribe(["mentor"], buffer_size=2) as subscription:
        assert _next(subscription).is_snapshot
        for n in range(1, 11):
            client.mentor.set(f"message {n}", "warm")
        # Nobody reads: the third event finds the buffer full.
        wait_until(lambda: subscription.overflows >= 1, "the buffer to overflow")
        events = [_next(subscription) for _ in range(10)]
        # Every change arrives once, in order: two from the buffer, the rest replayed by the daemon.
        assert [(event.kind, event.sequence) for event in events] == [(EventKind.CHANGE, n) for n in range(1, 11)]
        assert events[-1].body.message.content == "message 10"
        assert subscription.reconnects >= 1


def test_position_tokens_round_trip() -> None:
    position = mentory.Position({"diary": (2**64 - 1, 3), "mentor": (2**64 - 1, 0)})
    assert mentory.Position.from_token(position.token()) == position
    assert position.epoch == 2**64 - 1
    assert mentory.Position({"a": (1, 1), "b": (2, 1)}).epoch is None
    with pytest.raises(ValueError):
        mentory.Position.from_token("not a token")
    with pytest.raises(ValueError):
        mentory.Position.from_token('{"v": 99, "topics": {}}')


def test_backoff_is_at_least_a_second_exponential_and_capped() -> None:
    with pytest.raises(ValueError):
        mentory.Backoff(initial=0.1)
    backoff = mentory.Backoff(initial=1.0, maximum=30.0, multiplier=2.0, jitter=0.25)
    for attempt, base in [(0, 1.0), (1, 2.0), (2, 4.0), (10, 30.0), (1000, 30.0)]:
        delay = backoff.delay(attempt)
        assert base <= delay <= base * 1.25
