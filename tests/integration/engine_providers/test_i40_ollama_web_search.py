"""Tools per record: web search for Ollama actions. Ollama's models search through
Ollama's web search API, which agac runs itself: the model is offered a ``web_search``
function, each call a durable turn of the record's loop, sent to the API (the emulator's
``/api/web_search``, named by ``OLLAMA_WEB_SEARCH_URL``) with the ``OLLAMA_API_KEY``, its
results sent back and kept as the answer's citations, every search in the ledger.
Online on both transports (the ``project`` fixture: the chat over the ollama SDK or
agac's lean client; the search always on agac's own client).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_support import chat_requests, project_yml

from agac import api
from agac.errors import ConfigError
from agac.testing import write_project

SEARCH = '[[emulator calls: web_search {"query": "tallest tower", "max_results": 2}]]'
TWO_SEARCHES = (
    '[[emulator calls: web_search {"query": "tallest tower"}]] '
    '[[emulator calls: web_search {"query": "longest river", "max_results": 3}]]'
)


def _project(
    root: Path, texts: dict[str, str], tools: str = "[web_search]", extra: str = ""
) -> None:
    workflow = f"""name: ground
input: {{path: data/, id_field: id}}
defaults:
  model: ollama/llama3.2
  max_tokens: 4096
  timeout: 10s
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 50ms}}}}
actions:
  - name: claim
    prompt: "Find a source for: {{{{ source.text }}}}"
    tools: {tools}
{extra}"""
    write_project(
        root,
        workflow,
        agac_yml=project_yml(),
        data={"data/in.jsonl": [{"id": k, "text": v} for k, v in texts.items()]},
    )


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("ground", "claim", root)}


def _entry(root: Path, key: str) -> dict[str, Any]:
    session = api.record_session(key, root)
    (entry,) = [a for a in session["actions"] if a["action"] == "claim"]
    return dict(entry)


def _searches(emulator: Any) -> int:
    return int(emulator.stats()["searches"].get("ollama", 0))


def test_i40_ollama_web_search_loop_searches_then_answers_with_citations(
    emulator: Any, project: Path
) -> None:
    _project(project, {"r0": f"the tallest tower {SEARCH}", "r1": "no search needed"})

    summary = api.run("ground", project).summary

    assert summary["actions"]["claim"]["answered"] == 2, _rows(project)
    assert _searches(emulator) == 1
    assert chat_requests(emulator.stats(), "ollama") == 3  # r0: search turn + answer; r1: one
    # The model is offered the web_search function on every turn, in Ollama's form.
    bodies = [r["body"] for r in emulator.requests() if r["op"] == "chat"]
    for body in bodies:
        names = [t["function"]["name"] for t in body["tools"]]
        assert names == ["web_search"]
    # The search's results went back to the model as the tool's result.
    answered = [b for b in bodies if any(m["role"] == "tool" for m in b["messages"])]
    (tool_msg,) = [m for m in answered[0]["messages"] if m["role"] == "tool"]
    results = json.loads(tool_msg["content"])["results"]
    assert [r["url"] for r in results] == [u["url"] for u in _emulated("tallest tower", 2)]
    rows = _rows(project)
    assert (rows["r0"]["turns"], rows["r0"]["tool_calls"]) == (2, 1)
    cited = rows["r0"]["citations"]
    assert [c["url"] for c in cited] == [r["url"] for r in results]
    assert cited[0]["title"] == "Emulated page 1 for tallest tower"
    assert cited[0]["cited_text"] == "Emulated passage 1 about tallest tower."
    assert not rows["r1"]["citations"]


def _emulated(query: str, n: int) -> list[dict[str, str]]:
    from agac.emulator.ollama import search_results

    return search_results(query, n)


def test_i40_ollama_web_search_citations_in_records_show_export_and_ledger(
    emulator: Any, project: Path, capsys: Any
) -> None:
    from agac.cli.render import print_session

    _project(project, {"r0": f"two things {TWO_SEARCHES}", "r1": f"one thing {SEARCH}"})

    assert api.run("ground", project).summary["state"] == "succeeded"

    # Every search the emulator answered is one web_search use in the ledger, at $0
    # (Ollama's search is free within its plan limits).
    assert _searches(emulator) == 3
    attempts = [a for key in ("r0", "r1") for a in _entry(project, key)["attempts"]]
    searched = [a for a in attempts if a["server_tools"].get("web_search")]
    assert sum(a["server_tools"]["web_search"] for a in searched) == 3
    assert {(a["kind"], a["provider"], a["model"]) for a in searched} == {
        ("tool", "ollama", "llama3.2")
    }
    assert all(a["cost_usd"] == 0 for a in searched)
    (cost_row,) = [r for r in api.cost("ground", project)["rows"] if r["kind"] == "tool"]
    assert cost_row["server_tools"] == {"web_search": 3}
    # records show prints the loop turn by turn and the citations.
    entry = _entry(project, "r0")
    assert entry["request"]["web_search"] == {}
    cited = entry["response"]["citations"]
    assert len(cited) == 5 + 3  # 5 results by default, then the 3 asked for
    capsys.readouterr()
    print_session(api.record_session("r0", project))
    shown = capsys.readouterr().out
    assert 'turn 1: calls web_search({"query": "tallest tower"})' in shown
    assert "result of web_search: 5 results: https://example.com/search/" in shown
    assert f"[1] {cited[0]['url']}" in shown
    out = project / "claims.jsonl"
    api.export_action("ground", "claim", out, project=project)
    by_key = {r["key"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert by_key["r0"]["citations"] == cited


def test_i40_ollama_web_search_max_uses_tells_the_model_the_limit(
    emulator: Any, project: Path
) -> None:
    _project(project, {"r0": f"two things {TWO_SEARCHES}"}, tools="[{web_search: {max_uses: 1}}]")

    summary = api.run("ground", project).summary

    assert summary["actions"]["claim"]["answered"] == 1
    assert _searches(emulator) == 1  # the second call was never sent
    turns = _entry(project, "r0")["turns"]
    results = [t for t in turns if t["kind"] == "tool"]
    assert results[0].get("code") is None
    assert results[1]["code"] == "web_search_limit"
    assert "max_uses" in results[1]["error"]
    assert json.loads(results[1]["content"]) == {"error": results[1]["error"]}
    (row,) = _rows(project).values()
    assert (row["turns"], row["tool_calls"]) == (3, 2)
    assert len(row["citations"]) == 5  # the one search made


def test_i40_ollama_web_search_domain_filters_apply_to_the_results(
    emulator: Any, project: Path
) -> None:
    _project(
        project,
        {"r0": f"the tallest tower {SEARCH.replace('2}', '4}')}"},
        tools="[{web_search: {allowed_domains: [example.org]}}]",
    )

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 1

    (row,) = _rows(project).values()
    assert [c["url"].split("/")[2] for c in row["citations"]] == ["example.org", "example.org"]


def test_i40_ollama_web_search_failure_is_a_tool_error_the_model_sees(
    emulator: Any, project: Path
) -> None:
    emulator.add_fault(
        {"provider": "ollama", "op": "web_search", "times": 1, "fault": {"http": 503}}
    )
    _project(project, {"r0": f"the tallest tower {SEARCH}"})

    summary = api.run("ground", project).summary

    assert summary["actions"]["claim"]["answered"] == 1
    (result,) = [t for t in _entry(project, "r0")["turns"] if t["kind"] == "tool"]
    assert result["code"] == "web_search_failed"
    assert "503" in result["error"]
    bodies = [r["body"] for r in emulator.requests() if r["op"] == "chat"]
    (tool_msg,) = [m for m in bodies[-1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_msg["content"])["error"] == result["error"]
    failed = [a for a in _entry(project, "r0")["attempts"] if a["kind"] == "tool"]
    assert [(a["status"], a["server_tools"]) for a in failed] == [("error", {})]
    assert not _rows(project)["r0"]["citations"]


def test_i40_ollama_web_search_missing_key_is_refused_naming_the_line(
    emulator: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY")
    _project(project, {"r0": "anything"})

    with pytest.raises(ConfigError) as err:
        api.run("ground", project)

    (problem,) = [p for p in err.value.problems if p.code == "missing_credentials"]
    assert "OLLAMA_API_KEY" in problem.message and "web_search" in problem.message
    assert problem.line == 11  # tools: [web_search]
    assert "OLLAMA_API_KEY" in (problem.hint or "")
    assert chat_requests(emulator.stats(), "ollama") == 0


def test_i40_ollama_web_search_priced_by_prices_in_the_ledger_and_plan(
    emulator: Any, project: Path
) -> None:
    _project(project, {"r0": f"the tallest tower {SEARCH}"}, tools="[{web_search: {max_uses: 2}}]")
    yml = project / "agac.yml"
    yml.write_text(
        yml.read_text() + "prices:\n  ollama/llama3.2: {input: 0, output: 0, web_search: 5}\n",
        encoding="utf-8",
    )

    plan = api.plan("ground", project)
    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 1

    # A fee set in prices: (USD per 1,000) prices each search sent; the plan counts the
    # searches each request may make (max_uses) at that fee.
    assert _searches(emulator) == 1
    searched = [a for a in _entry(project, "r0")["attempts"] if a["server_tools"]]
    assert [a["cost_usd"] for a in searched] == [pytest.approx(0.005)]
    assert api.cost("ground", project)["cost_usd"] == pytest.approx(0.005)
    assert plan["cost_usd"]["online"] == pytest.approx(2 * 0.005)


def test_i40_ollama_web_search_in_a_local_batch(emulator: Any, project: Path) -> None:
    """Ollama has no batch API: a ``run_mode: batch`` action runs its records here as live
    calls, each record's loop searching as online."""
    _project(project, {"r0": f"the tallest tower {SEARCH}"}, extra="    run_mode: batch\n")

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 1

    assert _searches(emulator) == 1
    (row,) = _rows(project).values()
    assert (row["turns"], row["tool_calls"]) == (2, 1)
    assert len(row["citations"]) == 2


