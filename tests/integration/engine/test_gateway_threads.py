"""S1 group commits: which thread writes a group. On a SQLite file a small group is written
from the event loop's own thread (no hop to the store thread); a group larger than
``inline_rows``, or one queued while a store call is out in the store thread, is written
there, behind it. PostgreSQL and the in-memory store always use the store thread. Every
group is durable when its waiters wake, whichever thread wrote it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from agac.engine.outcomes.gateway import StoreGateway
from agac.store import tables as t
from agac.store.repository import Store
from agac.store.rows import EventRow
from agac.store.values import RunSettings


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    s.create_run(
        id="r1",
        workflow="wf",
        workflow_path="wf.yml",
        retry_of=None,
        config={},
        config_hash="h",
        snapshot_id="s",
        fresh=False,
        settings=RunSettings(),
        tenant="default",
    )
    yield s
    s.close()


def _events(n: int, note: str) -> list[EventRow]:
    return [EventRow("r1", "note", None, str(i), f'{{"note": "{note}"}}', 0.0) for i in range(n)]


def _stored(store: Store, note: str) -> int:
    with store.engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count())
                .select_from(t.events)
                .where(t.events.c.data == f'{{"note": "{note}"}}')
            ).scalar_one()
        )


def _writers(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread of every checkpoint, in order."""
    seen: list[int] = []
    checkpoint = store.checkpoint

    def spy(*args: Any, **kw: Any) -> None:
        seen.append(threading.get_ident())
        checkpoint(*args, **kw)

    monkeypatch.setattr(store, "checkpoint", spy)
    return seen


def test_s1_small_groups_on_a_sqlite_file_are_written_from_the_loop_thread(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _writers(store, monkeypatch)
    inline = store.dialect == "sqlite"
    assert store.commits_inline is inline

    async def go() -> int:
        gw = StoreGateway(store, None, tenant="default", inline_rows=10)
        gw.start()
        try:
            await gw.commit(events=_events(3, "small"))
            assert _stored(store, "small") == 3  # durable when the waiter wakes
            await gw.commit(events=_events(11, "large"))
            assert _stored(store, "large") == 11
        finally:
            await gw.close()
        return threading.get_ident()

    loop_thread = asyncio.run(go())
    small, large = seen[0], seen[1]
    assert (small == loop_thread) is inline
    assert large != loop_thread  # a large group never holds up the loop


def test_s1_a_group_queued_while_a_store_call_is_out_waits_behind_it_in_the_store_thread(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _writers(store, monkeypatch)
    release, started = threading.Event(), threading.Event()
    order: list[str] = []

    def long_call() -> None:
        started.set()
        assert release.wait(120)  # the timeout only guards a hang
        order.append("call")

    async def go() -> int:
        gw = StoreGateway(store, None, tenant="default")
        gw.start()
        try:
            out = asyncio.ensure_future(gw.call(long_call))
            assert await asyncio.to_thread(started.wait, 120)  # the call is out in the store thread
            committed = asyncio.ensure_future(gw.commit(events=_events(2, "behind")))
            await asyncio.sleep(0.05)
            assert not committed.done()  # the loop is free; the group waits behind the call
            release.set()
            await out
            await committed
            order.append("group")
            assert _stored(store, "behind") == 2
        finally:
            await gw.close()
        return threading.get_ident()

    loop_thread = asyncio.run(go())
    assert order == ["call", "group"]
    assert seen and seen[0] != loop_thread


def test_s1_the_memory_store_writes_in_the_store_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store("memory")
    try:
        assert store.commits_inline is False
        seen = _writers(store, monkeypatch)

        async def go() -> int:
            gw = StoreGateway(store, None, tenant="default")
            gw.start()
            try:
                await gw.commit(events=[])
                await gw.commit(events=_events(1, "m"))
            finally:
                await gw.close()
            return threading.get_ident()

        assert asyncio.run(go()) not in seen
    finally:
        store.close()
