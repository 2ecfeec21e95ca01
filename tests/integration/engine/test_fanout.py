"""Fan-out, join and per-record sessions (docs/workflow-reference.md, Fan-out and join) through the library API, on SQLite
and PostgreSQL: items are units with their own keys, outcomes and counts; joins get them
back in request order; both failure policies; nesting; versions; retry of one item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine_helpers import past_deadline_after, run

from agac import api
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

TOOLS = """
import asyncio, json, os, random, time

async def split(inputs, ctx):
    return {"parts": inputs["source"]["parts"]}

async def slow_echo(inputs, ctx):
    # Random completion order: later items often finish first.
    await asyncio.sleep(random.uniform(0, 0.03))
    return {"value": inputs["part"], "item_key": ctx.item_key, "record_key": ctx.record_key}

def picky(inputs, ctx):
    if str(inputs["part"]).startswith("bad") and not os.path.exists("fixed"):
        raise ValueError(f"cannot handle {inputs['part']}")
    return {"value": inputs["part"]}

def order(inputs, ctx):
    assert [f["key"] for f in ctx.fulfilled] == [f["key"] for f in inputs["fulfilled"]]
    return {"keys": [f["key"] for f in inputs["fulfilled"]],
            "rejected": [[r["key"], r["reason"]] for r in ctx.rejected]}

def explode(inputs, ctx):
    if ctx.rejected:
        raise RuntimeError("a clause failed")
    return {"n": len(inputs["fulfilled"])}

STATE = {"now": 0, "max": 0, "spans": []}

async def tracked(inputs, ctx):
    STATE["now"] += 1
    STATE["max"] = max(STATE["max"], STATE["now"])
    start = time.monotonic()
    await asyncio.sleep(0.01)
    STATE["now"] -= 1
    STATE["spans"].append([ctx.item_key, start, time.monotonic()])
    with open("spans.json", "w") as f:
        json.dump(STATE, f)
    return {"ok": True}

async def paired(inputs, ctx):
    # ``tracked`` that, until two items have been in flight together, waits for a second
    # one (120 s only guard a hang): one at a time is then never down to a slow machine.
    STATE["now"] += 1
    STATE["max"] = max(STATE["max"], STATE["now"])
    deadline = time.monotonic() + 120
    while STATE["max"] < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    STATE["now"] -= 1
    with open("spans.json", "w") as f:
        json.dump(STATE, f)
    return {"ok": True}
