"""Each bulk outcome writer of the store does what its pure function in
engine/transitions.py says, on SQLite and PostgreSQL: for any outcomes of a run (every
bucket, halting skips, failures a cancel caused, answers), the rows the SQL writes are
the rows the function gives (the time aside where the writer stamps it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agac.engine.transitions import Closing, abandon, carry, carry_for_retry, close_unit
from agac.reasons import REASONS
from agac.store.repository import Store
from agac.store.rows import Checkpoint, OutcomeRow
from agac.store.values import OutcomeRecord, RunSettings

WF, TENANT = "wf", "default"
ACTIONS = ("extract", "classify", "summarize")
SKIPS = sorted(c for c, r in REASONS.items() if r.bucket == "skipped")
FAILURES = sorted(c for c, r in REASONS.items() if r.bucket == "failed")

OUTCOME = st.one_of(
    st.tuples(st.just("answered"), st.none()),
    st.tuples(st.just("skipped"), st.sampled_from(SKIPS)),
    st.tuples(st.just("failed"), st.sampled_from(FAILURES)),
)
UNIT = st.tuples(st.sampled_from(ACTIONS), st.sampled_from(["k0", "k1", "k2/0", "k2/1"]))
OUTCOMES = st.dictionaries(UNIT, st.tuples(OUTCOME, st.integers(0, 3)), max_size=12)
EXAMPLES = {"sqlite": 40, "postgres": 10}
SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    yield s
    s.close()


def _kind(store: Store) -> str:
    return "sqlite" if store.url.startswith("sqlite") else "postgres"


def _run(store: Store, state: str | None = None) -> str:
    """A new run of the workflow (final in ``state`` when given)."""
    run_id = f"r{uuid.uuid4().hex[:12]}"
    store.create_run(
        id=run_id,
        workflow=WF,
        workflow_path="wf.yml",
        retry_of=None,
        config={},
        config_hash="h",
        snapshot_id="snap",
        fresh=False,
        settings=RunSettings(),
        tenant=TENANT,
    )
    if state is not None:
        store.end_run(run_id, state)
    return run_id


def _write(store: Store, run_id: str, outcomes: dict[tuple[str, str], Any]) -> None:
    rows = [
        OutcomeRow(
            run_id,
            action,
            key,
            int(key[1]),
            status,
            reason,
            f"detail of {action} {key}" if reason else None,
            "call",
            f"fp-{action}-{key}" if status != "skipped" else None,
            '{"x": 1}' if status == "answered" else None,
            attempts,
            5.0,
            '{"c": true}' if status == "answered" else None,
        )
        for (action, key), ((status, reason), attempts) in outcomes.items()
    ]
    store.checkpoint(Checkpoint(outcomes=rows))


def _rows(store: Store, run_id: str) -> set[OutcomeRecord]:
    return set(store.outcomes_between(run_id, 0, 10))


def _unstamped(row: OutcomeRecord, rewritten: dict[tuple[str, str, str], Any]) -> OutcomeRecord:
    if (row.run_id, row.action, row.unit_key) in rewritten:
        return row._replace(updated_at=0.0)
    return row


def test_i37_carry_run_outcomes_is_carry(store: Store) -> None:
    """R1: ``Store.carry_run_outcomes`` writes what :func:`carry` keeps of each outcome."""

    @settings(max_examples=EXAMPLES[_kind(store)], **SETTINGS)
    @given(
        OUTCOMES,
        st.sampled_from(["succeeded", "failed", "cancelled"]),
        st.sets(st.sampled_from(ACTIONS), max_size=2),
    )
    def check(outcomes: dict[tuple[str, str], Any], state: str, redo: set[str]) -> None:
        src = _run(store)
        _write(store, src, outcomes)
        store.end_run(src, state)
        dst = _run(store)
        uncarried = store.failures_not_carried(src)
        n = store.carry_run_outcomes(src, dst, sorted(redo))
        expected = set()
        for row in _rows(store, src):
            kept = carry(row, uncarried=uncarried, redo=redo)
            if kept is not None:
                expected.add(
                    row._replace(
                        run_id=dst, origin=kept.origin, attempts=kept.attempts, updated_at=0.0
                    )
                )
        store.end_run(dst, "succeeded")
        assert {r._replace(updated_at=0.0) for r in _rows(store, dst)} == expected
        assert n == len(expected)

    check()


def test_i37_copy_outcomes_is_carry_for_retry(store: Store) -> None:
    """R2: ``Store.copy_outcomes`` writes what :func:`carry_for_retry` keeps: every outcome
    but the reopened units, an answer ``reused`` (one origin with R1), attempts kept."""

    @settings(max_examples=EXAMPLES[_kind(store)], **SETTINGS)
    @given(OUTCOMES, st.sets(UNIT, max_size=6))
    def check(outcomes: dict[tuple[str, str], Any], reopened: set[tuple[str, str]]) -> None:
        src = _run(store)
        _write(store, src, outcomes)
        store.end_run(src, "failed")
        dst = _run(store)
        n = store.copy_outcomes(src, dst, reopened)
        store.end_run(dst, "succeeded")
        expected = set()
        for row in _rows(store, src):
            kept = carry_for_retry(row, reopened)
            if kept is not None:
                attempts = row.attempts if kept.attempts is None else kept.attempts
                expected.add(row._replace(run_id=dst, origin=kept.origin, attempts=attempts))
        assert _rows(store, dst) == expected
        assert n == len(expected)

    check()


def test_i37_end_batch_unread_is_abandon(store: Store) -> None:
    """B0/B7: a batch given up — ``Store.end_batch_unread`` rewrites, of the units ended
    runs left waiting (``Store.waiting_outcomes``), what :func:`abandon` says, and no other
    outcome."""

    @settings(max_examples=EXAMPLES[_kind(store)], **SETTINGS)
    @given(
        st.lists(OUTCOMES, min_size=1, max_size=3),
        st.sampled_from(ACTIONS),
        st.sets(st.sampled_from(["k0", "k1", "k2/0", "k2/1"]), max_size=3),
    )
    def check(runs: list[dict[tuple[str, str], Any]], action: str, pending: set[str]) -> None:
        since = store.clock.time()
        ids = []
        for outcomes in runs:
            run_id = _run(store)
            _write(store, run_id, outcomes)
            store.end_run(run_id, "cancelled")
            ids.append(run_id)
        before = {i: _rows(store, i) for i in ids}
        waiting = [
            (r.run_id, r.action, r.unit_key)
            for r in store.waiting_outcomes(WF, tenant=TENANT, since=since)
            if r.run_id in ids
        ]
        # Each run's graph: the actions in order, each depending on the one before.
        downstream = {i: set(ACTIONS[ACTIONS.index(action) + 1 :]) for i in ids}
        rewrites = abandon(action, pending, waiting, downstream)
        store.end_batch_unread(
            f"agac_{uuid.uuid4().hex[:8]}",
            reason="batch_abandoned",
            detail="given up",
            tenant=TENANT,
            outcomes=rewrites,
        )
        new = {(r.run_id, r.action, r.unit_key): r for r in rewrites}
        for i in ids:
            expected = set()
            for row in before[i]:
                w = new.get((row.run_id, row.action, row.unit_key))
                if w is not None:
                    row = row._replace(
                        status=w.status, reason=w.reason, detail="given up", updated_at=0.0
                    )
                expected.add(row)
            # The writer stamps a rewritten row with the time; the others keep theirs.
            assert {_unstamped(r, new) for r in _rows(store, i)} == expected

    check()


def test_i37_close_units_is_close_unit(store: Store) -> None:
    """A run ending early — ``Store.close_units`` writes, for each unit without an outcome,
    what :func:`close_unit` says (origin ``call``, no fingerprint, no attempts), and leaves
    every outcome the run already has as it was."""
    ancestors = {a: frozenset(ACTIONS[: ACTIONS.index(a)]) for a in ACTIONS}

    @settings(max_examples=EXAMPLES[_kind(store)], **SETTINGS)
    @given(
        OUTCOMES,
        st.sets(UNIT, min_size=1, max_size=8),
        st.sampled_from(["cancelled", "deadline", "run_ended"]),
        st.sets(UNIT, max_size=3),
        st.sets(UNIT, max_size=3),
        st.sets(UNIT, max_size=3),
        st.sets(st.sampled_from(ACTIONS), max_size=2),
    )
    def check(
        outcomes: dict[tuple[str, str], Any],
        units: set[tuple[str, str]],
        reason: str,
        unknown: set[tuple[str, str]],
        cancelled: set[tuple[str, str]],
        out: set[tuple[str, str]],
        waiting: set[str],
    ) -> None:
        run_id = _run(store)
        _write(store, run_id, outcomes)
        before = _rows(store, run_id)
        closing = Closing(reason, "it stopped", ancestors, unknown=unknown, cancelled=cancelled)
        batches = {u: f"waiting on batch b-{u[0]}" for u in out}
        ended = [(int(u[1][1]), close_unit(closing, u, waiting, batches)) for u in sorted(units)]
        store.close_units(run_id, ended)
        store.end_run(run_id, "cancelled")
        expected = set(before)
        for seq, o in ended:
            if (o.action, o.unit_key) not in outcomes:
                expected.add(OutcomeRecord(run_id, *o[:2], seq, *o[2:], "call", None, None, 0, 0.0))
        new = {(run_id, *u) for u in units if u not in outcomes}
        assert {_unstamped(r, new) for r in _rows(store, run_id)} == expected

    check()
