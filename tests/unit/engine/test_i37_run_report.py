"""The run report is one typed tree (engine/report/) from where it is built to where it is
printed: its JSON is made in one place (jsondoc.to_json) with the keys and order the
summary always had, renderers read attributes (mypy checks a renamed field), and the
lifecycle and the views both depend on the report one way."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from agac.engine.report.advice import Advice, FirstFailure
from agac.engine.report.budget import BudgetReport
from agac.engine.report.checks import CheckRate
from agac.engine.report.cost import CostReport, CostRow
from agac.engine.report.counts import ActionSummary
from agac.engine.report.hybrid import AutoChoice, HybridSwitch
from agac.engine.report.jsondoc import document, to_json
from agac.engine.report.run import RunError, RunSummary, next_command
from agac.engine.report.status import RunPage, RunProcess, ShardRow, StatusReport, StoreRead
from agac.engine.report.waiting import ApprovalWait, PendingProposal, WaitingRow

SRC = Path(__file__).resolve().parents[3] / "src" / "agac"


def _full() -> RunSummary:
    return RunSummary(
        run_id="r1",
        workflow="wf",
        tenant="default",
        state="waiting",
        retry_of=None,
        cost_usd=0.5,
        next=None,
        actions={"a": ActionSummary(records=2, answered=1, failed=1, reasons={"truncated": 1})},
        waiting_on=(
            WaitingRow("a", "in.jsonl", "b1", "k1", "submitted", "in_progress"),
            WaitingRow("b", "in.jsonl", None, None, "waiting", None, ("b1",)),
        ),
        effects_unknown=("e1",),
        awaiting_approval=ApprovalWait(1, {"a": 1}, (PendingProposal("p1", "a", "r:1", None),)),
        deadline_at=9.0,
        hybrid={"a": HybridSwitch(8.0, False)},
        auto_modes={"a": AutoChoice("batch", "auto_batch: 2 records")},
        budget=BudgetReport(1.0, None, 0.5, 10),
        advice=(
            Advice(
                "a", "truncated", "failed", 1, FirstFailure("r:1", "too long"), "raise max_tokens"
            ),
        ),
        error=RunError("run_ended", "m"),
        checks={"a": {"short": CheckRate(1, 1, 0.5)}},
    )


def test_i37_report_json_keeps_every_key_in_its_order_and_leaves_out_what_does_not_apply() -> None:
    doc = to_json(_full())
    assert list(doc)[8:] == [
        "waiting_on",
        "effects_unknown",
        "awaiting_approval",
        "deadline_at",
        "hybrid",
        "auto_modes",
        "budget",
        "advice",
        "error",
        "checks",
    ]
    assert doc["waiting_on"] == [
        {
            "action": "a",
            "file": "in.jsonl",
            "batch_id": "b1",
            "key": "k1",
            "state": "submitted",
            "status": "in_progress",
        },
        {
            "action": "b",
            "file": "in.jsonl",
            "batch_id": None,
            "key": None,
            "state": "waiting",
            "status": None,
            "waits_on": ["b1"],
        },
    ]
    assert doc["awaiting_approval"] == {
        "units": 1,
        "actions": {"a": 1},
        "proposals": [{"id": "p1", "action": "a", "record": "r:1", "expires_at": None}],
    }
    assert doc["budget"] == {"usd": 1.0, "tokens": None, "spent_usd": 0.5, "spent_tokens": 10}
    assert doc["advice"] == [
        {
            "action": "a",
            "reason": "truncated",
            "status": "failed",
            "units": 1,
            "first": {"key": "r:1", "detail": "too long"},
            "fix": "raise max_tokens",
        }
    ]
    assert doc["error"] == {"code": "run_ended", "message": "m", "hint": None}
    assert doc["hybrid"] == {"a": {"live_at": 8.0, "switched": False}}
    assert doc["checks"] == {"a": {"short": {"passed": 1, "failed": 1, "rate": 0.5}}}
    assert json.loads(json.dumps(doc)) == doc  # plain JSON data throughout
    bare = to_json(RunSummary("r", "wf", "default", "succeeded", None, 0.0, None, {}))
    assert list(bare) == [
        "run_id",
        "workflow",
        "tenant",
        "state",
        "retry_of",
        "cost_usd",
        "next",
        "actions",
    ]


def test_i37_status_and_run_page_merge_the_summary_at_its_place() -> None:
    shard = ShardRow(0, "walk", None, None, (0, 9), "held", "w1", "w1", "h", 7, 1)
    gone = RunProcess("h", 7, 5.0, False)
    status = StatusReport(
        _full(), process=gone, store=StoreRead("sqlite:///x", "default"), shards=(shard,)
    )
    doc = to_json(status)
    assert list(doc)[:8] == list(to_json(_full()))[:8]
    assert list(doc)[-3:] == ["process", "store", "shards"]
    assert doc["process"] == {"host": "h", "pid": 7, "lease_expires_at": 5.0, "live": False}
    assert doc["shards"][0]["records"] == [0, 9]
    assert list(to_json(StatusReport(_full())))[-1] == "checks"  # no store, no shards
    page = to_json(RunPage(StatusReport(_full()), 1.0, None))
    assert list(page)[-2:] == ["started", "ended"] and page["ended"] is None
    assert status["state"] == "waiting" and document(status) == doc  # reads as its JSON
    assert document({"plain": [1]}) == {"plain": [1]}  # other documents pass as they are


def test_i37_cost_row_tells_a_null_price_from_no_price() -> None:
    base = {
        "action": "a",
        "kind": "llm",
        "provider": "openai",
        "model": "m",
        "tier": "live",
        "origin": "call",
        "calls": 1,
        "input_tokens": 1,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": 1,
        "reasoning_tokens": 0,
        "server_tools": {},
        "cost_usd": 0.1,
    }
    llm = to_json(CostRow(**base, price=None))  # type: ignore[arg-type]
    tool = to_json(CostRow(**{**base, "kind": "tool"}))  # type: ignore[arg-type]
    assert "price" in llm and llm["price"] is None and "price" not in tool
    unknown = to_json(
        CostRow(**{**base, "origin": "unknown"}, priced_by_a_later_answer=0, price=None)  # type: ignore[arg-type]
    )
    assert unknown["priced_by_a_later_answer"] == 0 and "estimated" not in unknown
    report = CostReport("r", "wf", "default", 0.1, 0.0, 0.0, 0.0, (CostRow(**base),))  # type: ignore[arg-type]
    assert report["rows"][0]["cost_usd"] == 0.1 and list(to_json(report))[-1] == "rows"


def test_i37_next_command_reads_the_typed_summary() -> None:
    partial = RunSummary(
        "r", "wf", "acme", "partial", None, 0.0, None, {"a": ActionSummary(1, failed=1)}
    )
    assert next_command(partial) == "agac retry wf --tenant acme"
    unfixable = RunSummary(
        "r",
        "wf",
        "default",
        "partial",
        None,
        0.0,
        None,
        {"a": ActionSummary(1, failed=1, reasons={"render_error": 1})},
    )
    assert next_command(unfixable) == "agac run wf"


def _subscripts_of(path: Path, functions: set[str]) -> list[str]:
    """String subscripts (``x["key"]``) and ``.get("key")`` calls inside ``functions``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Subscript) and isinstance(inner.slice, ast.Constant):
                    found.append(f"{node.name}: {ast.unparse(inner)}")
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr == "get"
                    and inner.args
                    and isinstance(inner.args[0], ast.Constant)
                ):
                    found.append(f"{node.name}: {ast.unparse(inner)}")
    return found


def test_i37_renderers_read_the_report_by_attribute() -> None:
    renderers = {
        "print_summary",
        "_print_counts",
        "_last_line_of",
        "_print_approvals",
        "_print_budget",
        "_print_shards",
        "_print_waiting_on",
        "print_cost",
        "_cost_note",
    }
    assert _subscripts_of(SRC / "cli" / "report.py", renderers) == []


def _imports(package: Path) -> set[str]:
    out = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                out.add(node.module)
    return out


def test_i37_the_report_depends_on_neither_the_lifecycle_nor_the_views() -> None:
    report = _imports(SRC / "engine" / "report")
    assert not [m for m in report if m.startswith(("agac.engine.lifecycle", "agac.engine.views"))]
    lifecycle = _imports(SRC / "engine" / "lifecycle")
    assert "agac.engine.report.run" in lifecycle
    assert not [m for m in lifecycle if m.startswith("agac.engine.views.summary")]