"""

MAP = """
name: wf
input: {{path: data/, id_field: id}}
defaults: {{retry: {{max_attempts: 1}}}}
actions:
  - name: split
    kind: tool
    function: tools:split
  - name: each
    kind: tool
    dependencies: [split]
    function: tools:{fn}
    fan_out: {{over: split.parts, as: part}}
{extra}
  - name: joined
    kind: tool
    dependencies: [each]
    join: each
    function: tools:{join}
{policy}
  - name: collect
    kind: join
    dependencies: [each]
{policy}
"""


def _project(
    root: Path,
    *,
    fn: str = "slow_echo",
    join: str = "order",
    extra: str = "",
    policy: str = "",
    data: list[dict[str, Any]] | None = None,
) -> None:
    rows = (
        data
        if data is not None
        else [
            {"id": "a", "parts": [f"p{i}" for i in range(12)]},
            {"id": "b", "parts": ["x", "bad1", "y", "bad2"]},
            {"id": "c", "parts": []},
        ]
    )
    write_project(
        root,
        MAP.format(fn=fn, join=join, extra=extra, policy=policy),
        data={"data/a.jsonl": rows},
        files={"tools.py": TOOLS},
    )


def _export(root: Path, action: str) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("wf", action, root)}


def test_join_receives_items_in_request_order_under_random_completion(project: Path) -> None:
    _project(project)
    summary = run(project).summary
    assert summary["state"] == "succeeded"
    out = _export(project, "joined")
    assert out["a"]["output"]["keys"] == [f"a/{i}" for i in range(12)]
    assert out["b"]["output"]["keys"] == ["b/0", "b/1", "b/2", "b/3"]
    each = _export(project, "each")
    assert each["a/3"]["output"] == {"value": "p3", "item_key": "a/3", "record_key": "a"}
    exported = [r["key"] for r in api.export_rows("wf", "each", project)]
    assert exported == [f"a/{i}" for i in range(12)] + ["b/0", "b/1", "b/2", "b/3"]  # request order
    # §7.1: items at the fan-out, parents at the join.
    acts = summary["actions"]
    assert acts["each"]["records"] == 16 and acts["each"]["answered"] == 16
    assert acts["joined"]["records"] == 3 and acts["collect"]["records"] == 3
    assert acts["split"]["records"] == 3


def test_zero_items_join_runs_with_empty_lists(project: Path) -> None:
    _project(project)
    run(project)
    collect = _export(project, "collect")["c"]
    assert collect["status"] == "answered"
    assert collect["output"] == {"fulfilled": [], "rejected": [], "skipped": []}
    assert _export(project, "joined")["c"]["output"] == {"keys": [], "rejected": []}


def test_retain_successes_failed_item_is_rejected_counted_exported_and_in_session(
    project: Path,
) -> None:
    _project(project, fn="picky")
    summary = run(project).summary
    assert summary["state"] == "partial"
    each = summary["actions"]["each"]
    assert each["records"] == 16 and each["failed"] == 2 and each["reasons"] == {"tool_error": 2}
    assert summary["actions"]["joined"]["answered"] == 3
    joined = _export(project, "joined")["b"]["output"]
    assert joined["keys"] == ["b/0", "b/2"]
    assert joined["rejected"] == [["b/1", "tool_error"], ["b/3", "tool_error"]]
    collect = _export(project, "collect")["b"]["output"]
    assert [r["key"] for r in collect["rejected"]] == ["b/1", "b/3"]
    assert collect["rejected"][0]["action"] == "each"
    exported = _export(project, "each")
    assert exported["b/1"]["status"] == "failed" and exported["b/1"]["reason"] == "tool_error"
    failed = api.list_records("wf", project, status="failed")
    assert [(u["key"], u["action"]) for u in failed["units"]] == [("b/1", "each"), ("b/3", "each")]
    session = api.record_session("b", project)
    assert session["failed_items"] == ["b/1", "b/3"]
    assert [i["key"] for i in session["items"]] == ["b/0", "b/1", "b/2", "b/3"]
    bad = session["items"][1]
    assert bad["status"] == "failed" and bad["actions"][0]["reason"] == "tool_error"
    assert "ValueError: cannot handle bad1" in bad["actions"][0]["attempts"][0]["error"]
    assert any(
        e["unit_key"] == "b/1" and e["data"]["reason"] == "tool_error" for e in session["errors"]
    )
    item = api.record_session("b/3", project)
    assert item["key"] == "b/3" and item["record"]["key"] == "b"


def test_atomic_llm_join_is_skipped_join_atomic_and_tool_join_gets_no_fulfilled(
    project: Path,
) -> None:
    write_project(
        project,
        """
name: wf
input: {path: data/, id_field: id}
defaults: {retry: {max_attempts: 1}}
actions:
  - {name: split, kind: tool, function: tools:split}
  - name: each
    kind: tool
    dependencies: [split]
    function: tools:picky
    fan_out: {over: split.parts, as: part}
  - name: judge
    dependencies: [each]
    join: each
    failure_policy: atomic
    model: mock/m
    prompt: "{{ fulfilled | length }} clauses"
  - name: tooljoin
    kind: tool
    dependencies: [each]
    join: each
    failure_policy: atomic
    function: tools:order
  - name: collect
    kind: join
    dependencies: [each]
    failure_policy: atomic
  - name: after
    dependencies: [judge]
    model: mock/m
    prompt: "{{ judge.text }}"
""",
        data={
            "data/a.jsonl": [{"id": "ok", "parts": ["x", "y"]}, {"id": "b", "parts": ["x", "bad"]}]
        },
        files={"tools.py": TOOLS},
    )
    summary = run(project).summary
    judge = summary["actions"]["judge"]
    assert (
        judge["answered"] == 1 and judge["skipped"] == 1 and judge["reasons"] == {"join_atomic": 1}
    )
    assert judge["calls"] == 1  # the llm join of the failed parent is never called
    assert summary["actions"]["after"]["reasons"] == {"join_atomic": 1}
    assert _export(project, "collect")["b"]["reason"] == "join_atomic"
    tool = _export(project, "tooljoin")
    assert tool["b"]["status"] == "answered"
    assert tool["b"]["output"] == {"keys": [], "rejected": [["b/1", "tool_error"]]}
    assert tool["ok"]["output"]["keys"] == ["ok/0", "ok/1"]


def test_atomic_tool_join_that_raises_fails_its_parent_tool_error(project: Path) -> None:
    _project(project, fn="picky", join="explode", policy="    failure_policy: atomic")
    summary = run(project).summary
    joined = summary["actions"]["joined"]
    assert joined["failed"] == 1 and joined["reasons"] == {"tool_error": 1}
    assert _export(project, "joined")["b"]["status"] == "failed"


def test_nested_fan_out_keys_order_and_inner_failure(project: Path) -> None:
    write_project(
        project,
        """
