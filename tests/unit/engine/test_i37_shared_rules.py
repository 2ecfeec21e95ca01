"""The rules engine/decision.py shares with the steps after a decision: the approval
gate (a carried failure of the same subject, no proposal past the deadline or while the
run stops) and a call's attempts (paused, deadline, budget), one row per rule and rows
where two apply and the earlier one wins. Each row gives the outcome whole."""

from __future__ import annotations

from typing import Any

import pytest

from agac.engine.decision import (
    CarriedFailure,
    Pending,
    Settle,
    before_attempt,
    before_proposal,
    breaker_skip,
    carried_failure,
)

FP = "f" * 64
SUBJECT = "s" * 64
DEADLINE = "the run's deadline passed"
NO_ROOM = "has no room for its worst case"

ATTEMPTS: list[tuple[str, int, dict[str, Any], Settle | None]] = [
    ("nothing stops it: send", 1, {}, None),
    (
        "paused",
        1,
        {"paused": "provider down"},
        Settle("skipped", "provider_unreachable", "never sent: provider down", "call", FP, 0),
    ),
    (
        "deadline",
        1,
        {"deadline_passed": True},
        Settle("skipped", "deadline", f"never sent: {DEADLINE}", "call", FP, 0),
    ),
    (
        "budget",
        1,
        {"no_room": "$1"},
        Settle(
            "skipped", "budget_exhausted", f"never sent: the budget ($1) {NO_ROOM}", "call", FP, 0
        ),
    ),
    (
        "a later attempt counts those made",
        3,
        {"deadline_passed": True},
        Settle(
            "skipped",
            "deadline",
            f"not sent again after 2 attempts: {DEADLINE}",
            "call",
            FP,
            2,
        ),
    ),
    (
        "paused before the deadline and the budget",
        2,
        {"paused": "down", "deadline_passed": True, "no_room": "$1"},
        Settle(
            "skipped",
            "provider_unreachable",
            "not sent again after 1 attempts: down",
            "call",
            FP,
            1,
        ),
    ),
    (
        "the deadline before the budget",
        1,
        {"deadline_passed": True, "no_room": "$1"},
        Settle("skipped", "deadline", f"never sent: {DEADLINE}", "call", FP, 0),
    ),
]


@pytest.mark.parametrize(
    ("attempt", "facts", "expected"), [r[1:] for r in ATTEMPTS], ids=[r[0] for r in ATTEMPTS]
)
def test_i37_before_attempt(attempt: int, facts: dict[str, Any], expected: Settle | None) -> None:
    assert before_attempt(attempt, FP, **facts) == expected


def test_i37_breaker_skip_counts_the_attempt_that_tripped_it() -> None:
    assert breaker_skip("provider down", FP, 3) == Settle(
        "skipped", "provider_unreachable", "provider down", "call", FP, 3
    )


PROPOSALS: list[tuple[str, dict[str, bool], Settle | Pending | None]] = [
    ("propose", {"deadline_passed": False, "stopping": False}, None),
    (
        "deadline",
        {"deadline_passed": True, "stopping": False},
        Settle("skipped", "deadline", f"never proposed: {DEADLINE}"),
    ),
    ("stopping: pending", {"deadline_passed": False, "stopping": True}, Pending("stopping")),
    (
        "the deadline before stopping",
        {"deadline_passed": True, "stopping": True},
        Settle("skipped", "deadline", f"never proposed: {DEADLINE}"),
    ),
]


@pytest.mark.parametrize(
    ("facts", "expected"), [r[1:] for r in PROPOSALS], ids=[r[0] for r in PROPOSALS]
)
def test_i37_before_proposal(facts: dict[str, bool], expected: Settle | Pending | None) -> None:
    assert before_proposal(**facts) == expected


@pytest.mark.parametrize(
    ("carried", "key", "expected"),
    [
        (None, SUBJECT, None),
        (CarriedFailure("refusal", "no", FP), SUBJECT, None),  # asked differently: asked again
        (
            CarriedFailure("refusal", "no", SUBJECT),
            SUBJECT,
            Settle("failed", "refusal", "no", "carried", SUBJECT),
        ),
    ],
    ids=["none", "another request", "the same subject"],
)
def test_i37_carried_failure(
    carried: CarriedFailure | None, key: str, expected: Settle | None
) -> None:
    assert carried_failure(carried, key) == expected