def test_i40_ollama_web_search_beside_a_function_tool_and_reused(
    emulator: Any, project: Path
) -> None:
    """A model that searches and calls the project's function in one turn: both run, both
    results go back together; a second run reuses the stored answer, its citations with it,
    and searches nothing."""
    _project(project, {}, tools="[web_search, tools.orders:lookup]")
    (project / "tools").mkdir()
    (project / "tools" / "__init__.py").write_text("")
    (project / "tools" / "orders.py").write_text(
        'def lookup(order_id: str) -> dict:\n    """Find an order."""\n'
        '    return {"order": order_id}\n'
    )
    both = (
        '[[emulator calls: web_search {"query": "carrier A1", "max_results": 1}'
        ' | lookup {"order_id": "A1"}]]'
    )
    (project / "data" / "in.jsonl").write_text(
        json.dumps({"id": "r0", "text": f"order {both}"}) + "\n", encoding="utf-8"
    )

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 1

    (row,) = _rows(project).values()
    assert (row["turns"], row["tool_calls"]) == (2, 2)
    assert [c["title"] for c in row["citations"]] == ["Emulated page 1 for carrier A1"]
    bodies = [r["body"] for r in emulator.requests() if r["op"] == "chat"]
    names = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert names == ["lookup", "web_search"]
    tool_names = [m["tool_name"] for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert tool_names == ["web_search", "lookup"]

    assert api.plan("ground", project)["actions"]["claim"]["reusable"] == 1
    assert api.run("ground", project, new=True).summary["actions"]["claim"]["answered"] == 1
    assert _searches(emulator) == 1  # the second run asked and searched nothing
    assert len(bodies) == len([r for r in emulator.requests() if r["op"] == "chat"])
    (again,) = _rows(project).values()
    assert again["citations"] == row["citations"]