name: wf
input: {path: data/, id_field: id}
defaults: {retry: {max_attempts: 1}}
actions:
  - {name: split, kind: tool, function: tools:split}
  - name: outer
    kind: tool
    dependencies: [split]
    function: tools:slow_echo
    fan_out: {over: split.parts, as: part}
  - name: inner
    kind: tool
    dependencies: [outer]
    function: tools:picky
    fan_out: {over: source.parts, as: part}
  - name: inner_join
    kind: join
    dependencies: [inner]
  - name: outer_join
    kind: join
    dependencies: [inner_join]
""",
        data={"data/a.jsonl": [{"id": "r", "parts": ["a", "bad", "c"]}]},
        files={"tools.py": TOOLS},
    )
    summary = run(project).summary
    acts = summary["actions"]
    assert acts["outer"]["records"] == 3 and acts["inner"]["records"] == 9
    assert acts["inner_join"]["records"] == 3 and acts["outer_join"]["records"] == 1
    assert acts["inner"]["failed"] == 3  # "bad" fails under each outer item
    inner = _export(project, "inner")
    assert inner["r/1/2"]["status"] == "answered" and inner["r/2/1"]["status"] == "failed"
    outer = _export(project, "outer_join")["r"]["output"]
    assert [f["key"] for f in outer["fulfilled"]] == ["r/0", "r/1", "r/2"]
    first = outer["fulfilled"][0]["output"]
    assert [f["key"] for f in first["fulfilled"]] == ["r/0/0", "r/0/2"]
    assert [r["key"] for r in first["rejected"]] == ["r/0/1"]
    session = api.record_session("r", project)
    assert session["failed_items"] == ["r/0/1", "r/1/1", "r/2/1"]
    assert [i["key"] for i in session["items"][2]["items"]] == ["r/2/0", "r/2/1", "r/2/2"]


def test_fan_out_over_a_missing_list_fails_the_parent_fan_out_invalid(project: Path) -> None:
    _project(project, data=[{"id": "a", "parts": "not a list"}, {"id": "b", "parts": ["x"]}])
    summary = run(project).summary
    each = summary["actions"]["each"]
    assert each["records"] == 2 and each["reasons"] == {"fan_out_invalid": 1}
    assert summary["actions"]["joined"]["reasons"] == {"upstream_failed": 1}
    assert _export(project, "each")["a"]["detail"] == "split.parts is not a list (it is str)"


def test_max_concurrency_bounds_items_in_flight_and_sequential_gate(project: Path) -> None:
    rows = [{"id": "a", "parts": list(range(10))}, {"id": "b", "parts": list(range(10))}]
    _project(project, fn="paired", extra="    max_concurrency: 3", data=rows)
    assert run(project).summary["state"] == "succeeded"
    state = json.loads((project / "spans.json").read_text())
    assert 1 < state["max"] <= 3
    _project(
        project,
        fn="tracked",
        extra="    gate: sequential\n    cache: false",
        data=[{"id": "s", "parts": list(range(10))}],
    )
    assert run(project, new=True).summary["state"] == "succeeded"
    spans = [
        s
        for s in json.loads((project / "spans.json").read_text())["spans"]
        if s[0].startswith("s/")
    ]
    assert [s[0] for s in spans] == [f"s/{i}" for i in range(10)]
    assert all(spans[i][2] <= spans[i + 1][1] for i in range(len(spans) - 1))  # no overlap


def test_versions_enter_the_fingerprint_and_are_sent_as_seed(project: Path) -> None:
    write_project(
        project,
        """
