"""The store's part of docs/python.md, on SQLite and PostgreSQL: the rows a results table reads
a range of records at a time, and undoing the admission of a run that never started."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agac.store.repository import Store
from agac.store.rows import Checkpoint, EventRow, OutcomeRow, UsageRow
from agac.store.values import RunSettings


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store(store_url)
    yield opened
    opened.close()


def _run(store: Store, run_id: str) -> None:
    rows = (
        {
            "seq": i,
            "key": f"k{i}",
            "file": "records",
            "n": i + 1,
            "line": i + 1,
            "payload": f'{{"text": "t{i}"}}',
            "reason": None,
            "error": None,
        }
        for i in range(5)
    )
    if not store.snapshot_complete("snap"):
        store.write_snapshot("snap", [{"file": "records", "start": 0, "count": 5}], rows)
    store.create_run(
        id=run_id,
        workflow="wf",
        workflow_path="workflows/wf.yml",
        retry_of=None,
        config={},
        config_hash="h",
        snapshot_id="snap",
        fresh=False,
        settings=RunSettings(),
        tenant="default",
    )


def _outcome(run_id: str, seq: int, key: str, action: str = "a") -> OutcomeRow:
    return OutcomeRow(
        run_id, action, key, seq, "answered", None, None, "called", None, '{"x": 1}', 1, time.time()
    )


def test_results_between_reads_a_range_of_records_and_their_outcomes(store: Store) -> None:
    _run(store, "r1")
    store.checkpoint(
        Checkpoint(
            outcomes=[
                _outcome("r1", 1, "k1"),
                _outcome("r1", 2, "k2/0"),
                _outcome("r1", 2, "k2/1"),
                _outcome("r1", 4, "k4"),
            ]
        )
    )
    records, outcomes = store.results_between("r1", "snap", 1, 3)
    assert [(r.seq, r.key) for r in records] == [(1, "k1"), (2, "k2")]
    assert sorted((o.seq, o.unit_key, o.status, o.output) for o in outcomes) == [
        (1, "k1", "answered", '{"x": 1}'),
        (2, "k2/0", "answered", '{"x": 1}'),
        (2, "k2/1", "answered", '{"x": 1}'),
    ]
    with_payloads, _ = store.results_between("r1", "snap", 0, 1, payloads=True)
    assert with_payloads[0].payload == '{"text": "t0"}' and with_payloads[0].reason is None


def test_discard_run_undoes_an_admission_that_never_started(store: Store) -> None:
    _run(store, "r1")
    store.checkpoint(
        Checkpoint(
            outcomes=[_outcome("r1", 0, "k0")],
            events=[EventRow("r1", "run_admitted", None, None, "{}", time.time())],
        )
    )
    token = store.acquire_lease("run:r1", host="h", pid=1, ttl=30)
    assert store.discard_run("r1", token) is True
    assert store.get_run("r1") is None and store.open_run("wf", tenant="default") is None
    assert store.results_between("r1", "snap", 0, 5)[1] == []
    assert store.snapshot_complete("snap")  # the snapshot is shared: kept


def test_discard_run_refuses_a_run_that_paid_for_something(store: Store) -> None:
    _run(store, "r2")
    store.checkpoint(
        Checkpoint(
            usage=[
                UsageRow(
                    "r2",
                    "a",
                    "k0",
                    1,
                    "llm",
                    "mock",
                    "m",
                    "live",
                    1,
                    0,
                    0,
                    1,
                    0.0,
                    1.0,
                    "succeeded",
                    None,
                    None,
                    time.time(),
                )
            ]
        )
    )
    token = store.acquire_lease("run:r2", host="h", pid=1, ttl=30)
    assert store.discard_run("r2", token) is False
    assert store.get_run("r2") is not None
