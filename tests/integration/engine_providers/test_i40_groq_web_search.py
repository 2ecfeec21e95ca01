"""Tools per record: web search on Groq (``tools: [web_search]``) online on both
transports (the ``project`` fixture) against the emulator: browser search on a GPT-OSS
model (``tools: [{type: browser_search}]``) and a Compound system's own search (its
``search_settings`` and enabled tools), the sources of the answer's ``executed_tools`` kept
as its citations (records show, export, the Python API) and every search in the ledger at
Groq's fee, equal to the emulator's bill.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_support import chat_requests, project_yml

from agac import api
from agac.providers.base import Usage
from agac.providers.pricing import PriceTable
from agac.testing import write_project

BROWSER = "openai/gpt-oss-120b"
COMPOUND = "groq/compound"
COMPOUND_PRICES = """prices:
  groq/groq/compound: {input: 0.15, output: 0.6}
"""


def _project(root: Path, model: str, tools: str | None = "[web_search]", extra: str = "") -> None:
    workflow = f"""name: ground
input: {{path: data/, id_field: id}}
defaults:
  model: groq/{model}
  max_tokens: 256
  timeout: 10s
  retry: {{max_attempts: 2, backoff: {{initial: 10ms, max: 50ms}}}}
actions:
  - name: claim
    prompt: "Find a source for: {{{{ source.text }}}}"
{f"    tools: {tools}" if tools else ""}
{extra}"""
    write_project(
        root,
        workflow,
        agac_yml=project_yml() + (COMPOUND_PRICES if model == COMPOUND else ""),
        data={
            "data/in.jsonl": [
                {"id": "r0", "text": "the tallest tower [[emulator searches: 2]]"},
                {"id": "r1", "text": "the longest river"},
            ]
        },
    )


def _prices(model: str) -> PriceTable:
    """The project's prices: the Compound system's tokens as agac.yml gives them."""
    overrides = {"groq/groq/compound": {"input": 0.15, "output": 0.6}}
    return PriceTable(overrides if model == COMPOUND else None)


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("ground", "claim", root)}


def _attempts(root: Path, key: str) -> list[dict[str, Any]]:
    session = api.record_session(key, root)
    (entry,) = [a for a in session["actions"] if a["action"] == "claim"]
    return list(entry["attempts"])


def _token_cost(price: Any, a: dict[str, Any]) -> float:
    return (
        a["input_tokens"] * price.input
        + a["cached_tokens"] * (price.cached_input or price.input)
        + a["output_tokens"] * price.output
    ) / 1e6


@pytest.mark.parametrize("model", [BROWSER, COMPOUND])
def test_i40_groq_web_search_live_answers_with_citations_and_bills_every_search(
    emulator: Any, project: Path, model: str
) -> None:
    _project(project, model)

    summary = api.run("ground", project).summary

    assert summary["actions"]["claim"]["answered"] == 2, _rows(project)
    assert chat_requests(emulator.stats(), "groq") == 2
    rows = _rows(project)
    for row in rows.values():
        assert row["citations"], row
        assert all(c["url"].startswith("https://example.com/emulated/") for c in row["citations"])
    assert len(rows["r0"]["citations"]) == 2
    # r0 searched twice, r1 once: Groq bills each search it ran.
    searched = emulator.stats()["searches"]["groq"]
    assert searched == 3
    price = _prices(model).get(f"groq/{model}")
    assert price is not None
    fee = dict(price.tools)["web_search"]
    assert fee == {BROWSER: 0.005, COMPOUND: 0.008}[model]
    attempts = [a for key in rows for a in _attempts(project, key)]
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == searched
    for a in attempts:
        searches = a["server_tools"].get("web_search", 0)
        assert a["cost_usd"] == pytest.approx(_token_cost(price, a) + searches * fee, abs=1e-6)
    assert api.cost("ground", project)["rows"][0]["server_tools"] == {"web_search": searched}


def test_i40_groq_web_search_citations_in_records_show_export_and_api(
    emulator: Any, project: Path, capsys: Any
) -> None:
    from agac.cli.render import print_session

    _project(project, BROWSER)
    assert api.run("ground", project).summary["state"] == "succeeded"

    session = api.record_session("r1", project)
    (entry,) = [a for a in session["actions"] if a["action"] == "claim"]
    assert entry["request"]["web_search"] == {}
    cited = entry["response"]["citations"]
    assert cited and cited[0]["url"].startswith("https://example.com/emulated/")
    # The passage Groq's search gave the model is the cited text.
    assert cited[0]["title"] == "Emulated source 1"
    assert cited[0]["cited_text"] == "Emulated passage 1 of example.com."
    capsys.readouterr()
    print_session(session)
    shown = capsys.readouterr().out
    assert f"[1] {cited[0]['url']}" in shown
    out = project / "claims.csv"
    api.export_action("ground", "claim", out, project=project)
    header, *lines = out.read_text(encoding="utf-8").splitlines()
    assert header.split(",")[-1] == "citations"
    assert cited[0]["url"] in "".join(lines)
    jsonl = project / "claims.jsonl"
    api.export_action("ground", "claim", jsonl, project=project)
    by_key = {r["key"]: r for r in map(json.loads, jsonl.read_text().splitlines())}
    assert by_key["r1"]["citations"] == cited
    wide = {r["key"]: r for r in api.results("ground", project=project)}
    assert json.loads(wide["r1"]["claim#citations"]) == cited


def _bodies(emulator: Any) -> list[dict[str, Any]]:
    return [r["body"] for r in emulator.requests() if r["op"] == "chat"]


def test_i40_groq_web_search_browser_search_goes_as_its_tool(emulator: Any, project: Path) -> None:
    _project(project, BROWSER)

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    bodies = _bodies(emulator)
    assert len(bodies) == 2
    for body in bodies:
        assert body["tools"] == [{"type": "browser_search"}]
        assert "web_search_options" not in body and "search_settings" not in body


def test_i40_groq_web_search_compound_takes_domains_and_country(
    emulator: Any, project: Path
) -> None:
    tools = "[{web_search: {allowed_domains: [who.int], user_location: {country: United States}}}]"
    _project(project, COMPOUND, tools=tools)

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    bodies = _bodies(emulator)
    assert len(bodies) == 2
    for body in bodies:
        assert body["search_settings"] == {
            "include_domains": ["who.int"],
            "country": "united states",
        }
        # Only the tools Groq bills per request: no hourly code execution or browsers.
        assert body["compound_custom"] == {
            "tools": {"enabled_tools": ["web_search", "visit_website"]}
        }
        assert "tools" not in body and "web_search_options" not in body
    # The search kept to the allowed domain.
    for row in _rows(project).values():
        assert all(c["url"].startswith("https://who.int/") for c in row["citations"])


def test_i40_groq_web_search_compound_mini_makes_one_search(emulator: Any, project: Path) -> None:
    _project(project, "groq/compound-mini")
    (project / "agac.yml").write_text(
        project_yml() + "prices:\n  groq/groq/compound-mini: {input: 0.15, output: 0.6}\n"
    )

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    # compound-mini makes one tool call a request, whatever the prompt asks.
    assert emulator.stats()["searches"]["groq"] == 2
    rows = _rows(project)
    assert [len(rows[k]["citations"]) for k in ("r0", "r1")] == [1, 1]
    attempts = [a for key in rows for a in _attempts(project, key)]
    assert [a["server_tools"] for a in attempts] == [{"web_search": 1}, {"web_search": 1}]
    # agac.yml prices its tokens; its searches keep agac's fee of Groq's advanced search.
    price = PriceTable({"groq/groq/compound-mini": {"input": 0.15, "output": 0.6}}).get(
        "groq/groq/compound-mini"
    )
    assert price is not None and dict(price.tools)["web_search"] == 0.008
    for a in attempts:
        assert a["cost_usd"] == pytest.approx(_token_cost(price, a) + 0.008, abs=1e-6)


def test_i40_groq_web_search_plan_counts_a_search_per_request(emulator: Any, project: Path) -> None:
    """Groq takes no ``max_uses``: ``agac plan`` prices one search per request beside its
    tokens (as a budget reserves it)."""
    _project(project, BROWSER)
    plan = api.plan("ground", project)
    entry = plan["actions"]["claim"]
    table = PriceTable()
    tokens = table.cost(f"groq/{BROWSER}", Usage(entry["input_tokens"], entry["output_tokens"]))
    assert plan["cost_usd"]["online"] == pytest.approx(tokens + 2 * 0.005, abs=1e-6)


def test_i40_groq_web_search_compound_searching_unasked_is_still_billed(
    emulator: Any, project: Path
) -> None:
    """A Compound system searches on its own: an action that does not list web_search
    still has every search Groq ran in its ledger (nothing billed goes uncounted)."""
    _project(project, COMPOUND, tools=None)

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    (body, _) = _bodies(emulator)
    assert "compound_custom" not in body and "search_settings" not in body
    searched = emulator.stats()["searches"]["groq"]
    assert searched == 3
    attempts = [a for key in ("r0", "r1") for a in _attempts(project, key)]
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == searched
    assert api.cost("ground", project)["rows"][0]["server_tools"] == {"web_search": searched}


def _browsed_body(model: str) -> dict[str, Any]:
    """A GPT-OSS answer that searched once and opened two pages, as Groq sends it."""
    results = {"results": [{"title": "A", "url": "https://a.org/1", "content": "about a"}]}
    executed = [
        {"index": 0, "type": "browser.search", "arguments": "{}", "search_results": results},
        {
            "index": 1,
            "type": "browser.open",
            "arguments": "{}",
            "browser_results": [{"title": "A", "url": "https://a.org/1", "content": "page"}],
        },
        {
            "index": 2,
            "type": "browser.open",
            "arguments": "{}",
            "browser_results": [{"title": "B", "url": "https://b.org/2", "content": "more"}],
        },
    ]
    message = {"role": "assistant", "content": "Found.", "executed_tools": executed}
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def test_i40_groq_web_search_page_visits_are_billed_beside_searches(
    emulator: Any, project: Path
) -> None:
    """Browser search opens pages: each one Groq reports is a ``visit_website`` use in the
    ledger at its fee, beside the searches, and a source of the answer."""
    _project(project, BROWSER)
    (project / "data" / "in.jsonl").write_text('{"id": "r0", "text": "x"}\n')
    emulator.add_fault(
        {"provider": "groq", "op": "chat", "fault": {"reply": {"body": _browsed_body(BROWSER)}}}
    )

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 1

    (attempt,) = _attempts(project, "r0")
    assert attempt["server_tools"] == {"web_search": 1, "visit_website": 2}
    price = PriceTable().get(f"groq/{BROWSER}")
    assert price is not None
    fees = 0.005 + 2 * 0.001
    assert attempt["cost_usd"] == pytest.approx(_token_cost(price, attempt) + fees, abs=1e-6)
    row = api.cost("ground", project)["rows"][0]
    assert row["server_tools"] == {"web_search": 1, "visit_website": 2}
    assert not row.get("unpriced_tools"), row  # both priced
    assert [c["url"] for c in _rows(project)["r0"]["citations"]] == [
        "https://a.org/1",
        "https://b.org/2",
    ]
