"""Tools per record, web search for Ollama actions at validation: Ollama's search is run by
agac in the record's loop, so it takes ``max_uses`` and the domain filters (applied to the
results) but no ``user_location``, its loop takes ``max_turns``/``max_tool_calls`` with no
function tools, and a missing ``OLLAMA_API_KEY`` is refused at the line of ``tools:``."""

from __future__ import annotations

from agac.config.model import Workflow
from agac.config.websearch import runs_loop, searches_in_loop
from agac.providers.base import WebSearch

BASE = """
input: {path: data.jsonl}
actions:
"""


def test_i40_ollama_web_search_config_takes_its_options_and_loop_bounds(wf, monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-test")
    checked = wf.check(
        BASE
        + """
  - name: a
    model: ollama/llama3.2
    prompt: x
    tools: [{web_search: {max_uses: 2, blocked_domains: [spam.example]}}]
    max_turns: 4
    max_tool_calls: 3
  - {name: b, model: ollama/llama3.2, prompt: x, run_mode: batch, tools: [web_search]}
"""
    )
    assert [p for p in checked.problems if p.severity == "error"] == []
    a = checked.workflow.action("a")
    assert a.web_search == WebSearch(2, (), ("spam.example",))
    assert (a.max_turns, a.max_tool_calls) == (4, 3)
    assert runs_loop(a) and runs_loop(checked.workflow.action("b"))
    # The bounds are kept in the run's stored config (a resumed run reads them back).
    again = Workflow.from_snapshot(checked.workflow.snapshot())
    assert again.action("a") == a
    assert searches_in_loop("ollama") and not searches_in_loop("anthropic")


def test_i40_ollama_web_search_config_refuses_what_it_cannot_do(wf, monkeypatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    checked = wf.check(
        BASE
        + """
  - {name: a, model: ollama/llama3.2, prompt: x, tools: [web_search]}
  - {name: b, model: ollama/llama3.2, prompt: x, tools: [{web_search: {user_location: {city: Lyon}}}]}
  - {name: c, model: ollama/llama3.2, prompt: x, tools: [web_search, {function: tools.s:find, name: web_search}]}
"""
    )
    (clash,) = [p for p in checked.problems if "function tool of that name" in p.message]
    assert clash.line == checked.line_of("name: c,") and clash.code == "invalid_value"
    keys = [p for p in checked.problems if p.code == "missing_credentials"]
    assert {p.line for p in keys} == {checked.line_of(f"name: {n},") for n in "abc"}
    assert all("OLLAMA_API_KEY" in p.message and p.path.endswith(".tools") for p in keys)
    (option,) = [p for p in checked.problems if p.code == "web_search_unsupported"]
    assert option.line == checked.line_of("name: b,")
    assert "not 'user_location'" in option.message
