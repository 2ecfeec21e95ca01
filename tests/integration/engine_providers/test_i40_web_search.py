"""Tools per record: the provider's own web search (``tools: [web_search]``) online on
both transports (the ``project`` fixture) against the emulator, per provider: the search
goes in the provider's form (Anthropic's ``web_search_20250305`` tool, OpenAI's
``web_search_options`` on a search model, Gemini's ``google_search`` tool), the answer's
citations are kept (records show, export, the Python API) and every search is in the
ledger at the provider's fee, equal to the emulator's bill.
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

SEARCH_MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-4o-mini-search-preview",
    "gemini": "gemini-2.5-flash",
}


def _project(
    root: Path, provider: str, tools: str = "[web_search]", extra: str = "", model: str = ""
) -> None:
    workflow = f"""name: ground
input: {{path: data/, id_field: id}}
defaults:
  model: {provider}/{model or SEARCH_MODELS[provider]}
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


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in api.export_rows("ground", "claim", root)}


def _attempts(root: Path, key: str) -> list[dict[str, Any]]:
    session = api.record_session(key, root)
    (entry,) = [a for a in session["actions"] if a["action"] == "claim"]
    return list(entry["attempts"])


def _token_cost(price: Any, a: dict[str, Any]) -> float:
    return (
        a["input_tokens"] * price.input
        + a["cached_tokens"] * (price.cached_input or 0)
        + a["cache_write_tokens"] * (price.cache_write or 0)
        + a["output_tokens"] * price.output
    ) / 1e6


@pytest.mark.parametrize("provider", tuple(SEARCH_MODELS))
def test_i40_web_search_live_answers_with_citations_and_bills_every_search(
    emulator: Any, project: Path, provider: str
) -> None:
    _project(project, provider)

    summary = api.run("ground", project).summary

    assert summary["actions"]["claim"]["answered"] == 2, _rows(project)
    assert chat_requests(emulator.stats(), provider) == 2
    rows = _rows(project)
    for row in rows.values():
        assert row["citations"], row
        assert all(c["url"].startswith("https://example.com/emulated/") for c in row["citations"])
    searched = emulator.stats()["searches"][provider]
    # r0 searched twice, r1 once: Anthropic bills each search, OpenAI each call of its
    # search model, Gemini 2.5 each grounded prompt.
    assert searched == {"anthropic": 3, "openai": 2, "gemini": 2}[provider]
    assert len(rows["r0"]["citations"]) == 2
    # The ledger counts every search and prices it at the model's fee per search.
    price = PriceTable().get(f"{provider}/{SEARCH_MODELS[provider]}")
    assert price is not None
    fee = dict(price.tools)["web_search"]
    attempts = [a for key in rows for a in _attempts(project, key)]
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == searched
    for a in attempts:
        searches = a["server_tools"].get("web_search", 0)
        assert a["cost_usd"] == pytest.approx(_token_cost(price, a) + searches * fee, abs=1e-6)
    assert api.cost("ground", project)["rows"][0]["server_tools"] == {"web_search": searched}


@pytest.mark.parametrize("provider", tuple(SEARCH_MODELS))
def test_i40_web_search_citations_in_records_show_export_and_api(
    emulator: Any, project: Path, provider: str, capsys: Any
) -> None:
    from agac.cli.render import print_session

    _project(project, provider)
    assert api.run("ground", project).summary["state"] == "succeeded"

    session = api.record_session("r1", project)
    (entry,) = [a for a in session["actions"] if a["action"] == "claim"]
    # The search is part of the request as stored (and so of its fingerprint).
    assert entry["request"]["web_search"] == {}
    cited = entry["response"]["citations"]
    assert cited and cited[0]["url"].startswith("https://example.com/emulated/")
    assert set(cited[0]) == {"url", "title", "cited_text"}
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


OPTIONS = {
    "anthropic": (
        "[{web_search: {max_uses: 4, blocked_domains: [spam.example], "
        "user_location: {city: Lyon, country: FR}}}]"
    ),
    "openai": "[{web_search: {user_location: {city: Lyon, country: FR}}}]",
    "gemini": "[web_search]",
}


