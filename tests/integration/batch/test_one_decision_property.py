"""One decision, two writers: the units a batch read answers are written in one SQL
statement (``Store.settle_read_items``) or, unit by unit, by the engine — the unit's
decision (engine/decision.py) written through the outcome writer and the store gateway.
For the same store — units with histories of batch items across this run's batches and an
earlier run's, answers stored or not, records valid or not, outcomes already written or
not — both must write the same outcome rows (the time aside)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agac.clock import ManualClock
from agac.engine.decision import NOT_YET, Need, Settle, UnitFacts, decide, own_item
from agac.engine.outcomes.gateway import StoreGateway
from agac.engine.outcomes.writer import OutcomeWriter, Progress
from agac.engine.transitions import READ, ReadItem, read_batch
from agac.engine.walk.units import settle
from agac.providers.pricing import PriceTable
from agac.store.batches import staged_key
from agac.store.repository import Store
from agac.store.rows import AnswerRow, BatchIntent, Checkpoint, OutcomeRow, StagedItem
from agac.store.values import RunSettings

RUN, EARLIER, WF, ACTION, FILE = "run1", "run0", "wf", "classify", "in.jsonl"

# A unit's history in one run: the status of each attempt's item (each in its own batch).
# Only the last attempt may be anything but ``retry``: an answered or failed item ends it.
LAST = st.sampled_from(["succeeded", "failed", "retry", "pending"])
HISTORY = st.tuples(st.integers(0, 2), LAST).map(lambda t: ["retry"] * t[0] + [t[1]])
UNIT = st.fixed_dictionaries(
    {
        "mine": st.one_of(st.just([]), HISTORY),
        "earlier": st.one_of(st.just([]), HISTORY),
        "same_request": st.booleans(),  # the earlier run asked the same request
        "invalid": st.booleans(),
        "settled": st.booleans(),  # this run already has its outcome
        "answer_kept": st.booleans(),  # an answer stored for a succeeded item (gc may prune it)
    }
)


@contextlib.contextmanager
def _fresh(kind: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty store URL: a SQLite file, or a PostgreSQL database dropped after."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as root:
            yield f"sqlite:///{root}/agac.db"
        return
    server = request.getfixturevalue("postgres_url")
    name = f"agac_p_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        base, sep, query = server.partition("?")
        yield f"{base.rsplit('/', 1)[0]}/{name}{sep}{query}"
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _store(url: str, units: list[dict[str, Any]]) -> Store:
    """A store holding the scenario: records, both runs, their batches (read, except a
    pending last attempt's), items, answers and outcomes."""
    store = Store(url, clock=ManualClock())
    rows = [
        {
            "seq": i,
            "key": f"k{i}",
            "file": FILE,
            "n": i + 1,
            "line": i + 1,
            "payload": '{"x": 1}',
            "reason": "invalid_input" if u["invalid"] else None,
            "error": "bad line" if u["invalid"] else None,
        }
        for i, u in enumerate(units)
    ]
    store.write_snapshot("snap", [{"file": FILE, "start": 0, "count": len(units)}], rows)
    for run in (EARLIER, RUN):
        store.create_run(
            id=run,
            workflow=WF,
            workflow_path="wf.yml",
            retry_of=None,
            config={},
            config_hash="h",
            snapshot_id="snap",
            fresh=False,
            settings=RunSettings(),
            tenant="default",
        )
        if run == EARLIER:
            store.end_run(EARLIER, "succeeded")
    answers: list[AnswerRow] = []
    outcomes: list[OutcomeRow] = []
    for i, u in enumerate(units):
        mine = f"fp{i}"
        for run, history in ((EARLIER, u["earlier"]), (RUN, u["mine"])):
            fp = mine if run == RUN or u["same_request"] else f"old{i}"
            for attempt, status in enumerate(history, start=1):
                _item(store, run, attempt, i, fp, status)
                if status == "succeeded" and u["answer_kept"]:
                    answers.append(AnswerRow(fp, "openai", "m", "{}", "{}", f'{{"n": {i}}}', 1.0))
        if u["settled"]:
            outcomes.append(
                OutcomeRow(
                    RUN,
                    ACTION,
                    f"k{i}",
                    i,
                    "skipped",
                    "guard",
                    "set before",
                    "call",
                    None,
                    None,
                    0,
                    1.0,
                )
            )
    store.checkpoint(Checkpoint(answers=answers, outcomes=outcomes))
    return store


def _item(store: Store, run: str, attempt: int, i: int, fp: str, status: str) -> None:
    """One item in its own batch of ``run``: read by that run unless still pending."""
    key = f"agac_{run}_{attempt}_{i}"
    staged = staged_key(run, ACTION, FILE)
    custom = f"r{i}a{attempt}"
    store.stage_items(
        [StagedItem(staged, custom, WF, ACTION, f"k{i}", FILE, fp, attempt, "{}")], tenant="default"
    )
    store.create_intents(
        staged,
        [(BatchIntent(key, WF, ACTION, FILE, 0, "openai", run, 1, 1.0, "default"), [custom])],
    )
    if status == "pending":
        store.update_batch(key, state="submitted", provider_batch_id=f"b_{key}")
        return
    store.update_batch(key, state="collected", provider_batch_id=f"b_{key}", collected_by=run)
    store.set_item_results(
        key,
        [
            (
                custom,
                status,
                None if status == "succeeded" else "truncated",
                None if status == "succeeded" else "cut off",
            )
        ],
    )


def _outcomes(store: Store) -> set[tuple[Any, ...]]:
    rows = store.outcomes_between(RUN, 0, 10_000)
    return {tuple(r._replace(updated_at=0.0)) for r in rows}  # every column but updated_at


def _as_row(unit: tuple[str, str], s: Settle) -> tuple[Any, ...]:
    """A transition's outcome as the columns of its row (but run, seq and time)."""
    return (*unit, s.status, s.reason, s.detail, s.origin, s.fingerprint, s.output_json, s.attempts)


def _by_sql(store: Store) -> None:
    """The batch step's way: each batch this run read, answered in one statement."""
    answered = READ  # the transition's status and origin, as polling passes them
    for b in store.list_batches(WF, tenants=("default",)):
        if b.run_id == RUN and b.collected_by == RUN:
            store.settle_read_items(
                run_id=RUN,
                batch_key=b.key,
                snapshot_id="snap",
                status=answered.status,
                origin=answered.origin,
            )


def _by_engine(store: Store, n: int) -> None:
    """The walk's way: each unit's decision from its items (as prefetched for its shard),
    answered ones written by the outcome writer through the gateway."""
    records = list(store.iter_records("snap", 0, n))
    items = store.unit_items(WF, ACTION, [r.key for r in records], tenant="default")
    settled = {o.unit_key for o in store.outcomes_between(RUN, 0, n)}

    async def go() -> None:
        gateway = StoreGateway(store, None, tenant="default")
        gateway.start()
        out = OutcomeWriter(RUN, gateway, PriceTable({}), Progress([ACTION], n), store.clock)
        rt = SimpleNamespace(name=ACTION)
        try:
            for r in records:
                if r.key in settled:
                    continue  # the walk never decides a unit this run settled
                facts = UnitFacts(
                    RUN,
                    record_reason=r.reason,
                    record_error=r.error,
                    batch=True,
                    items=[i for i in items if i.unit_key == r.key],
                )
                d = decide(facts)
                if d == Need("own_answer"):  # the answer of this run's own item
                    own = own_item(facts.items, RUN)
                    assert own is not None
                    facts.own_answer = await gateway.lookup_answer(own.fingerprint)
                    d = decide(facts)
                if isinstance(d, Settle) and d.status == "answered":
                    await settle(SimpleNamespace(out=out), rt, r, d)
        finally:
            await gateway.close()

    asyncio.run(go())


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_sql_settle_and_the_engine_write_the_same_rows_for_the_same_decisions(
    kind: str, request: pytest.FixtureRequest
) -> None:
    examples = 60 if kind == "sqlite" else 15  # a PostgreSQL database per side and example

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.lists(UNIT, min_size=1, max_size=6))
    def check(units: list[dict[str, Any]]) -> None:
        with _fresh(kind, request) as a, _fresh(kind, request) as b:
            _same_rows(a, b, units)

    check()


