"""The store's part of the quality loop, on SQLite and PostgreSQL: a run's llm calls read
back in order for a pilot's projection (judge and pairwise calls among them, tools not),
and a verdict written outside a run's engine (``agac compare --judge``) stored with its
ledger row, never a twin of an ordinary call."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agac.store.repository import Store
from agac.store.rows import AnswerRow, Checkpoint, UsageRow
from agac.store.values import RunSettings


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store(store_url)
    yield opened
    opened.close()


def _run(store: Store, run_id: str) -> None:
    if not store.snapshot_complete("snap"):
        store.write_snapshot("snap", [{"file": "records", "start": 0, "count": 0}], iter(()))
    store.create_run(
        id=run_id,
        workflow=f"wf-{run_id}",
        workflow_path=f"workflows/wf-{run_id}.yml",
        retry_of=None,
        config={},
        config_hash="h",
        snapshot_id="snap",
        fresh=False,
        settings=RunSettings(),
        tenant="default",
    )


def _usage(run_id: str, key: str, kind: str, origin: str | None, fp: str) -> UsageRow:
    return UsageRow(
        run_id,
        "a",
        key,
        1,
        kind,
        "openai",
        "gpt-4o-mini",
        "live",
        10,
        0,
        0,
        5,
        0.001,
        1.0,
        "ok",
        None,
        fp,
        time.time(),
        origin,
    )


def test_i38_run_usage_reads_a_runs_llm_calls_in_order(store: Store) -> None:
    _run(store, "r1")
    _run(store, "r2")
    store.checkpoint(
        Checkpoint(
            usage=(
                _usage("r1", "k1", "llm", None, "f1"),
                _usage("r1", "k1", "llm", "judge", "j1"),
                _usage("r1", "k1", "tool", None, "t1"),
                _usage("r2", "k2", "llm", None, "f2"),
                _usage("r1", "k2", "llm", "pairwise", "p1"),
            )
        )
    )

    rows = store.run_usage("r1")

    assert [(r.unit_key, r.origin, r.fingerprint) for r in rows] == [
        ("k1", None, "f1"),
        ("k1", "judge", "j1"),
        ("k2", "pairwise", "p1"),
    ]


def test_i38_a_verdict_is_stored_with_its_ledger_row_and_is_no_twin(store: Store) -> None:
    _run(store, "r1")
    verdict = AnswerRow("p1", "openai", "gpt-4o-mini", "{}", "{}", '{"better": "1"}', 1.0)
    store.checkpoint(
        Checkpoint(answers=(verdict,), usage=(_usage("r1", "k1", "llm", "pairwise", "p1"),))
    )
    # Written again (a second compare reading it back would not, but a race might): kept once.
    store.checkpoint(Checkpoint(answers=(verdict._replace(output='{"better": "2"}'),)))

    assert store.get_answers(["p1"], tenant="default") == {"p1": '{"better": "1"}'}
    assert store.twin_usage(["p1"], tenant="default") == {}
