"""B14: the one decision for a unit of a batch tool loop — an item read ``turn`` (its
answer asked for tool calls) stages the next round, whose tries have the action's
attempts of their own; a turn never settles the unit, nor is it read as an answer."""

from __future__ import annotations

from agac.engine.decision import (
    CALL,
    ROUND_SPAN,
    Pending,
    Settle,
    Stage,
    UnitFacts,
    decide,
    round_try,
)
from agac.store.values import BatchItem

RUN = "r1"
FP = "f" * 64


def _item(attempt: int, status: str, *, staged: bool = False) -> BatchItem:
    return BatchItem(
        "staged:r1:reply:a.jsonl" if staged else f"agac_{attempt}",
        f"r0a{attempt}",
        "wf",
        "reply",
        "k",
        "a.jsonl",
        FP,
        attempt,
        "{}",
        status,
        None,
        None,
        batch_state=None if staged else "collected",
        batch_run=None if staged else RUN,
        collected_by=None if staged else RUN,
    )


def _decide(*items: BatchItem, live: bool = False) -> object:
    facts = UnitFacts(RUN, batch=True, items=items, fingerprint=FP, stored=None, live=live)
    return decide(facts)


def test_i40_b14_a_turn_stages_the_first_try_of_the_next_round() -> None:
    assert _decide() == Stage(1)
    assert _decide(_item(1, "turn")) == Stage(ROUND_SPAN + 1, continues=True)
    assert _decide(_item(1, "retry"), _item(2, "turn")) == Stage(ROUND_SPAN + 1, continues=True)
    second = _item(ROUND_SPAN + 1, "turn")
    assert _decide(_item(1, "turn"), second) == Stage(2 * ROUND_SPAN + 1, continues=True)


def test_i40_b14_a_round_retries_with_attempts_of_its_own() -> None:
    retried = _decide(_item(1, "turn"), _item(ROUND_SPAN + 1, "retry"))
    assert retried == Stage(ROUND_SPAN + 2, continues=True)
    assert round_try(ROUND_SPAN + 2) == 2 and round_try(1) == 1 and round_try(ROUND_SPAN) == 100
    failed = _decide(_item(1, "turn"), _item(ROUND_SPAN + 1, "failed"))
    assert isinstance(failed, Settle) and failed.status == "failed"


def test_i40_b14_a_staged_round_waits_and_a_live_action_sends_the_loop() -> None:
    staged = _item(ROUND_SPAN + 1, "pending", staged=True)
    assert isinstance(_decide(_item(1, "turn"), staged), Pending)
    assert _decide(_item(1, "turn"), live=True) == CALL
