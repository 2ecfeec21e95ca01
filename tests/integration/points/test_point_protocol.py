"""The storage-point protocol (docs/guarantees.md, Storage points, O1–O5) in process, on S3 (moto) and a directory.

Each "machine" is a cache folder: two PointStores with different caches are two machines.
moto checks If-Match/If-None-Match but does not lock between the check and the write; the
suite reaches it through a proxy that writes one key at a time (points_support), so the race
tests here prove the protocol's logic on any machine, never moto's atomicity.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from points_support import Point

from agac.errors import LeaseHeld, LeaseTaken, StoreError
from agac.jsontext import dumps
from agac.store.points.head import Head
from agac.store.points.objects import open_objects
from agac.store.points.store import PointStore
from agac.store.rows import Checkpoint


def _open(point: Point, machine: Path, **kw: Any) -> PointStore:
    return PointStore(
        point.url, kw.pop("options", None), environ={"XDG_CACHE_HOME": str(machine)}, **kw
    )


def _event(i: int) -> dict[str, Any]:
    return {
        "run_id": "r1",
        "kind": "note",
        "action": None,
        "unit_key": f"k{i}",
        "data": dumps({"i": i}),
        "created_at": time.time(),
    }


def _commit(store: PointStore, i: int, *, durable: bool = True) -> None:
    store.checkpoint(Checkpoint(events=[_event(i)]))
    if durable:
        ticket = store.durability_ticket()
        assert ticket is not None
        ticket.result(timeout=240)


def _events(store: PointStore) -> list[str]:
    return [e.unit_key for e in store.iter_events("r1", 0, limit=10_000)]


def test_o1_working_copy_in_cache_wal_shipped_as_segments_named_by_head(
    point: Point, tmp_path: Path
) -> None:
    store = _open(point, tmp_path / "m1")
    try:
        assert store.replica is not None
        assert store.replica.db_path.is_relative_to(tmp_path / "m1" / "agac" / "points")
        with store.engine.connect() as conn:  # on every pooled connection
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
        for i in range(3):
            _commit(store, i)
        head = point.head()
        assert head["owner"]["pid"] > 0 and head["snapshot"] is not None
        named = [f"log/{g['id']}/{n:08d}" for g in head["log"] for n in range(1, g["segments"] + 1)]
        assert named and set(named) <= set(point.object_keys())
        # the durable copy restores on another machine while the owner still runs
        reader = _open(point, tmp_path / "m2", writes=False)
        try:
            assert _events(reader) == ["k0", "k1", "k2"]
        finally:
            reader.close()
    finally:
        store.close()
    head = point.head()
    assert head["owner"] is None  # handed back on close
    again = _open(point, tmp_path / "m1")
    try:
        assert again.restored is None  # a clean copy of what head names is reused
        assert _events(again) == ["k0", "k1", "k2"]
    finally:
        again.close()


def test_o2_one_owner_a_second_machine_is_refused_naming_it(point: Point, tmp_path: Path) -> None:
    first = _open(point, tmp_path / "m1")
    try:
        with pytest.raises(LeaseHeld) as held:
            _open(point, tmp_path / "m2")
        assert held.value.exit_code == 75
        assert f"pid {first.replica.owner.pid}" in held.value.message  # type: ignore[union-attr]
    finally:
        first.close()
    second = _open(point, tmp_path / "m2")
    second.close()


def test_o2_concurrent_creators_of_a_new_point_one_owns(point: Point, tmp_path: Path) -> None:
    """Both find no head and create it with If-None-Match: * at once; one create wins and
    the other judges the winner's head (the logic, not moto's atomicity, is under test)."""
    results: dict[int, Any] = {}
    barrier = threading.Barrier(2)

    def contend(n: int) -> None:
        barrier.wait()
        try:
            results[n] = _open(point, tmp_path / f"m{n}")
        except LeaseHeld as exc:
            results[n] = exc

    threads = [threading.Thread(target=contend, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    owners = [r for r in results.values() if isinstance(r, PointStore)]
    refused = [r for r in results.values() if isinstance(r, LeaseHeld)]
    assert len(owners) == 1 and len(refused) == 1
    owners[0].close()


def test_o2_412_on_head_means_lease_lost_and_nothing_more_is_written(
    point: Point, tmp_path: Path
) -> None:
    store = _open(point, tmp_path / "m1")
    try:
        _commit(store, 0)
        # Another process takes the point: it replaces head with If-Match on the ETag it read.
        objects = open_objects(point.url)
        stored = objects.get("head")
        assert stored is not None
        head = Head.decode(stored.data, point.url)
        taker = head.owner.__class__("othermachine0", "other-host", 4242)  # type: ignore[union-attr]
        objects.replace("head", head.next(owner=taker).encode(), stored.etag)
        store.checkpoint(Checkpoint(events=[_event(1)]))  # local commit: slots are released here
        ticket = store.durability_ticket()
        assert ticket is not None
        with pytest.raises(LeaseTaken) as lost:
            ticket.result(timeout=240)
        assert lost.value.exit_code == 75
        assert "pid 4242 on other-host" in lost.value.message
        with pytest.raises(LeaseTaken):  # every later transaction is refused
            store.checkpoint(Checkpoint(events=[_event(2)]))
        assert point.head()["owner"]["pid"] == 4242
    finally:
        store.close()  # does not hand back what it no longer owns
    assert point.head()["owner"]["pid"] == 4242


def test_o2_lease_expiry_is_judged_by_the_servers_clock(point: Point, tmp_path: Path) -> None:
    # 6 s: the second machine's first try comes within the lease even on a loaded machine
    options = {"lease_ttl": 6}
    first = _open(point, tmp_path / "m1", options=options)
    assert first.replica is not None
    paused_at = time.monotonic()  # no later than its last renewal (the commit's head)
    _commit(first, 0)
    first.replica.stop_quietly()  # paused: it renews nothing from now on
    with pytest.raises(LeaseHeld):  # its pid is alive on this host: wait for the lease
        _open(point, tmp_path / "m2", options=options)
    second = None
    while second is None:
        try:
            second = _open(point, tmp_path / "m2", options=options)
        except LeaseHeld:
            time.sleep(0.3)
    # taken only once a lease (6 s, plus a second for Last-Modified's resolution) had passed
    assert time.monotonic() - paused_at >= 6.0
    try:
        assert _events(second) == ["k0"]
        with pytest.raises(LeaseTaken):  # the paused owner learns of it at its next write
            first.checkpoint(Checkpoint(events=[_event(9)]))
    finally:
        first.close()
        second.close()


def test_o3_a_local_copy_behind_head_is_discarded_and_restored(
    point: Point, tmp_path: Path
) -> None:
    a = _open(point, tmp_path / "a")
    _commit(a, 0)
    a.close()
    b = _open(point, tmp_path / "b")
    assert b.restored is not None  # an empty disk: restored
    _commit(b, 1)
    b.close()
    again = _open(point, tmp_path / "a")
    try:
        assert again.restored is not None  # a's copy is behind head: discarded
        assert _events(again) == ["k0", "k1"]
    finally:
        again.close()


def test_o3_torn_segment_ends_the_log_there(point: Point, tmp_path: Path) -> None:
    store = _open(point, tmp_path / "m1")
    for i in range(3):
        _commit(store, i)
    store.close()  # no run ended and the log is short: no compaction
    head = point.head()
    segments = [f"log/{g['id']}/{n:08d}" for g in head["log"] for n in range(1, g["segments"] + 1)]
    assert len(segments) >= 3
    torn = segments[-2]  # k1's segment; k2's comes after it
    body = point.read(torn)
    point.write(torn, body[: len(body) // 2])
    reader = _open(point, tmp_path / "m2", writes=False)
    try:
        assert _events(reader) == ["k0"]
        assert any(torn in note for note in reader.notes)
    finally:
        reader.close()
    owner = _open(point, tmp_path / "m3")
    try:
        assert _events(owner) == ["k0"]
        # head no longer names the torn log: a new snapshot of what was restored
        assert point.head()["log"] == [] or torn not in json.dumps(point.head()["log"])
        assert torn not in point.object_keys()
    finally:
        owner.close()


def test_o4_compaction_past_a_size_deletes_old_objects_after_head_names_the_snapshot(
    point: Point, tmp_path: Path
) -> None:
    store = _open(point, tmp_path / "m1", options={"snapshot_after_mb": 0.02})
    assert store.replica is not None
    calls: list[tuple[str, str]] = []
    objects = store.replica.objects
    real_put, real_replace, real_delete = objects.put, objects.replace, objects.delete

    def put(key: str, data: bytes) -> None:
        calls.append(("put", key))
        real_put(key, data)

    def replace(key: str, data: bytes, etag: str) -> str:
        calls.append(("head", json.loads(data)["snapshot"]["key"]))
        return real_replace(key, data, etag)

    def delete(keys: Any) -> None:
        calls.extend(("delete", k) for k in keys)
        real_delete(keys)

    objects.put, objects.replace, objects.delete = put, replace, delete  # type: ignore[method-assign]
    first_snapshot = point.head()["snapshot"]["key"]
    try:
        for i in range(40):
            store.checkpoint(Checkpoint(events=[{**_event(i), "data": dumps({"pad": "x" * 2000})}]))
        _commit(store, 99)
        deadline = time.monotonic() + 30
        while point.head()["snapshot"]["key"] == first_snapshot and time.monotonic() < deadline:
            _commit(store, 100)
        new_snapshot = point.head()["snapshot"]["key"]
        assert new_snapshot != first_snapshot
        named_at = calls.index(("head", new_snapshot))
        assert (
            calls.index(("put", new_snapshot)) < named_at < calls.index(("delete", first_snapshot))
        )
        assert first_snapshot not in point.object_keys()
    finally:
        store.close()


def test_o5_checkpoints_are_coalesced_to_about_ten_a_second(
    s3_point: Point, tmp_path: Path
) -> None:
    store = _open(s3_point, tmp_path / "m1")
    try:
        assert s3_point.proxy is not None
        s3_point.proxy.log.clear()
        started = time.time()
        i = 0
        # Commits for two seconds, and at least 100 of them however slow the machine is.
        while time.time() - started < 2.0 or i < 100:
            store.checkpoint(Checkpoint(events=[_event(i)]))
            i += 1
            time.sleep(0.002)
        _commit(store, i)
        assert i > 20  # many more commits than the ~20 checkpoints the interval allows
    finally:
        store.close()
    writes = [r for r in s3_point.proxy.writes() if r.at < started + 2.0]
    per_second: dict[int, int] = {}
    for r in writes:
        per_second[int(r.at)] = per_second.get(int(r.at), 0) + 1
    assert max(per_second.values()) <= 20, per_second


def test_o5_a_failed_write_fails_closed(point: Point, tmp_path: Path) -> None:
    options = {"max_retries": 1, "retry_timeout": 2} if point.kind == "s3" else None
    store = _open(point, tmp_path / "m1", options=options)
    _commit(store, 0)
    point.fail_writes_now()
    try:
        store.checkpoint(Checkpoint(events=[_event(1)]))  # committed locally
        ticket = store.durability_ticket()
        assert ticket is not None
        with pytest.raises(StoreError) as failed:
            ticket.result(timeout=240)
        assert not isinstance(failed.value, LeaseTaken) and failed.value.exit_code == 1
        with pytest.raises(StoreError):  # nothing more is written (S2)
            store.checkpoint(Checkpoint(events=[_event(2)]))
        store.close()  # the failure was reported already; close does not hide it or hang
    finally:
        point.heal()
    again = _open(point, tmp_path / "m1")  # same machine: its copy is dirty, so restored
    try:
        assert again.restored is not None
        assert _events(again) == ["k0"]  # the last good checkpoint
    finally:
        again.close()


def test_o3_a_reading_command_owns_nothing_and_cannot_write(point: Point, tmp_path: Path) -> None:
    empty = _open(point, tmp_path / "m0", writes=False)  # nothing stored yet: an empty store
    try:
        assert empty.list_runs() == []
    finally:
        empty.close()
    owner = _open(point, tmp_path / "m1")
    try:
        _commit(owner, 0)
        reader = _open(point, tmp_path / "m2", writes=False)  # while the owner runs
        try:
            assert _events(reader) == ["k0"]
            with pytest.raises(StoreError, match="readonly"):
                reader.checkpoint(Checkpoint(events=[_event(1)]))
        finally:
            reader.close()
        assert point.head()["owner"]["pid"] == owner.replica.owner.pid  # type: ignore[union-attr]
    finally:
        owner.close()