@pytest.mark.parametrize("provider", tuple(SEARCH_MODELS))
def test_i40_web_search_goes_in_each_providers_form_on_both_transports(
    emulator: Any, project: Path, provider: str
) -> None:
    _project(project, provider, tools=OPTIONS[provider])

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    bodies = [r["body"] for r in emulator.requests() if r["op"] == "chat"]
    assert len(bodies) == 2
    body = bodies[0]
    if provider == "anthropic":
        assert body["tools"] == [
            {
                "type": "web_search_20250305",
                "name": "web_search",
                "max_uses": 4,
                "blocked_domains": ["spam.example"],
                "user_location": {"type": "approximate", "city": "Lyon", "country": "FR"},
            }
        ]
    elif provider == "openai":
        assert body["web_search_options"] == {
            "user_location": {
                "type": "approximate",
                "approximate": {"city": "Lyon", "country": "FR"},
            }
        }
    else:
        assert body["tools"] == [{"googleSearch": {}}]


def test_i40_web_search_on_gemini_3_bills_each_query(emulator: Any, project: Path) -> None:
    _project(project, "gemini", model="gemini-3-pro-preview")

    assert api.run("ground", project).summary["actions"]["claim"]["answered"] == 2

    # Gemini 3 bills each search query: r0's two and r1's one.
    assert emulator.stats()["searches"]["gemini"] == 3
    attempts = [a for key in ("r0", "r1") for a in _attempts(project, key)]
    assert sum(a["server_tools"].get("web_search", 0) for a in attempts) == 3
    price = PriceTable().get("gemini/gemini-3-pro-preview")
    assert price is not None and dict(price.tools)["web_search"] == pytest.approx(0.014)


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_i40_web_search_beside_function_tools_online(
    emulator: Any, project: Path, provider: str
) -> None:
    """A loop that also searches: the search offered on every turn, the function's call
    run, the final answer's citations kept and its searches billed."""
    _project(project, provider, tools="[web_search, tools.orders:lookup]")
    (project / "tools").mkdir()
    (project / "tools" / "__init__.py").write_text("")
    (project / "tools" / "orders.py").write_text(
        'def lookup(order_id: str) -> dict:\n    """Find an order."""\n'
        '    return {"order": order_id}\n'
    )
    (project / "data" / "in.jsonl").write_text(
        '{"id": "r0", "text": "order [[emulator calls: lookup {\\"order_id\\": \\"A1\\"}]]"}\n'
    )

    summary = api.run("ground", project).summary

    assert summary["actions"]["claim"]["answered"] == 1
    (row,) = _rows(project).values()
    assert (row["turns"], row["tool_calls"]) == (2, 1)
    assert len(row["citations"]) == 1
    bodies = [r["body"] for r in emulator.requests() if r["op"] == "chat"]
    assert len(bodies) == 2
    searched = [t for b in bodies for t in b["tools"] if "googleSearch" in t or "type" in t]
    assert len(searched) == 2  # the search offered on both turns
    assert emulator.stats()["searches"][provider] == 1


def test_i40_web_search_plan_counts_the_searches(emulator: Any, project: Path) -> None:
    """``agac plan`` prices each request's ``max_uses`` searches beside its tokens (as a
    budget reserves them: tests/unit/engine/test_budget_guard.py)."""
    _project(project, "anthropic", tools="[{web_search: {max_uses: 3}}]")
    plain = api.plan("ground", project)
    fee = dict(PriceTable().get("anthropic/claude-sonnet-4-5").tools)["web_search"]  # type: ignore[union-attr]
    tokens = PriceTable().cost(
        "anthropic/claude-sonnet-4-5",
        Usage(
            plain["actions"]["claim"]["input_tokens"], plain["actions"]["claim"]["output_tokens"]
        ),
    )
    # Two requests, three searches each at most.
    assert plain["cost_usd"]["online"] == pytest.approx(tokens + 2 * 3 * fee)


def test_i40_web_search_citations_in_the_wide_results(emulator: Any, project: Path) -> None:
    """``agac.results`` (the wide table, parquet's too) has ``<action>#citations``."""
    _project(project, "gemini")
    assert api.run("ground", project).summary["state"] == "succeeded"

    results = api.results("ground", project=project)
    rows = {r["key"]: r for r in results}
    cited = json.loads(rows["r0"]["claim#citations"])
    assert [c["url"] for c in cited] == [c["url"] for c in _rows(project)["r0"]["citations"]]
    assert len(cited) == 2
    table = results.to_arrow()
    assert "claim#citations" in table.column_names
    out = project / "wide.parquet"
    api.export_table("ground", out, project=project)
    import pyarrow.parquet as pq

    assert "claim#citations" in pq.read_table(out).column_names
