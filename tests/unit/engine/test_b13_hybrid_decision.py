"""B13: the one decision for a unit of a batch action that went live — sent, not batched
or left waiting, unless this run already read an answer for it from a batch."""

from __future__ import annotations

from agac.engine.decision import CALL, NOT_YET, Need, Pending, Settle, Stage, UnitFacts, decide
from agac.store.values import BatchItem

RUN = "r1"
FP = "f" * 64


def _item(status: str, batch_state: str | None, collected_by: str | None = None) -> BatchItem:
    key = "staged:r1:classify:a.jsonl" if batch_state is None else "agac_1"
    return BatchItem(
        key,
        "r0a1",
        "wf",
        "classify",
        "k",
        "a.jsonl",
        FP,
        1,
        "{}",
        status,
        None,
        None,
        batch_state=batch_state,
        batch_run=RUN if batch_state else None,
        collected_by=collected_by,
    )


def _facts(*items: BatchItem, live: bool) -> UnitFacts:
    return UnitFacts(RUN, batch=True, items=items, fingerprint=FP, stored=None, live=live)


def test_b13_a_unit_still_in_a_cancelled_batch_is_sent_live() -> None:
    waiting = _item("pending", "cancelling")
    assert isinstance(decide(_facts(waiting, live=False)), Pending)
    assert decide(_facts(waiting, live=True)) == CALL


def test_b13_a_staged_unit_is_sent_live_not_batched() -> None:
    staged = _item("pending", None)
    assert isinstance(decide(_facts(staged, live=False)), Pending)
    assert decide(_facts(staged, live=True)) == CALL
    assert isinstance(decide(_facts(live=False)), Stage)
    assert decide(_facts(live=True)) == CALL


def test_b13_a_unit_failed_in_the_cancelled_batch_is_sent_live() -> None:
    cancelled = _item("failed", "cancelled", collected_by=RUN)
    assert isinstance(decide(_facts(cancelled, live=False)), Settle)
    assert decide(_facts(cancelled, live=True)) == CALL


def test_b13_an_answer_read_from_the_cancelled_batch_is_used() -> None:
    read = _item("succeeded", "collected", collected_by=RUN)
    facts = _facts(read, live=True)
    facts.fingerprint = NOT_YET
    assert decide(facts) == Need("own_answer")
    facts.own_answer = '{"label": "a"}'
    settled = decide(facts)
    assert isinstance(settled, Settle) and settled.status == "answered"
    assert settled.origin == "call"