name: wf
input: {path: data/, id_field: id}
actions:
  - name: vote
    model: mock/m
    fan_out: {versions: 3}
    prompt: "Is {{ source.text }} spam?"
    schema: {type: object, properties: {spam: {type: boolean}}, required: [spam]}
  - {name: tally, kind: join, dependencies: [vote]}
""",
        data={"data/a.jsonl": [{"id": "m1", "text": "buy now"}]},
    )
    summary = run(project).summary
    assert summary["actions"]["vote"]["calls"] == 3 and summary["actions"]["vote"]["records"] == 3
    session = api.record_session("m1", project)
    requests = [i["actions"][0]["request"] for i in session["items"]]
    assert [r["seed"] for r in requests] == [0, 1, 2]
    assert len({json.dumps(r, sort_keys=True) for r in requests}) == 3
    again = run(project).summary  # R1: every version reused by its own fingerprint
    assert again["actions"]["vote"]["calls"] == 0 and again["actions"]["vote"]["reused"] == 3


def test_r2_retry_of_one_item_reasks_it_and_its_parents_join(project: Path) -> None:
    _project(project, fn="picky")
    first = run(project).summary
    assert first["actions"]["each"]["failed"] == 2
    (project / "fixed").write_text("")
    dry = api.retry("wf", project, record="b/1", dry_run=True)
    assert dry["units"] == [{"action": "each", "key": "b/1"}]
    retried = api.retry("wf", project, record="b/1").summary
    each = retried["actions"]["each"]
    assert each["tool_calls"] == 1 and each["failed"] == 1 and each["records"] == 16
    joined = _export(project, "joined")["b"]["output"]
    assert joined["keys"] == ["b/0", "b/1", "b/2"]
    assert joined["rejected"] == [["b/3", "tool_error"]]
    assert retried["actions"]["joined"]["tool_calls"] == 1  # only b's join ran again
    final = api.retry("wf", project).summary
    assert final["state"] == "succeeded" and final["actions"]["each"]["tool_calls"] == 1


def test_plan_and_render_count_and_show_items(project: Path) -> None:
    write_project(
        project,
        """
name: wf
input: {path: data/, id_field: id}
actions:
  - name: vote
    model: mock/m
    fan_out: {versions: 3}
    prompt: "Is {{ source.text }} spam? (vote {{ version }})"
  - name: per_line
    model: mock/m
    fan_out: {over: source.lines, as: line}
    prompt: "Read {{ line }}"
  - {name: tally, kind: join, dependencies: [vote]}
""",
        data={
            "data/a.jsonl": [
                {"id": "m1", "text": "buy", "lines": ["a", "b"]},
                {"id": "m2", "text": "hi", "lines": []},
            ]
        },
    )
    plan = api.plan("wf", project)
    assert plan["actions"]["vote"]["units"] == 6 and plan["actions"]["vote"]["requests"] == 6
    assert plan["actions"]["per_line"]["requests"] == 2 and plan["actions"]["tally"]["units"] == 2
    shown = api.render("wf", "m1", project=project)
    votes = [r for r in shown if r["action"] == "vote"]
    assert [r["item"] for r in votes] == ["m1/0", "m1/1", "m1/2"]
    assert [r["request"]["seed"] for r in votes] == [0, 1, 2]
    assert [
        r["request"]["messages"][-1]["content"] for r in shown if r["action"] == "per_line"
    ] == ["Read a", "Read b"]


def _accounted(summary: dict[str, Any]) -> None:
    for name, a in summary["actions"].items():
        assert a["answered"] + a["failed"] + a["skipped"] == a["records"], (name, a)
        assert a["pending"] == 0, (name, a)


def test_r4_deadline_mid_fan_out_accounts_for_every_item_and_parent(
    project: Path, monkeypatch, clocked: tuple[ManualClock, Store]
) -> None:
    write_project(
        project,
        """
name: wf
input: {path: data/, id_field: id}
deadline: 1h
defaults: {model: mock/m, max_concurrency: 2}
actions:
  - name: extract
    prompt: "Split {{ source.text }}"
    schema: {type: object, properties: {parts: {type: array, items: {type: string}, minItems: 6, maxItems: 6}}, required: [parts]}
  - name: each
    dependencies: [extract]
    fan_out: {over: extract.parts, as: part}
    prompt: "Read {{ part }}"
  - {name: collect, kind: join, dependencies: [each]}
