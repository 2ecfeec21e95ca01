"""Units the store knows nothing of yet are decided alike (engine/decision.py,
``first_seen``): a pass over a shard's batch units (``BatchUnits.settle_ahead``) decides
one of them and takes that decision for every other with the same facts. That holds only
while :func:`decide` reads such a unit's fingerprint to compare it with what the unit
does not have — no batch item, no failure carried, no answer stored. These properties
hold it to that, over every other fact the decision reads."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agac.engine.decision import NOT_YET, UnitFacts, decide, first_seen
from agac.engine.ports import CarriedFailure
from agac.store.values import BatchItem

RUN = "r2"

# Every fact a unit's decision reads besides its own history, drawn freely.
FLAGS = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["llm", "tool"]),
        "reads_records": st.booleans(),
        "stopping": st.booleans(),
        "guard": st.sampled_from([None, True, False]),
        "guard_text": st.sampled_from([None, "source.x"]),
        "action_failed": st.sampled_from([None, "the provider refused the key"]),
        "action_paused": st.sampled_from([None, "unreachable"]),
        "gated": st.booleans(),
        "effect": st.booleans(),
        "cache": st.booleans(),
        "fresh": st.booleans(),
        "batch": st.booleans(),
        "deadline_passed": st.booleans(),
        "budget_exhausted": st.booleans(),
        "live": st.booleans(),
        "held": st.booleans(),
    }
)
FINGERPRINT = st.text("0123456789abcdef", min_size=64, max_size=64)


def _facts(flags: dict[str, Any], fingerprint: str, **known: Any) -> UnitFacts:
    return UnitFacts(RUN, fingerprint=fingerprint, stored=None, **flags, **known)


@given(FLAGS, FINGERPRINT, FINGERPRINT)
def test_i42_first_seen_units_decided_alike(flags: dict[str, Any], one: str, other: str) -> None:
    """Two first-seen units whose other facts are the same get the same decision, and a
    decision that names no fingerprint (it could not be taken for another unit else)."""
    a, b = _facts(flags, one), _facts(flags, other)
    assert first_seen(a) and first_seen(b)
    decided = decide(a)
    assert decide(b) == decided
    assert one not in repr(decided)


@given(FLAGS, FINGERPRINT)
def test_i42_units_with_a_history_are_not_first_seen(flags: dict[str, Any], fp: str) -> None:
    """A unit with anything of its own the decision compares its fingerprint with — an
    item, a carried failure, a stored answer — or an invalid record, or a request not
    rendered yet, is decided on its own."""
    item = BatchItem(
        "agac_1", "c1", "wf", "classify", "k", "a.jsonl", fp, 1, "{}", "pending", None, None
    )
    own = [
        _facts(flags, fp, items=(item,)),
        _facts(flags, fp, carried=CarriedFailure("refusal", "no", fp)),
        UnitFacts(RUN, fingerprint=fp, stored='{"a": 1}', **flags),
        UnitFacts(RUN, fingerprint=NOT_YET, stored=NOT_YET, **flags),
        _facts(flags, fp, record_reason="invalid_input", record_error="bad line"),
    ]
    assert not any(first_seen(f) for f in own)
