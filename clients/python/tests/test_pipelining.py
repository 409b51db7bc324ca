"""Many requests in flight on one asyncio connection, answered by id."""

import asyncio
import datetime

import mentory
from mentory import pb


def test_hundred_concurrent_calls_on_one_connection(daemon) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        async with daemon.aconnect() as client:
            first = datetime.date(2025, 1, 1)
            days = [first + datetime.timedelta(days=n) for n in range(100)]
            # 100 distinct writes plus 100 reads, all in flight at once on one connection.
            adds = [client.diary.add(day, f"entry {n}", "text", "neutral") for n, day in enumerate(days)]
            reads = [client.status() for _ in days]
            results = await asyncio.gather(*adds, *reads)
            entries = results[:100]
            statuses = results[100:]
            # Each call got its own answer: the reply matches the request that asked for it.
            assert [entry.record_date for entry in entries] == [day.isoformat() for day in days]
            assert [entry.title for entry in entries] == [f"entry {n}" for n in range(100)]
            assert all(isinstance(status, pb.StatusReply) for status in statuses)
            assert len({entry.id for entry in entries}) == 100
            listed = await client.diary.list(limit=1000)
            assert len(listed.entries) == 100
            # Errors in flight among successes stay with their own request.
            outcomes = await asyncio.gather(
                *[client.diary.get(entries[n].id if n % 2 == 0 else "missing") for n in range(100)],
                return_exceptions=True,
            )
            for n, outcome in enumerate(outcomes):
                if n % 2 == 0:
                    assert outcome == entries[n]
                else:
                    assert isinstance(outcome, mentory.MentoryError) and outcome.code == mentory.ErrorCode.NOT_FOUND

    asyncio.run(run())


def test_more_requests_than_the_daemon_reads_at_once(daemon) -> None:  # type: ignore[no-untyped-def]
    """300 pings exceed limits.maxRequestsInFlight (128): back-pressure, nothing dropped."""

    async def run() -> None:
        async with daemon.aconnect() as client:
            replies = await asyncio.gather(*[client.call("session", "ping") for _ in range(300)])
            assert replies == [pb.Empty()] * 300

    asyncio.run(run())
