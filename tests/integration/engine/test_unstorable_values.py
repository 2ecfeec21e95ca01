"""Values no store can hold fail their record or unit, not the run (issue 29 item 13),
on SQLite and PostgreSQL (which refuses lone surrogates in text too).

An escaped lone surrogate (``"\\ud800"``) in one JSONL record used to stop the whole run
at admission with a store error naming no file or line; a tool returning one left the
run ``running``, dying the same way on every rerun. Now the record fails
``invalid_input`` with file:line, the unit ``tool_error``, and the rest run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agac import api
from agac.testing import write_project

WORKFLOW = """\
name: wf
input: {path: data/a.jsonl, id_field: id}
defaults: {model: mock/m1}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
  - name: tool
    kind: tool
    dependencies: [ask]
    function: tools.t:tool
"""

TOOL = """\
def tool(inputs, ctx):
    if inputs["source"]["id"] == 3:
        return {"name": "tool \\udc80"}
    if inputs["source"]["id"] == 4:
        raise ValueError("a message with \\ud800 in it")
    return {"ok": inputs["source"]["id"]}
"""

LINES = [
    '{"id": 1, "text": "fine"}',
    '{"id": 2, "text": "bad \\ud800 text"}',
    '{"id": 3, "text": "fine, the tool is not"}',
    '{"id": 4, "text": "fine, the tool raises"}',
    '{"id": "\\udc80", "text": "a key that cannot be stored"}',
    '{"id": 6, "text": "a pair is fine \\ud83d\\ude00"}',
    '{"id": 7, "text": NaN}',
    '{"id": 8, "text": 1e999}',
]


def _rows(action: str, root: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("wf", action, root)}


def test_i29_13_lone_surrogate_in_one_jsonl_record_fails_that_record(project: Path) -> None:
    write_project(
        project,
        WORKFLOW,
        data={"data/a.jsonl": LINES},
        files={"tools/__init__.py": "", "tools/t.py": TOOL},
    )

    summary = api.run("wf", project).summary.to_dict()

    assert summary["state"] == "partial", summary
    ask = _rows("ask", project)
    assert {k for k, r in ask.items() if r["status"] == "answered"} == {"1", "3", "4", "6"}
    for key, line, said in (
        ("a.jsonl:2", 2, "a lone surrogate (\\ud800) at text"),
        ("a.jsonl:5", 5, "a lone surrogate (\\udc80) at id"),
        ("a.jsonl:7", 7, "NaN is not JSON"),
        ("a.jsonl:8", 8, "1e999 is too large for a float"),
    ):
        assert (ask[key]["status"], ask[key]["reason"]) == ("failed", "invalid_input"), ask[key]
        assert ask[key]["detail"].startswith(f"a.jsonl:{line}: "), ask[key]
        assert said in ask[key]["detail"], ask[key]
    assert "pair is fine \U0001f600" in ask["6"]["output"]["text"]


def test_i29_13_lone_surrogate_from_a_tool_fails_the_unit_and_the_run_ends(project: Path) -> None:
    write_project(
        project,
        WORKFLOW,
        data={"data/a.jsonl": LINES},
        files={"tools/__init__.py": "", "tools/t.py": TOOL},
    )

    first = api.run("wf", project).summary.to_dict()
    again = api.run("wf", project).summary.to_dict()

    assert first["state"] == again["state"] == "partial"
    tool = _rows("tool", project)
    assert (tool["3"]["status"], tool["3"]["reason"]) == ("failed", "tool_error")
    assert "a lone surrogate (\\udc80) at name" in tool["3"]["detail"]
    assert (tool["4"]["status"], tool["4"]["reason"]) == ("failed", "tool_error")
    assert tool["4"]["detail"] == "ValueError: a message with \\ud800 in it"
    assert tool["1"]["output"] == {"ok": 1}
    session = api.record_session("4", project)
    json.dumps(session).encode("utf-8")  # the stored traceback is storable text


def test_i29_13_lone_surrogate_in_records_given_in_memory_fails_that_record(project: Path) -> None:
    write_project(
        project,
        WORKFLOW,
        data={"data/a.jsonl": LINES[:1]},
        files={"tools/__init__.py": "", "tools/t.py": TOOL},
    )

    result = api.run("wf", project, records=[{"id": 1, "text": "ok"}, {"id": 2, "text": "b\ud800"}])

    ask = _rows("ask", project)
    assert result.summary.to_dict()["actions"]["ask"]["answered"] == 1
    (bad,) = [r for r in ask.values() if r["status"] == "failed"]
    assert bad["reason"] == "invalid_input"
    assert "a lone surrogate (\\ud800) at text" in bad["detail"]
