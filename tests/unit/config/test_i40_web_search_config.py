"""Tools per record, configuration of the provider's web search: ``tools: [web_search]``
(or with its options), refused at its file and line on a provider or model without one,
with an option the provider does not take, or in a batch that cannot search."""

from __future__ import annotations

from agac.providers.base import WebSearch

BASE = """
input: {path: data.jsonl}
actions:
"""


def _messages(checked) -> list[str]:
    return [p.message for p in checked.problems if p.code == "web_search_unsupported"]


def _codes(checked) -> dict[int, set[str]]:
    by_line: dict[int, set[str]] = {}
    for p in checked.problems:
        by_line.setdefault(p.line, set()).add(p.code)
    return by_line


def test_i40_web_search_config_reads_the_entry_and_its_options(wf, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    checked = wf.check(
        BASE
        + """
  - {name: plain, model: gemini/gemini-2.5-flash, prompt: x, tools: [web_search]}
  - name: narrow
    model: anthropic/claude-sonnet-4-5
    prompt: x
    tools:
      - web_search:
          max_uses: 3
          allowed_domains: [who.int, cdc.gov]
          user_location: {city: Lyon, country: FR}
"""
    )
    assert [p for p in checked.problems if p.severity == "error"] == []
    actions = {a.name: a for a in checked.workflow.actions}
    assert actions["plain"].web_search == WebSearch()
    assert actions["plain"].tools == ()
    assert actions["narrow"].web_search == WebSearch(
        3, ("who.int", "cdc.gov"), (), (("city", "Lyon"), ("country", "FR"))
    )


def test_i40_web_search_validation_errors_name_the_line(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - {name: a, model: groq/llama-3.3-70b-versatile, prompt: x, tools: [web_search]}
  - {name: b, model: ollama/llama3.2, prompt: x, tools: [web_search]}
  - {name: c, model: openai/gpt-4o-mini, prompt: x, tools: [web_search]}
  - {name: d, model: gemini/gemini-2.5-flash, prompt: x, tools: [{web_search: {max_uses: 2}}]}
  - {name: e, model: openai/gpt-4o-search-preview, prompt: x, tools: [web_search], run_mode: batch}
  - {name: f, model: anthropic/claude-sonnet-4-5, prompt: x, tools: [{web_search: {allowed_domains: [a.org], blocked_domains: [b.org]}}]}
  - {name: g, model: anthropic/claude-sonnet-4-5, prompt: x, tools: [{web_search: {max_results: 2}}]}
  - {name: h, model: anthropic/claude-sonnet-4-5, prompt: x, tools: [web_search], max_turns: 3}
  - {name: i, model: anthropic/claude-sonnet-4-5, prompt: x, tools: [web_search], run_mode: batch}
  - {name: j, model: gemini/gemini-2.5-flash, prompt: x, tools: [web_search], run_mode: batch}
  - {name: k, model: vertex/gemini-2.5-flash, prompt: x, tools: [web_search]}
  - {name: l, model: vertex/claude-sonnet-4-5, prompt: x, tools: [web_search]}
  - {name: m, model: vertex/gemini-2.5-flash, prompt: x, tools: [web_search], run_mode: batch}
  - {name: n, model: gemini/gemini-2.5-flash, prompt: x, tools: [web_search], schema: {type: object}}
  - {name: o, model: gemini/gemini-3-pro-preview, prompt: x, tools: [web_search], schema: {type: object}}
  - {name: p, model: openai/gpt-4o-search-preview, prompt: x, tools: [web_search, tools.orders:lookup]}
  - {name: q, model: anthropic/claude-sonnet-4-5, prompt: x, tools: [{web_search: null, max_uses: 2}]}
"""
    )
    by_line = _codes(checked)
    # b (Ollama) searches, agac running its web search API; c (OpenAI) too, in Responses.
    for name in "adelmnp":
        assert "web_search_unsupported" in by_line.get(checked.line_of(f"name: {name},"), set()), (
            name,
            checked.problems,
        )
    assert "invalid_value" in by_line[checked.line_of("name: f,")]
    assert any("Vertex AI batch prediction jobs" in m for m in _messages(checked))
    assert any("cannot answer in a JSON schema while it searches" in m for m in _messages(checked))
    assert "unknown_key" in by_line[checked.line_of("name: g,")]
    # Options beside the entry instead of under it.
    assert "invalid_value" in by_line[checked.line_of("name: q,")]
    # Bounds of a tool loop with no function tools would do nothing.
    assert "invalid_value" in by_line[checked.line_of("name: h,")]
    # Anthropic's and Gemini's batches search; OpenAI's models search (Responses API).
    for name in "cijko":
        assert "web_search_unsupported" not in by_line.get(checked.line_of(f"name: {name},"), set())
    messages = {p.message for p in checked.problems if p.code == "web_search_unsupported"}
    assert any("groq" in m for m in messages)
    assert any("not 'max_uses'" in m for m in messages)
    assert any("online only: OpenAI's Batch API serves no search model" in m for m in messages)
    assert all(p.file for p in checked.problems)


def test_i40_web_search_config_round_trips_and_leaves_other_hashes(wf, monkeypatch) -> None:
    from agac.config.model import Workflow

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    model = "anthropic/claude-sonnet-4-5"
    plain = wf.check(BASE + f"  - {{name: a, model: {model}, prompt: x}}\n").workflow
    assert plain is not None and "web_search" not in plain.snapshot()["actions"][0]
    text = f"  - {{name: a, model: {model}, prompt: x, tools: [{{web_search: {{max_uses: 2}}}}]}}\n"
    searched = wf.check(BASE + text).workflow
    assert searched is not None and searched.config_hash != plain.config_hash
    # A run keeps the web search in its config and reads it back the same.
    again = Workflow.from_snapshot(searched.snapshot())
    assert again.action("a") == searched.action("a")
    assert again.config_hash == searched.config_hash


def test_i40_openai_responses_web_search_config_takes_its_options_and_batch(wf) -> None:
    """OpenAI's web search on any model but a Chat Completions search model is the
    Responses API's tool: it takes max_uses, allowed_domains and user_location, function
    tools beside it, and batches; blocked_domains is refused at its line, and a search
    model keeps its own rules (online only, no functions, user_location only)."""
    checked = wf.check(
        BASE
        + """
  - {name: a, model: openai/gpt-5-mini, prompt: x, tools: [{web_search: {max_uses: 2, allowed_domains: [who.int], user_location: {city: Lyon, country: FR}}}], run_mode: batch}
  - {name: b, model: openai/gpt-4.1, prompt: x, tools: [web_search, tools.orders:lookup], run_mode: batch}
  - {name: c, model: openai/gpt-5-mini, prompt: x, tools: [{web_search: {blocked_domains: [spam.example]}}]}
  - {name: d, model: openai/gpt-4o-search-preview, prompt: x, tools: [{web_search: {allowed_domains: [who.int]}}]}
  - {name: e, model: openai/gpt-5-search-api, prompt: x, tools: [web_search], run_mode: auto}
"""
    )
    by_line = _codes(checked)
    for name in "ab":
        assert "web_search_unsupported" not in by_line.get(checked.line_of(f"name: {name},"), set())
    for name in "cde":
        assert "web_search_unsupported" in by_line[checked.line_of(f"name: {name},")], name
    messages = _messages(checked)
    assert any(
        "Responses API's web_search tool" in m and "'blocked_domains'" in m for m in messages
    )
    assert any("search models" in m and "'allowed_domains'" in m for m in messages)
    assert any("online only" in m and "gpt-5" in m for m in messages)
