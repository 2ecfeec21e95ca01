"""The claims half of the repository on a real PostgreSQL: SKIP LOCKED shard claims with
fenced shard leases (S3), the run lease excluding claims, and global rate windows."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from agac.store.repository import Store
from agac.store.rows import Checkpoint
from agac.store.values import RunSettings
from agac.testing import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(fresh_pg_database: str, clock: ManualClock) -> Iterator[Store]:
    s = Store(fresh_pg_database, clock=clock)
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
    s.ensure_shards(
        "r1",
        [
            {"shard": f"o:{i:010d}", "kind": "online", "file": "a.jsonl", "lo": i, "hi": i + 1000}
            for i in range(0, 20_000, 1000)
        ],
    )
    yield s
    s.close()


def test_s3_concurrent_claims_never_hand_one_shard_to_two_workers(store: Store) -> None:
    got: list[str] = []
    lock = threading.Lock()

    def claimer(n: int) -> None:
        while True:
            c = store.claim_shard(worker=f"w{n}", host="h", pid=n, ttl=30)
            if c is None:
                return
            with lock:
                got.append(c.shard)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(set(got)) and len(got) == 20


def test_s3_expired_shard_lease_is_taken_over_and_the_old_owner_is_fenced(
    store: Store, clock: ManualClock
) -> None:
    first = store.claim_shard(worker="w1", host="h", pid=1, ttl=0.2)
    assert first is not None and first.token == 1
    clock.advance(0.3)
    while True:  # the expired shard is claimable again, with a new token
        second = store.claim_shard(worker="w2", host="h", pid=2, ttl=30)
        assert second is not None
        if second.shard == first.shard:
            break
    assert second.token == 2
    assert store.release_shard(first, state="done", ready_at=0) is False  # refused: fenced
    with pytest.raises(Exception, match="taken over"):
        store.checkpoint(Checkpoint(), lease=(first.lease_name, first.token, 30))
    assert store.release_shard(second, state="done", ready_at=0) is True


def test_s3_run_lease_and_shard_leases_exclude_each_other(store: Store) -> None:
    held = store.claim_shard(worker="w1", host="h", pid=1, ttl=30)
    assert held is not None
    assert [r.owner for r in store.fence_shards("r1")] == ["w1"]  # agac run must wait
    store.release_shard(held, state="todo", ready_at=0)
    assert store.fence_shards("r1") == []
    store.acquire_lease("run:r1", host="h", pid=99, ttl=30)
    assert store.claim_shard(worker="w1", host="h", pid=1, ttl=30) is None  # the run is owned


def test_rate_window_is_shared_and_slides(store: Store) -> None:
    # The window is the database's clock: 3 s, so that four takes fall in one window even
    # on a loaded machine (the slide itself then costs one real wait).
    for _ in range(3):
        assert store.rate_take("m|rpm=3", window=3.0, rpm=3, tpm=None, tokens=10) == 0.0
    wait = store.rate_take("m|rpm=3", window=3.0, rpm=3, tpm=None, tokens=10)
    assert 0.0 < wait <= 3.0
    time.sleep(wait + 0.05)
    assert store.rate_take("m|rpm=3", window=3.0, rpm=3, tpm=None, tokens=10) == 0.0
    # tokens per minute: a take that would cross the cap waits
    assert store.rate_take("m|tpm", window=3.0, rpm=None, tpm=100, tokens=80) == 0.0
    assert store.rate_take("m|tpm", window=3.0, rpm=None, tpm=100, tokens=30) > 0.0
