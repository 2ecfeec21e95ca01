"""Tools per record, online on OpenAI's ``tool_calls`` protocol, end to end through the
emulator on both transports (the ``project`` fixture): the model asks for a call
(``[[emulator calls: …]]``), agac runs the project's function, sends the result back and
the model answers with it; bounds fail the unit naming the call; every turn is in the
ledger and in the record's session; exports carry the turns and calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from e2e_support import chat_requests, project_yml, sent_requests

from agac import api
from agac.cli.main import cli
from agac.store.repository import Store
from agac.testing import write_project

TOOLS = '''\
"""Order lookups for the tool-loop tests; each call appends its arguments to calls.log."""

from pathlib import Path


def lookup(order_id: str) -> dict:
    """Find an order in the shop's system.

    Args:
        order_id: the order's id, as the customer wrote it.
    """
    with (Path(__file__).parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(order_id + "\\n")
    if order_id == "boom":
        raise ValueError("the order system is down")
    return {"order": order_id, "status": "shipped"}


def carrier(order_id: str, express: bool = False) -> str:
    """The carrier of an order."""
    return "DHL" if express else "post"
'''


def _project(root: Path, records: list[dict[str, Any]], extra: str = "") -> None:
    text = f"""name: support
input: {{path: data/, id_field: id}}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  timeout: 10s
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 50ms}}}}
actions:
  - name: reply
    prompt: "Answer the customer: {{{{ source.text }}}}"
    tools: [tools.orders:lookup, tools.orders:carrier]
{extra}"""
    write_project(
        root,
        text,
        agac_yml=project_yml(),
        data={"data/in.jsonl": records},
        files={"tools/__init__.py": "", "tools/orders.py": TOOLS},
    )


def _calls_log(root: Path) -> list[str]:
    log = root / "tools" / "calls.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def run(root: Path, **options: Any) -> Any:
    return api.run("support", root, **options)


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("support", "reply", root)}


ONE_CALL = 'where is my order? [[emulator calls: lookup {"order_id": "A1"}]]'


def test_i40_tool_loop_calls_the_function_and_answers_with_its_result(
    emulator: Any, project: Path, monkeypatch: Any
) -> None:
    _project(project, [{"id": "r0", "text": ONE_CALL}, {"id": "r1", "text": "hello"}])
    sent = sent_requests(monkeypatch, "openai")

    summary = run(project).summary

    counts = summary["actions"]["reply"]
    assert summary["state"] == "succeeded" and counts["answered"] == 2
    assert counts["calls"] == 3 == chat_requests(emulator.stats(), "openai") == len(sent)
    assert _calls_log(project) == ["A1"]
    rows = _rows(project)
    result = json.dumps({"order": "A1", "status": "shipped"}, ensure_ascii=False)
    assert "Tool results: " + result in rows["r0"]["output"]["text"]
    assert "Tool results" not in rows["r1"]["output"]["text"]
    # The second turn sent the call and its result back, under the call's id.
    second = next(r for r in sent if len(r.messages) > 1)
    asked, answer = second.messages[-2], second.messages[-1]
    assert asked.role == "assistant" and asked.tool_calls[0].name == "lookup"
    assert json.loads(asked.tool_calls[0].arguments) == {"order_id": "A1"}
    assert (answer.role, answer.tool_call_id) == ("tool", asked.tool_calls[0].id)
    assert json.loads(answer.content) == {"order": "A1", "status": "shipped"}
    # What the model was told about the tools: from the type hints and the docstring.
    lookup = next(t for t in second.tools if t.name == "lookup")
    assert lookup.description == "Find an order in the shop's system."
    assert lookup.parameters["properties"]["order_id"] == {
        "type": "string",
        "description": "the order's id, as the customer wrote it.",
    }
    assert lookup.parameters["required"] == ["order_id"]
    carrier = next(t for t in second.tools if t.name == "carrier")
    assert carrier.parameters["required"] == ["order_id"]
    assert carrier.parameters["properties"]["express"] == {"type": "boolean"}


def test_i40_parallel_calls_go_back_together_and_a_schema_answer_holds_the_result(
    emulator: Any, project: Path
) -> None:
    text = (
        "two orders [[emulator calls: lookup "
        '{"order_id": "A1"} | carrier {"order_id": "A1", "express": true}]] '
        '[[emulator answers: {"carrier": {result}}]]'
    )
    schema = """    schema:
      type: object
      properties: {carrier: {type: string}}
      required: [carrier]
