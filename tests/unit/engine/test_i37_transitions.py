"""The bulk outcome transitions (engine/transitions.py), as pure functions: a run ending
early (the reasons' precedence), carrying outcomes (one origin for a carried answer),
giving up a batch, reading a batch, and a join's skip. Their store writers are held to
them in tests/integration/store/test_i37_store_writers.py and (a batch read)
tests/integration/batch/test_one_decision_property.py."""

from __future__ import annotations

import pytest

from agac.engine.decision import Settle
from agac.engine.transitions import (
    READ,
    Closing,
    JoinInputs,
    ReadItem,
    Rewrite,
    UnitOutcome,
    abandon,
    carry,
    carry_for_retry,
    close_unit,
    join_outcome,
    join_skip,
    read_batch,
)
from agac.engine.values import Settled
from agac.reasons import REASONS, strongest
from agac.store.values import OutcomeRecord

ANCESTORS = {"extract": frozenset(), "classify": frozenset({"extract"})}
UNIT = ("classify", "k0")
CLOSING = Closing("cancelled", "agac cancel", ANCESTORS)

CLOSE_ROWS = [
    ("the stop's reason", CLOSING, set(), {}, ("skipped", "cancelled", "agac cancel")),
    (
        "waiting on a batch still out: batch_outstanding, the batch named",
        CLOSING,
        {"classify"},
        {UNIT: "waiting on batch b1"},
        ("skipped", "batch_outstanding", "agac cancel; waiting on batch b1"),
    ),
    (
        "downstream of a unit waiting on a batch: batch_outstanding",
        CLOSING,
        {"extract"},
        {},
        ("skipped", "batch_outstanding", "agac cancel"),
    ),
    (
        "in a batch cancelled at the provider: failed batch_cancelled, over waiting",
        Closing("cancelled", "agac cancel", ANCESTORS, cancelled={UNIT}),
        {"classify"},
        {UNIT: "waiting on batch b1"},
        ("failed", "batch_cancelled", "agac cancel"),
    ),
    (
        "an effect of unknown outcome: failed effect_unknown, over everything",
        Closing("deadline", "its deadline passed", ANCESTORS, unknown={UNIT}, cancelled={UNIT}),
        {"classify"},
        {UNIT: "waiting on batch b1"},
        ("failed", "effect_unknown", "its deadline passed"),
    ),
]


@pytest.mark.parametrize(
    ("closing", "waiting", "out", "expected"),
    [r[1:] for r in CLOSE_ROWS],
    ids=[r[0] for r in CLOSE_ROWS],
)
def test_i37_close_unit_by_precedence(
    closing: Closing, waiting: set[str], out: dict[tuple[str, str], str], expected: tuple[str, ...]
) -> None:
    assert close_unit(closing, UNIT, waiting, out) == UnitOutcome(*UNIT, *expected)


def test_i37_precedence_orders_what_is_known_above_the_stop() -> None:
    order = ["cancelled", "batch_outstanding", "batch_cancelled", "effect_unknown"]
    assert [REASONS[c].precedence for c in order] == sorted(REASONS[c].precedence for c in order)
    assert len({REASONS[c].precedence for c in order}) == len(order)
    assert strongest(["deadline", "cancelled"]) == "deadline"  # equals: the first given


def _row(status: str, reason: str | None, attempts: int = 2) -> OutcomeRecord:
    return OutcomeRecord(
        "r1", "classify", "k0", 0, status, reason, None, "call", "fp", None, attempts, 1.0
    )  # type: ignore[arg-type]


def test_i37_a_carried_answer_has_one_origin() -> None:
    answered = _row("answered", None)
    carried = carry(answered)
    assert carried is not None and carried.origin == "reused"
    retried = carry_for_retry(answered, set())
    assert retried is not None and retried.origin == "reused"
    for failure in (_row("failed", "refusal"), _row("skipped", "guard")):
        one, two = carry(failure), carry_for_retry(failure, set())
        assert one is not None and two is not None
        assert one.origin == two.origin == "carried"


def test_i37_carry_keeps_what_a_new_run_keeps() -> None:
    assert carry(_row("skipped", "cancelled")) is None  # a halting skip is asked again
    assert carry(_row("failed", "batch_cancelled"), uncarried=("batch_cancelled",)) is None
    assert carry(_row("answered", None), redo=("classify",)) is None
    assert carry(_row("failed", "refusal", 3)) == ("classify", "k0", "carried", 0)
    assert carry_for_retry(_row("failed", "refusal"), {("classify", "k0")}) is None
    kept = carry_for_retry(_row("skipped", "cancelled", 3), set())  # a retry keeps it
    assert kept == ("classify", "k0", "carried", None)  # with the attempts it had


