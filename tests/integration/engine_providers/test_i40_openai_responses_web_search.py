"""Tools per record: OpenAI's web search through the Responses API (``/v1/responses``)
online on both transports (the ``project`` fixture: agac's lean client and the official
SDK) against the emulator: the search goes as the ``web_search`` tool with its domain
filter, location and bound, the conversation as input items (function calls and their
outputs resent whole), the citations come from ``url_citation`` annotations and every
``web_search_call`` is in the ledger at OpenAI's fee, equal to the emulator's bill.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_support import chat_requests, project_yml

from agac import api
from agac.providers.pricing import PriceTable
from agac.testing import write_project

MODEL = "openai/gpt-5-mini"


def _project(root: Path, tools: str = "[web_search]", extra: str = "") -> None:
    workflow = f"""name: ground
input: {{path: data/, id_field: id}}
defaults:
  model: {MODEL}
  max_tokens: 256
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
        data={
            "data/in.jsonl": [
                {"id": "r0", "text": "the tallest tower [[emulator searches: 2]]"},
                {"id": "r1", "text": "the longest river"},
            ]
        },
    )


def _lookup_tool(root: Path) -> None:
    (root / "tools").mkdir()
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "orders.py").write_text(
        'def lookup(order_id: str) -> dict:\n    """Find an order."""\n'
        '    return {"order": order_id, "status": "shipped"}\n'
    )


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("ground", "claim", root)}


def _attempts(root: Path) -> list[dict[str, Any]]:
    out = []
    for key in _rows(root):
        session = api.record_session(key, root)
        for entry in session["actions"]:
            out += entry["attempts"]
    return out


def _bodies(emulator: Any) -> list[dict[str, Any]]:
    return [r["body"] for r in emulator.requests() if r["op"] == "chat"]


def test_i40_openai_responses_web_search_live_cites_and_bills_each_search(
    emulator: Any, project: Path
) -> None:
    _project(project)

    summary = api.run("ground", project).summary

    assert summary["actions"]["claim"]["answered"] == 2, _rows(project)
    assert chat_requests(emulator.stats(), "openai") == 2
    rows = _rows(project)
    assert len(rows["r0"]["citations"]) == 2 and len(rows["r1"]["citations"]) == 1
    for row in rows.values():
        assert all(c["url"].startswith("https://example.com/emulated/") for c in row["citations"])
        assert all(c["title"] and c["cited_text"] for c in row["citations"])
    # Every web_search_call is billed: r0's two and r1's one.
    searched = emulator.stats()["searches"]["openai"]
    assert searched == 3
    attempts = _attempts(project)
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == searched
    price = PriceTable().get(MODEL)
    assert price is not None
    fee = dict(price.tools)["web_search"]
    assert fee == pytest.approx(0.01)  # OpenAI: $10 per 1,000 web search calls
    for a in attempts:
        tokens = (a["input_tokens"] * price.input + a["output_tokens"] * price.output) / 1e6
        tokens += a["cached_tokens"] * (price.cached_input or 0) / 1e6
        searches = a["server_tools"].get("web_search", 0)
        assert a["cost_usd"] == pytest.approx(tokens + searches * fee, abs=1e-6)
    assert api.cost("ground", project)["rows"][0]["server_tools"] == {"web_search": searched}


def test_i40_openai_responses_web_search_filters_location_and_bound_reach_the_wire(
    emulator: Any, project: Path
) -> None:
    tools = (
        "[{web_search: {max_uses: 1, allowed_domains: [who.int, cdc.gov], "
        "user_location: {city: Lyon, country: FR}}}]"
    )
    schema = (
        "    schema: {type: object, properties: {source: {type: string}}, required: [source]}\n"
    )
    _project(project, tools=tools, extra=schema)

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    bodies = _bodies(emulator)
    assert len(bodies) == 2
    body = bodies[0]
    assert "messages" not in body and body["store"] is False
    assert body["tools"] == [
        {
            "type": "web_search",
            "filters": {"allowed_domains": ["who.int", "cdc.gov"]},
            "user_location": {"type": "approximate", "city": "Lyon", "country": "FR"},
        }
    ]
    assert body["max_tool_calls"] == 1
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["input"][0]["role"] == "user"
    rows = _rows(project)
    # The bound holds r0 to one search; the sources are on the allowed domain.
    assert emulator.stats()["searches"]["openai"] == 2
    for row in rows.values():
        assert [c["url"].split("/")[2] for c in row["citations"]] == ["who.int"]
        assert isinstance(row["output"]["source"], str)


