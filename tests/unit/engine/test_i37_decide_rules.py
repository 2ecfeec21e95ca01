"""The one decision (engine/decision.py), rule by rule: one row per rule of its docstring
(and per branch of a rule), then rows where two rules apply and the earlier one wins.
Each row is a unit's facts and the decision they must give, whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from agac.engine.decision import (
    CALL,
    EFFECT,
    GATE,
    NOT_YET,
    Adopt,
    Decision,
    Need,
    Pending,
    Settle,
    Stage,
    UnitFacts,
    decide,
)
from agac.engine.ports import CarriedFailure
from agac.engine.values import Settled
from agac.store.values import BatchItem

RUN = "r2"
EARLIER = "r1"
FP = "f" * 64
OTHER_FP = "e" * 64
ANSWER = '{"label": "a"}'


def item(
    status: str,
    *,
    batch: str | None = "agac_1",
    sent_by: str | None = RUN,
    read_by: str | None = None,
    state: str | None = "submitted",
    fingerprint: str = FP,
    attempt: int = 1,
    reason: str | None = None,
) -> BatchItem:
    """One batch item of the unit; ``batch`` None: staged by ``sent_by`` (no batch yet)."""
    key = batch if batch is not None else f"staged:{sent_by}:classify:a.jsonl"
    return BatchItem(
        key,
        f"c{attempt}",
        "wf",
        "classify",
        "k",
        "a.jsonl",
        fingerprint,
        attempt,
        "{}",
        status,  # type: ignore[arg-type]
        reason,
        "its detail" if reason else None,
        batch_state=state if batch is not None else None,  # type: ignore[arg-type]
        batch_run=sent_by if batch is not None else None,
        collected_by=read_by,
    )


@dataclass(frozen=True)
class Row:
    """A unit's facts: ``UnitFacts``' keywords, and the facts a path learns later
    (``later``: render_error, render_reason, attachment_error, inputs_error, own_answer)."""

    rule: str
    expected: Decision
    facts: dict[str, Any] = field(default_factory=dict)
    later: dict[str, Any] = field(default_factory=dict)

    def unit(self) -> UnitFacts:
        f = UnitFacts(RUN, **self.facts)
        for name, value in self.later.items():
            setattr(f, name, value)
        return f


KNOWN = {"guard": None, "fingerprint": FP, "stored": None}
"""Everything costly already learned, nothing stored: an llm unit that is sent."""
BATCH = {**KNOWN, "batch": True}
TOOL = {**KNOWN, "kind": "tool"}

ROWS = [
    # 1. the record is invalid
    Row(
        "1 invalid record, action reads records: failed with its reason",
        Settle("failed", "invalid_input", "line 3: not JSON"),
        {"record_reason": "invalid_input", "record_error": "line 3: not JSON"},
    ),
    Row(
        "1 invalid record, action below: skipped upstream_failed",
        Settle("skipped", "upstream_failed", "the input record is invalid"),
        {"reads_records": False, "record_reason": "invalid_input", "record_error": "x"},
    ),
    # 2. a dependency failed or was skipped
    Row(
        "2 a dependency failed: skipped upstream_failed",
        Settle("skipped", "upstream_failed", "extract failed: provider_error"),
        {**KNOWN, "upstream": [("extract", Settled("failed", "provider_error"))]},
    ),
    Row(
        "2 a dependency skipped: skipped with its reason (a guard flows down)",
        Settle("skipped", "guard", "extract was skipped: guard"),
        {**KNOWN, "upstream": [("extract", Settled("skipped", "guard"))]},
    ),
    Row(
        "2 a dependency judged elsewhere (a join's items) does not decide",
        CALL,
        {**KNOWN, "upstream": [("split", None)]},
    ),
    Row(
        "2 answered dependencies do not decide",
        CALL,
        {**KNOWN, "upstream": [("extract", Settled("answered", output={"x": 1}))]},
    ),
    # 3. the run is stopping
    Row("3 the run is stopping: pending", Pending("stopping"), {**KNOWN, "stopping": True}),
    # 4. the view, the attachments, the guard, the action, the gate
    Row(
        "4 the view cannot be rendered: failed render_error",
        Settle("failed", "render_error", "'x' is undefined"),
        KNOWN,
        {"render_error": "'x' is undefined"},
    ),
    Row(
        "4 the rendering is over max_prompt_chars: failed prompt_too_large",
        Settle("failed", "prompt_too_large", "9000 characters"),
        KNOWN,
        {"render_error": "9000 characters", "render_reason": "prompt_too_large"},
    ),
    Row(
        "4 an attachment cannot be sent: failed with its reason",
        Settle("failed", "attachment_not_found", "a.png: no such file"),
        KNOWN,
        {"attachment_error": ("attachment_not_found", "a.png: no such file")},
    ),
    Row("4 the guard is not known yet: the view is needed", Need("view"), {"guard": NOT_YET}),
    Row(
        "4 the guard is false: skipped guard",
        Settle("skipped", "guard", "guard 'x > 1' is false"),
        {**KNOWN, "guard": False, "guard_text": "x > 1"},
    ),
    Row("4 the guard is true: the unit goes on", CALL, {**KNOWN, "guard": True}),
    Row(
        "4 the action failed as a whole: failed provider_error",
        Settle("failed", "provider_error", "no such model"),
        {**KNOWN, "action_failed": "no such model"},
    ),
    Row("4 an action with approval: its gate", GATE, {**KNOWN, "gated": True}),
    # 5. a tool
    Row(
        "5 a tool's inputs are not JSON: failed tool_error",
        Settle("failed", "tool_error", "not JSON"),
        TOOL,
        {"inputs_error": "not JSON"},
    ),
    Row(
        "5 a tool's input hash is not known yet: the request is needed",
        Need("request"),
        {**TOOL, "fingerprint": NOT_YET},
    ),
    Row("5 a tool with effect: the effects room", EFFECT, {**TOOL, "effect": True}),
    Row(
        "5 a cached tool's stored result is not looked up yet: the answer is needed",
        Need("answer"),
        {**TOOL, "stored": NOT_YET},
    ),
    Row(
        "5 a cached tool's stored result: answered reused",
        Settle("answered", None, None, "reused", FP, 0, ANSWER),
        {**TOOL, "stored": ANSWER},
    ),
    Row(
        "5 cache off: the stored result is not read",
        CALL,
        {**TOOL, "cache": False, "stored": NOT_YET},
    ),
    Row(
        "5 --fresh: the stored result is not read", CALL, {**TOOL, "fresh": True, "stored": ANSWER}
    ),
    Row(
        "5 a tool after the deadline: skipped deadline",
        Settle("skipped", "deadline", "never called: the run's deadline passed"),
        {**TOOL, "deadline_passed": True},
    ),
    Row("5 a tool: it is called", CALL, TOOL),
    # 6. a batch action's own item decides
    Row(
        "6 staged by this run: pending",
        Pending("batch"),
        {**BATCH, "fingerprint": NOT_YET, "items": [item("pending", batch=None)]},
    ),
    Row(
        "6 in this run's open batch: pending",
        Pending("batch"),
        {**BATCH, "fingerprint": NOT_YET, "items": [item("pending")]},
    ),
    Row(
        "6 its item read by this run failed: failed with the item's reason",
        Settle("failed", "schema_invalid", "its detail", "call", FP, 1),
        {
            **BATCH,
            "fingerprint": NOT_YET,
            "items": [item("failed", state="collected", read_by=RUN, reason="schema_invalid")],
        },
    ),
    Row(
        "6 its item read by this run answered, the answer not read yet: it is needed",
        Need("own_answer"),
        {
            **BATCH,
            "fingerprint": NOT_YET,
            "items": [item("succeeded", state="collected", read_by=RUN)],
        },
    ),
    Row(
        "6 its item read by this run answered, the answer unreadable: pending",
        Pending("unreadable"),
        {
            **BATCH,
            "fingerprint": NOT_YET,
            "items": [item("succeeded", state="collected", read_by=RUN)],
        },
        {"own_answer": None},
    ),
    Row(
        "6 its item read by this run answered: answered call, its attempts this run's items",
        Settle("answered", None, None, "call", FP, 2, ANSWER),
        {
            **BATCH,
            "fingerprint": NOT_YET,
            "items": [
                item("failed", state="collected", read_by=RUN, reason="schema_invalid"),
                item("succeeded", state="collected", read_by=RUN, attempt=2, batch="agac_2"),
            ],
        },
        {"own_answer": ANSWER},
    ),
    Row(
        "6 in a closed batch, never read: not decided by the item (the unit is rendered)",
        Need("request"),
        {**BATCH, "fingerprint": NOT_YET, "items": [item("pending", state="expired")]},
    ),
    # 7. the fingerprint: a carried failure, a stored answer
    Row("7 the request is not rendered yet: it is needed", Need("request"), {"guard": None}),
    Row(
        "7 the previous run's failure of the same request: failed, carried",
        Settle("failed", "refusal", "no", "carried", FP),
        {**KNOWN, "carried": CarriedFailure("refusal", "no", FP)},
    ),
    Row(
        "7 the previous run's failure of another request: not carried",
        CALL,
        {**KNOWN, "carried": CarriedFailure("refusal", "no", OTHER_FP)},
    ),
    Row(
        "7 the stored answer is not looked up yet: it is needed",
        Need("answer"),
        {**KNOWN, "stored": NOT_YET},
    ),
    Row(
        "7 an answer stored under the fingerprint: answered reused",
        Settle("answered", None, None, "reused", FP, 0, ANSWER),
        {**KNOWN, "stored": ANSWER},
    ),
    Row(
        "7 --fresh: a stored answer is not reused",
        CALL,
        {**KNOWN, "fresh": True, "stored": ANSWER},
    ),
    Row(
        "7 a batch answer this run's batch paid for: answered call",
        Settle("answered", None, None, "call", FP, 1, ANSWER),
        {
            **BATCH,
            "stored": ANSWER,
            "items": [item("succeeded", state="collected", read_by=EARLIER)],
        },
    ),
    Row(
        "7 --fresh reads the answer its own batches read",
        Settle("answered", None, None, "reused", FP, 0, ANSWER),
        {
            **BATCH,
            "fresh": True,
            "stored": ANSWER,
            "items": [item("succeeded", state="collected", sent_by=EARLIER, read_by=RUN)],
        },
    ),
    Row(
        "7 --fresh with a batch answer read by another run: not reused",
        Stage(1),
        {
            **BATCH,
            "fresh": True,
            "stored": ANSWER,
            "items": [item("succeeded", state="collected", sent_by=EARLIER, read_by=EARLIER)],
        },
    ),
    # 8. a batch action without an answer
    Row(
        "8 in another run's batch still out: adopted",
        Adopt(("agac_0",)),
        {**BATCH, "items": [item("pending", batch="agac_0", sent_by=EARLIER)]},
    ),
    Row(
        "8 its last item read by this run failed: failed, its attempts the items read here",
        Settle("failed", "batch_expired", "its detail", "call", FP, 1),
        {
            **BATCH,
            "items": [
                item(
                    "failed",
                    state="collected",
                    sent_by=EARLIER,
                    read_by=RUN,
                    reason="batch_expired",
                )
            ],
        },
    ),
    Row(
        "8 the deadline passed: skipped deadline",
        Settle("skipped", "deadline", "never sent: the run's deadline passed"),
        {**BATCH, "deadline_passed": True},
    ),
    Row(
        "8 the budget is exhausted: skipped budget_exhausted",
        Settle(
            "skipped", "budget_exhausted", "never sent: the budget has no room for its worst case"
        ),
        {**BATCH, "budget_exhausted": True},
    ),
    Row("8 else staged, as its first attempt", Stage(1), BATCH),
    Row(
        "8 a batch that switched live is not staged: it is sent",
        CALL,
        {**BATCH, "live": True},
    ),
    # 9. otherwise it is sent
    Row("9 otherwise: sent", CALL, KNOWN),
    # the order: where two rules apply, the earlier one decides
    Row(
        "1 before 2: an invalid record fails though a dependency failed",
        Settle("failed", "invalid_input", None),
        {"record_reason": "invalid_input", "upstream": [("x", Settled("failed", "refusal"))]},
    ),
    Row(
        "2 before 3: a failed dependency skips though the run is stopping",
        Settle("skipped", "upstream_failed", "x failed: refusal"),
        {"stopping": True, "upstream": [("x", Settled("failed", "refusal"))]},
    ),
    Row(
        "2 in dependency order: the first failed or skipped one names the reason",
        Settle("skipped", "guard", "x was skipped: guard"),
        {
            "upstream": [("x", Settled("skipped", "guard")), ("y", Settled("failed", "refusal"))],
        },
    ),
    Row(
        "3 before 4: a stopping run renders nothing",
        Pending("stopping"),
        {"stopping": True, "guard": NOT_YET},
        {"render_error": "boom"},
    ),
    Row(
        "4: a render error before the guard",
        Settle("failed", "render_error", "boom"),
        {"guard": False},
        {"render_error": "boom"},
    ),
    Row(
        "4: a false guard before the action's failure and its gate",
        Settle("skipped", "guard", "guard 'x' is false"),
        {"guard": False, "guard_text": "x", "action_failed": "no such model", "gated": True},
    ),
    Row(
        "4 before 7: a gated unit goes to its gate before its fingerprint",
        GATE,
        {"guard": None, "gated": True, "fingerprint": NOT_YET},
    ),
    Row(
        "6 before 7: this run's own item decides before the request renders",
        Pending("batch"),
        {**BATCH, "fingerprint": NOT_YET, "stored": NOT_YET, "items": [item("pending")]},
    ),
    Row(
        "7 before 7: a carried failure before a stored answer",
        Settle("failed", "refusal", None, "carried", FP),
        {**KNOWN, "stored": ANSWER, "carried": CarriedFailure("refusal", None, FP)},
    ),
    Row(
        "7 before 8: a stored answer before the deadline and the budget",
        Settle("answered", None, None, "reused", FP, 0, ANSWER),
        {**BATCH, "stored": ANSWER, "deadline_passed": True, "budget_exhausted": True},
    ),
    Row(
        "8: the deadline before the budget",
        Settle("skipped", "deadline", "never sent: the run's deadline passed"),
        {**BATCH, "deadline_passed": True, "budget_exhausted": True},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.rule for r in ROWS])
def test_i37_decide_rules(row: Row) -> None:
    assert decide(row.unit()) == row.expected


def test_i37_decide_rules_cover_every_rule_of_the_docstring() -> None:
    """A rule added to decision.py's docstring needs its rows here."""
    from agac.engine import decision

    doc = decision.__doc__ or ""
    numbered = {line.split(".")[0] for line in doc.splitlines() if line[:2].rstrip(".").isdigit()}
    assert numbered == {r.rule.split(" ")[0].rstrip(":") for r in ROWS}