def _same_rows(a: str, b: str, units: list[dict[str, Any]]) -> None:
    sql, engine = _store(a, units), _store(b, units)
    try:
        before = _outcomes(sql)
        _by_sql(sql)
        _by_engine(engine, len(units))
        assert _outcomes(sql) == _outcomes(engine)
        written = _outcomes(sql) - before
        # Each unit answered is one whose last item in this run was read with an answer.
        expected = {
            f"k{i}"
            for i, u in enumerate(units)
            if u["mine"][-1:] == ["succeeded"]
            and u["answer_kept"]
            and not u["invalid"]
            and not u["settled"]
        }
        assert {row[2] for row in written} == expected
        # And each is the row the pure transition gives it (engine/transitions.py).
        read = [
            ReadItem(
                ACTION, key, f"fp{key[1:]}", len(units[int(key[1:])]["mine"]), f'{{"n": {key[1:]}}}'
            )
            for key in sorted(expected)
        ]
        assert {_as_row(unit, s) for unit, s in read_batch(read)} == {
            (r[1], r[2], r[4], r[5], r[6], r[7], r[8], r[9], r[10]) for r in written
        }
    finally:
        sql.close()
        engine.close()


def test_the_decision_answers_a_unit_read_from_its_own_item_without_rendering() -> None:
    """The own-item rule needs no fingerprint: the unit is decided before it renders."""
    from agac.store.values import BatchItem

    item = BatchItem(
        "agac_x",
        "r0a1",
        WF,
        ACTION,
        "k0",
        FILE,
        "fp0",
        1,
        "{}",
        "succeeded",
        None,
        None,
        "default",
        "collected",
        RUN,
        RUN,
    )
    facts = UnitFacts(RUN, batch=True, items=[item])
    assert facts.fingerprint is NOT_YET
    assert decide(facts) == Need("own_answer")
    facts.own_answer = '{"n": 0}'
    assert decide(facts) == Settle("answered", None, None, "call", "fp0", 1, '{"n": 0}')