def test_i40_openai_responses_web_search_beside_function_tools_online(
    emulator: Any, project: Path
) -> None:
    """The loop on the Responses protocol: the first turn searches and calls the
    function; the next resends the whole conversation (the call and its output, no
    previous_response_id) with the search offered again, and answers with citations."""
    _project(project, tools="[web_search, tools.orders:lookup]")
    _lookup_tool(project)
    (project / "data" / "in.jsonl").write_text(
        '{"id": "r0", "text": "order [[emulator calls: lookup {\\"order_id\\": \\"A1\\"}]]"}\n'
    )

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 1

    (row,) = _rows(project).values()
    assert (row["turns"], row["tool_calls"]) == (2, 1)
    assert len(row["citations"]) == 1
    first, second = _bodies(emulator)
    assert [t["type"] for t in first["tools"]] == ["function", "web_search"]
    assert [t["type"] for t in second["tools"]] == ["function", "web_search"]
    assert "previous_response_id" not in second
    kinds = [i.get("type", "message") for i in second["input"]]
    assert kinds == ["message", "function_call", "function_call_output"]
    call, output = second["input"][1], second["input"][2]
    assert call["name"] == "lookup" and json.loads(call["arguments"]) == {"order_id": "A1"}
    assert output["call_id"] == call["call_id"] and "shipped" in output["output"]
    # One search on each turn, each in the ledger.
    assert emulator.stats()["searches"]["openai"] == 2
    attempts = _attempts(project)
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == 2


def test_i40_openai_responses_web_search_citations_in_records_show_and_export(
    emulator: Any, project: Path, capsys: Any
) -> None:
    from agac.cli.render import print_session

    _project(project)
    assert api.run("ground", project).summary["state"] == "succeeded"

    session = api.record_session("r1", project)
    (entry,) = [a for a in session["actions"] if a["action"] == "claim"]
    assert entry["request"]["web_search"] == {}
    cited = entry["response"]["citations"]
    assert cited and set(cited[0]) == {"url", "title", "cited_text"}
    capsys.readouterr()
    print_session(session)
    assert f"[1] {cited[0]['url']}" in capsys.readouterr().out
    out = project / "claims.jsonl"
    api.export_action("ground", "claim", out, project=project)
    by_key = {r["key"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert by_key["r1"]["citations"] == cited


def test_i40_openai_responses_web_search_plan_counts_max_uses(emulator: Any, project: Path) -> None:
    """``agac plan`` prices each request's ``max_uses`` searches at OpenAI's fee beside
    its tokens, as for the other providers."""
    from agac.providers.base import Usage

    _project(project, tools="[{web_search: {max_uses: 3}}]")
    plan = api.plan("ground", project)
    table = PriceTable()
    fee = dict(table.get(MODEL).tools)["web_search"]  # type: ignore[union-attr]
    claim = plan["actions"]["claim"]
    tokens = table.cost(MODEL, Usage(claim["input_tokens"], claim["output_tokens"]))
    assert plan["cost_usd"]["online"] == pytest.approx(tokens + 2 * 3 * fee, abs=1e-5)


def test_i40_openai_responses_web_search_falls_back_to_json_mode(
    emulator: Any, project: Path
) -> None:
    """A model that refuses ``text.format: json_schema`` (a 400 naming it) is asked again
    in JSON mode — ``json_object``, the schema told in the instructions — and remembered."""
    # (In JSON mode the emulator answers {"answer": "…"}.)
    schema = (
        "    schema: {type: object, properties: {answer: {type: string}}, required: [answer]}\n"
    )
    _project(project, extra=schema)
    message = "Invalid parameter: 'text.format' of type 'json_schema' is not supported."
    emulator.add_fault(
        {
            "provider": "openai",
            "op": "chat",
            "fault": {"http": 400, "code": "invalid_value", "message": message},
            "times": 1,
        }
    )

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    bodies = _bodies(emulator)
    # Three calls: the refused one (json_schema), its record again in JSON mode, and the
    # other record, in json_schema if it was sent before the refusal came, else in JSON mode.
    assert len(bodies) == 3 and bodies[0]["text"]["format"]["type"] == "json_schema"
    again = [b for b in bodies if b["text"]["format"]["type"] == "json_object"]
    assert 1 <= len(again) <= 2
    for body in again:
        assert "JSON Schema" in body["instructions"]
        assert body["tools"] == [{"type": "web_search"}]
    for row in _rows(project).values():
        assert isinstance(row["output"]["answer"], str) and row["citations"]