"""
    _project(project, [{"id": "r0", "text": text}], extra=schema)

    summary = run(project).summary

    assert summary["actions"]["reply"]["answered"] == 1
    assert chat_requests(emulator.stats(), "openai") == 2
    assert _rows(project)["r0"]["output"] == {"carrier": "DHL"}
    assert _calls_log(project) == ["A1"]


def test_i40_a_raising_tool_is_told_to_the_model_and_the_loop_goes_on(
    emulator: Any, project: Path
) -> None:
    text = 'x [[emulator calls: lookup {"order_id": "boom"}]]'
    _project(project, [{"id": "r0", "text": text}])

    summary = run(project).summary

    assert summary["actions"]["reply"]["answered"] == 1
    out = _rows(project)["r0"]["output"]["text"]
    assert "ValueError: the order system is down" in out


def test_i40_max_turns_exceeded_names_the_last_call(emulator: Any, project: Path) -> None:
    text = (
        'x [[emulator calls: lookup {"order_id": "A1"}]] '
        '[[emulator calls: lookup {"order_id": "A2"}]] '
        '[[emulator calls: lookup {"order_id": "A3"}]]'
    )
    _project(project, [{"id": "r0", "text": text}], extra="    max_turns: 2\n")

    summary = run(project).summary

    counts = summary["actions"]["reply"]
    assert counts["reasons"] == {"max_turns_exceeded": 1}
    assert chat_requests(emulator.stats(), "openai") == 2
    assert _calls_log(project) == ["A1"]  # the call over the bound is not run
    row = _rows(project)["r0"]
    assert row["reason"] == "max_turns_exceeded"
    assert 'lookup({"order_id": "A2"})' in row["detail"] and "max_turns: 2" in row["detail"]


def test_i40_max_tool_calls_exceeded_names_the_call_over_the_bound(
    emulator: Any, project: Path
) -> None:
    text = 'x [[emulator calls: lookup {"order_id": "A1"} | lookup {"order_id": "A2"}]]'
    _project(project, [{"id": "r0", "text": text}], extra="    max_tool_calls: 1\n")

    summary = run(project).summary

    assert summary["actions"]["reply"]["reasons"] == {"max_tool_calls_exceeded": 1}
    assert _calls_log(project) == []
    row = _rows(project)["r0"]
    assert 'lookup({"order_id": "A2"})' in row["detail"]


def test_i40_every_turn_is_in_the_ledger_and_the_session(emulator: Any, project: Path) -> None:
    _project(project, [{"id": "r0", "text": ONE_CALL}])

    run(project)

    session = api.record_session("r0", project)
    (entry,) = session["actions"]
    llm = [a for a in entry["attempts"] if a["kind"] == "llm"]
    tools = [a for a in entry["attempts"] if a["kind"] == "tool"]
    assert len(llm) == 2 and all(a["input_tokens"] > 0 for a in llm)
    assert len(tools) == 1 and tools[0]["model"] == "tools.orders:lookup"
    turns = entry["turns"]
    assert [t["kind"] for t in turns] == ["model", "tool"]
    assert turns[0]["tool_calls"][0]["name"] == "lookup"
    assert json.loads(turns[1]["content"]) == {"order": "A1", "status": "shipped"}
    shown = CliRunner().invoke(cli, ["records", "show", "r0"], catch_exceptions=False)
    assert 'turn 1: calls lookup({"order_id": "A1"})' in shown.output
    assert "result of lookup: " in shown.output
    row = _rows(project)["r0"]
    assert (row["turns"], row["tool_calls"]) == (2, 1)


def test_i40_an_approved_request_keeps_its_tools_and_runs_the_loop(
    emulator: Any, project: Path, monkeypatch: Any
) -> None:
    approval = "    approval: {approvers: [leads], expires_in: 1h}\n"
    _project(project, [{"id": "r0", "text": ONE_CALL}], extra=approval)
    (project / "agac.yml").write_text(project_yml() + "groups:\n  leads: [ann]\n", encoding="utf-8")
    first = run(project).summary
    assert first["state"] == "awaiting_approval" and chat_requests(emulator.stats(), "openai") == 0
    (proposal,) = api.approvals_list("support", project)
    api.approve(proposal["id"], project, who="ann")
    sent = sent_requests(monkeypatch, "openai")

    summary = run(project).summary

    assert summary["state"] == "succeeded" and summary["actions"]["reply"]["answered"] == 1
    assert len(sent) == 2 and all({t.name for t in r.tools} == {"lookup", "carrier"} for r in sent)
    assert _calls_log(project) == ["A1"]
    assert "Tool results: " in _rows(project)["r0"]["output"]["text"]
    # The approved request is the rendered one: its answer is reused by the same workflow's
    # next run, with no proposal and no call.
    again = run(project).summary
    assert again["actions"]["reply"]["reused"] == 1 and len(sent) == 2


def test_i40_gc_purges_the_turns_of_pruned_runs(emulator: Any, project: Path) -> None:
    _project(project, [{"id": "r0", "text": ONE_CALL}])
    old = run(project).summary["run_id"]
    new = run(project, fresh=True).summary["run_id"]  # a new loop, its own turns

    report = api.gc(1, project)

    assert report["pruned_runs"] == [old] and report["deleted_turns"] == 2
    store = Store(f"sqlite:///{project}/.agac/agac.db")
    try:
        assert store.turn_counts(old) == {}
        assert store.turn_counts(new) == {("reply", "r0"): (1, 1)}
    finally:
        store.close()
