"""The run summary is a typed value (RunSummary, ActionSummary) whose to_dict() is the
summary's JSON as before: the same keys in the same order, the optional parts only when
they apply; it also reads as that JSON (a mapping)."""

from __future__ import annotations

import json

from agac.engine.lifecycle.options import RunResult
from agac.engine.report.counts import ActionSummary
from agac.engine.report.run import RunSummary


def _summary(**more: object) -> RunSummary:
    actions = {
        "classify": ActionSummary(
            records=3, answered=2, failed=1, calls=3, cost_usd=0.01, reasons={"truncated": 1}
        )
    }
    return RunSummary(
        run_id="r1",
        workflow="wf",
        tenant="default",
        state="partial",
        retry_of=None,
        cost_usd=0.01,
        next="agac retry wf",
        actions=actions,
        **more,
    )


def test_the_summary_json_keeps_its_keys_and_their_order() -> None:
    doc = _summary().to_dict()
    assert list(doc) == [
        "run_id",
        "workflow",
        "tenant",
        "state",
        "retry_of",
        "cost_usd",
        "next",
        "actions",
    ]
    assert list(doc["actions"]["classify"]) == [
        "records",
        "answered",
        "failed",
        "skipped",
        "pending",
        "calls",
        "unknown_calls",
        "reused",
        "tool_calls",
        "batches_out",
        "cost_usd",
        "reasons",
    ]
    full = _summary(
        waiting_on=({"action": "classify"},),
        effects_unknown=("e1",),
        awaiting_approval={"units": 1},
        deadline_at=5.0,
        budget={"usd": 1.0},
        advice=({"action": "classify"},),
        error={"code": "run_ended", "message": "m", "hint": None},
    ).to_dict()
    assert list(full)[8:] == [
        "waiting_on",
        "effects_unknown",
        "awaiting_approval",
        "deadline_at",
        "budget",
        "advice",
        "error",
    ]
    assert full["effects_unknown"] == ["e1"] and full["advice"] == [{"action": "classify"}]
    json.dumps(full)  # plain JSON data throughout


def test_the_summary_reads_as_its_json() -> None:
    s = _summary()
    assert s["actions"]["classify"]["failed"] == 1 and s.actions["classify"].failed == 1
    assert dict(s) == s.to_dict() and s == s.to_dict() and "advice" not in s
    result = RunResult(s, notes=["n"])
    assert result.to_dict() == {**s.to_dict(), "exit_code": 1, "interrupted": False, "notes": ["n"]}
    assert result.state == "partial" and result.actions["classify"].answered == 2
