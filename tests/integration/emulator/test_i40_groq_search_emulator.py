"""Tools per record: the emulator's web search in Groq's protocol, through the official
``groq`` SDK: browser search on a GPT-OSS model and a Compound system's own search answer
with typed ``executed_tools`` (each search's ``search_results``) and are billed per
search; Groq's 400s where it refuses browser search (another model, a JSON schema); a
Compound system searches unless its enabled tools leave search out, within its
``search_settings``, and ``groq/compound-mini`` once a request."""

from __future__ import annotations

from typing import Any

import groq
import pytest

from agac.emulator.testing import RunningEmulator

ASK = [{"role": "user", "content": "Find it [[emulator searches: 2]]"}]


def _searched(emu: RunningEmulator) -> int:
    return int(emu.stats()["searches"].get("groq", 0))


def test_i40_groq_search_emulator_browser_search_answers_typed_executed_tools(
    emu: RunningEmulator, gq: groq.Groq
) -> None:
    out = gq.chat.completions.create(
        model="openai/gpt-oss-120b", messages=ASK, tools=[{"type": "browser_search"}]
    )

    executed = out.choices[0].message.executed_tools
    assert executed is not None and [t.type for t in executed] == ["browser.search"] * 2
    results = executed[0].search_results
    assert results is not None and results.results
    assert results.results[0].url.startswith("https://example.com/emulated/")  # type: ignore[union-attr]
    assert _searched(emu) == 2


def test_i40_groq_search_emulator_compound_searches_within_its_settings(
    emu: RunningEmulator, gq: groq.Groq
) -> None:
    out = gq.chat.completions.create(
        model="groq/compound",
        messages=ASK,
        search_settings={"include_domains": ["who.int"]},
    )
    executed = out.choices[0].message.executed_tools or []
    assert [t.type for t in executed] == ["search", "search"]
    urls = [r.url for t in executed for r in (t.search_results.results or [])]  # type: ignore[union-attr]
    assert all(u and u.startswith("https://who.int/") for u in urls)
    gq.chat.completions.create(model="groq/compound-mini", messages=ASK)
    assert _searched(emu) == 3  # compound-mini: one tool call a request
    quiet = gq.chat.completions.create(
        model="groq/compound",
        messages=ASK,
        compound_custom={"tools": {"enabled_tools": ["code_interpreter"]}},
    )
    assert not quiet.choices[0].message.executed_tools
    assert _searched(emu) == 3


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("llama-3.3-70b-versatile", {}),
        (
            "openai/gpt-oss-20b",
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "a", "schema": {"type": "object"}},
                }
            },
        ),
    ],
)
def test_i40_groq_search_emulator_refuses_browser_search_as_groq_does(
    emu: RunningEmulator, gq: groq.Groq, model: str, extra: dict[str, Any]
) -> None:
    with pytest.raises(groq.BadRequestError, match="browser_search is not supported"):
        gq.chat.completions.create(
            model=model, messages=ASK, tools=[{"type": "browser_search"}], **extra
        )
    assert _searched(emu) == 0