def test_i37_abandon_fails_the_batch_units_and_skips_what_follows() -> None:
    waiting = [
        ("r1", "extract", "k0"),
        ("r1", "classify", "k0"),
        ("r1", "classify", "k1"),
        ("r2", "extract", "k5"),
    ]
    got = abandon("extract", {"k0", "k5/0"}, waiting, {"r1": {"classify"}, "r2": {"classify"}})
    assert got == [
        Rewrite("r1", "extract", "k0", "failed", "batch_abandoned"),
        Rewrite("r1", "classify", "k0", "skipped", "upstream_failed"),
    ]
    assert abandon("extract", set(), waiting, {}) == []


def test_i37_a_join_is_skipped_only_for_a_halting_item() -> None:
    assert join_skip("k0/1", "deadline") == ("deadline", "item k0/1 was not asked: deadline")
    assert join_skip("k0/1", "guard") is None
    assert join_skip("k0/1", "join_atomic") is None


def _items(*states: Settled) -> list[tuple[str, dict[str, Settled]]]:
    return [(f"k0/{i}", {"classify": s}) for i, s in enumerate(states)]


ANSWERED = Settled("answered", output={"label": "a"})
FAILED = Settled("failed", "refusal")
JOIN_ROWS = [
    (
        "every item answered: joined with each output",
        _items(ANSWERED, ANSWERED),
        False,
        False,
        JoinInputs(
            [
                {"key": "k0/0", "index": 0, "output": {"label": "a"}},
                {"key": "k0/1", "index": 1, "output": {"label": "a"}},
            ],
            [],
            [],
        ),
    ),
    (
        "a guard's skip is passed on as skipped",
        _items(ANSWERED, Settled("skipped", "guard")),
        False,
        False,
        JoinInputs(
            [{"key": "k0/0", "index": 0, "output": {"label": "a"}}],
            [],
            [{"key": "k0/1", "index": 1, "reason": "guard"}],
        ),
    ),
    (
        "an item never asked (the run stopped): the join is skipped with its reason",
        _items(ANSWERED, Settled("skipped", "deadline")),
        False,
        False,
        Settle("skipped", "deadline", "item k0/1 was not asked: deadline"),
    ),
    (
        "atomic with a failed item: skipped join_atomic",
        _items(ANSWERED, FAILED),
        True,
        False,
        Settle("skipped", "join_atomic", "1 of 2 items failed (k0/1); failure_policy atomic"),
    ),
    (
        "atomic with a failed item, a tool join: called with nothing fulfilled",
        _items(ANSWERED, FAILED),
        True,
        True,
        JoinInputs(
            [], [{"key": "k0/1", "index": 1, "action": "classify", "reason": "refusal"}], []
        ),
    ),
    (
        "not atomic: the failed item is rejected, the others fulfilled",
        _items(ANSWERED, FAILED),
        False,
        False,
        JoinInputs(
            [{"key": "k0/0", "index": 0, "output": {"label": "a"}}],
            [{"key": "k0/1", "index": 1, "action": "classify", "reason": "refusal"}],
            [],
        ),
    ),
]


@pytest.mark.parametrize(
    ("items", "atomic", "tool", "expected"),
    [r[1:] for r in JOIN_ROWS],
    ids=[r[0] for r in JOIN_ROWS],
)
def test_i37_join_outcome(
    items: list[tuple[str, dict[str, Settled]]],
    atomic: bool,
    tool: bool,
    expected: Settle | JoinInputs,
) -> None:
    assert join_outcome(items, ["classify"], atomic=atomic, tool=tool) == expected


def test_a_batch_read_answers_each_unit_its_item_answered_paid_by_the_run() -> None:
    read = [
        ReadItem("classify", "k0", "fp0", 1, '{"n": 0}'),
        ReadItem("classify", "k1", "fp1", 3, "{}"),
    ]
    assert read_batch(read) == [
        (("classify", "k0"), Settle("answered", None, None, "call", "fp0", 1, '{"n": 0}')),
        (("classify", "k1"), Settle("answered", None, None, "call", "fp1", 3, "{}")),
    ]
    assert (READ.status, READ.origin) == ("answered", "call")  # what the SQL writer is handed