""",
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"text {i}"} for i in range(12)]},
    )
    monkeypatch.setenv("AGAC_MOCK_LATENCY_MS", "80")
    clock, store = clocked
    s = run(project, store=store, on_progress=past_deadline_after(clock, "each")).summary
    assert s["state"] == "timed_out"
    _accounted(s)
    each = s["actions"]["each"]
    assert 0 < each["answered"] and each["reasons"].get("deadline", 0) > 0
    assert s["actions"]["collect"]["records"] == 12


def test_progress_totals_grow_as_parents_fan_out(project: Path) -> None:
    _project(project)
    seen: dict[str, Any] = {}
    result = run(project, on_start=lambda progress, executor: seen.setdefault("p", progress))
    progress = seen["p"]
    assert progress.totals == {"split": 3, "each": 16, "joined": 3, "collect": 3}
    assert {a: progress.done(a) for a in progress.totals} == progress.totals
    assert result.summary["actions"]["each"]["records"] == 16


def test_r1_new_run_reuses_and_carries_item_outcomes(project: Path) -> None:
    _project(project, fn="picky")
    first = run(project).summary
    second = run(project).summary
    assert second["run_id"] != first["run_id"]
    each = second["actions"]["each"]
    assert each["records"] == 16 and each["tool_calls"] == 0
    assert each["failed"] == 2 and each["reused"] == 14
    assert _export(project, "joined")["b"]["output"]["rejected"] == [
        ["b/1", "tool_error"],
        ["b/3", "tool_error"],
    ]


def test_gc_prunes_a_runs_fan_outs_with_its_outcomes(project: Path) -> None:
    import os

    from agac.store.repository import Store

    _project(project)
    first = run(project).summary
    second = run(project).summary
    store = Store(os.environ["AGAC_STORE"])
    try:
        assert store.fanout_totals(first["run_id"]) == {"each": (3, 16)}
        assert store.fanout_totals(second["run_id"]) == {"each": (3, 16)}  # carried (R1)
        api.gc(keep_runs=1, project=project)
        assert store.fanout_totals(first["run_id"]) == {}
        assert store.fanout_totals(second["run_id"]) == {"each": (3, 16)}
    finally:
        store.close()
    assert api.status("wf", project)["actions"]["each"]["records"] == 16


def test_a1_approval_inside_a_fan_out_is_asked_per_item(project: Path) -> None:
    write_project(
        project,
        """
name: wf
input: {path: data/, id_field: id}
actions:
  - {name: split, kind: tool, function: tools:split}
  - name: each
    kind: tool
    dependencies: [split]
    function: tools:slow_echo
    fan_out: {over: split.parts, as: part}
    approval: {approvers: [leads]}
  - {name: collect, kind: join, dependencies: [each]}
""",
        data={"data/a.jsonl": [{"id": "r", "parts": ["x", "y", "z"]}]},
        files={"tools.py": TOOLS},
        agac_yml="groups:\n  leads: [ann]\n",
    )
    first = run(project)
    assert first.exit_code == 75
    assert first.summary["actions"]["each"]["records"] == 3
    assert first.summary["actions"]["each"]["pending"] == 3
    proposals = api.approvals_list("wf", project)
    assert sorted(p["record"] for p in proposals) == ["r/0", "r/1", "r/2"]
    for p in proposals:
        api.approve(p["id"], project, who="ann")
    done = run(project).summary
    assert done["state"] == "succeeded"
    assert [f["key"] for f in _export(project, "collect")["r"]["output"]["fulfilled"]] == [
        "r/0",
        "r/1",
        "r/2",
    ]


def test_guard_skipped_items_are_neither_fulfilled_nor_rejected(project: Path) -> None:
    _project(
        project,
        extra="    when: \"part != 'y'\"",
        policy="    failure_policy: atomic",
        data=[{"id": "r", "parts": ["x", "y", "z"]}],
    )
    summary = run(project).summary
    assert summary["state"] == "succeeded"
    assert summary["actions"]["each"]["reasons"] == {"guard": 1}
    collect = _export(project, "collect")["r"]["output"]
    assert [f["key"] for f in collect["fulfilled"]] == ["r/0", "r/2"]
    assert collect["rejected"] == [] and collect["skipped"] == [
        {"key": "r/1", "index": 1, "reason": "guard"}
    ]
