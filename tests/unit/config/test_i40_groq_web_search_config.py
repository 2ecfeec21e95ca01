"""Tools per record, web search on Groq at validation: browser search on its GPT-OSS
models and a Compound system's own search are taken; what Groq lacks is refused at the
line of ``tools:`` (or of ``run_mode:``), naming the option: another Groq model, options
browser search does not take, a ``user_location`` beyond a country or a country code
where Groq takes a name, a schema beside browser search, function tools beside either,
and a batch of a Compound system (Groq's Batch API serves none)."""

from __future__ import annotations

from agac.providers.base import WebSearch

BASE = """
input: {path: data.jsonl}
actions:
"""


def _by_line(checked) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for p in checked.problems:
        if p.code == "web_search_unsupported":
            out.setdefault(p.line, []).append(p.message)
    return out


def test_i40_groq_web_search_config_takes_browser_search_and_compound(wf, monkeypatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test")
    checked = wf.check(
        BASE
        + """
  - {name: a, model: groq/openai/gpt-oss-120b, prompt: x, tools: [web_search]}
  - {name: b, model: groq/openai/gpt-oss-20b, prompt: x, tools: [web_search], run_mode: batch}
  - name: c
    model: groq/groq/compound
    prompt: x
    schema: {type: object}
    tools:
      - web_search:
          blocked_domains: [spam.example]
          user_location: {country: germany}
  - {name: d, model: groq/groq/compound-mini, prompt: x, tools: [web_search]}
"""
    )
    assert _by_line(checked) == {}, checked.problems
    actions = {a.name: a for a in checked.workflow.actions}
    assert actions["a"].web_search == WebSearch()
    assert actions["c"].web_search == WebSearch(
        None, (), ("spam.example",), (("country", "germany"),)
    )


def test_i40_groq_web_search_config_refuses_what_groq_lacks_at_its_line(wf, monkeypatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test")
    checked = wf.check(
        BASE
        + """
  - {name: a, model: groq/llama-3.3-70b-versatile, prompt: x, tools: [web_search]}
  - {name: b, model: groq/openai/gpt-oss-120b, prompt: x, tools: [{web_search: {max_uses: 2}}]}
  - {name: c, model: groq/openai/gpt-oss-120b, prompt: x, tools: [{web_search: {allowed_domains: [who.int]}}]}
  - {name: d, model: groq/groq/compound, prompt: x, tools: [{web_search: {max_uses: 2}}]}
  - {name: e, model: groq/groq/compound, prompt: x, tools: [{web_search: {user_location: {city: Lyon, country: france}}}]}
  - {name: f, model: groq/groq/compound, prompt: x, tools: [{web_search: {user_location: {country: FR}}}]}
  - {name: g, model: groq/openai/gpt-oss-120b, prompt: x, tools: [web_search], schema: {type: object}}
  - {name: h, model: groq/openai/gpt-oss-120b, prompt: x, tools: [web_search, tools.orders:lookup]}
  - {name: i, model: groq/groq/compound, prompt: x, tools: [web_search], run_mode: batch}
"""
    )
    lines = _by_line(checked)

    def said(name: str) -> str:
        return " | ".join(lines.get(checked.line_of(f"name: {name},"), []))

    assert "'llama-3.3-70b-versatile' cannot search" in said("a")
    assert "takes no options, not 'max_uses'" in said("b")
    assert "not 'allowed_domains'" in said("c")
    assert "not 'max_uses'" in said("d")
    assert "takes user_location country, not 'city'" in said("e")
    assert "country's name" in said("f") and "'FR'" in said("f")
    assert "cannot answer in a JSON schema while it searches" in said("g")
    assert "takes no function tools" in said("h")
    assert "Groq's Batch API serves no Compound system" in said("i")
    hints = {p.hint for p in checked.problems if p.code == "web_search_unsupported"}
    assert any("groq/compound" in (h or "") for h in hints)
    assert all(p.file for p in checked.problems)
