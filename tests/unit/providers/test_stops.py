"""Issue 28 item 1: an answer only from a stop that means a complete answer.

The closed tables of agac.providers.stops and the one function that reads them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agac.providers.stops import STOP_TABLES, read_stop

ANSWERS = {
    "anthropic": {"end_turn", "stop_sequence"},
    "openai": {"stop"},
    "groq": {"stop"},
    "azure": {"stop"},
    "gemini": {"STOP"},
    "ollama": {"stop"},
    "deepseek": {"stop"},
    "mistral": {"stop"},
    "together": {"stop", "eos"},
    "openrouter": {"stop"},
    "bedrock": {"end_turn", "stop_sequence"},
    "vllm": {"stop"},
    "xai": {"stop"},
    "fireworks": {"stop"},
}
SRC = Path(__file__).resolve().parents[3] / "src" / "agac" / "providers"


def test_i28_1_only_the_listed_stops_are_answers() -> None:
    for provider, table in STOP_TABLES.items():
        ends = {raw for raw in table if read_stop(provider, raw).reason == "end"}
        assert ends == ANSWERS[provider], provider


@pytest.mark.parametrize("provider", sorted(STOP_TABLES))
def test_i28_1_an_unknown_stop_is_unexpected_with_its_raw_value(provider: str) -> None:
    stop = read_stop(provider, "brand_new_reason_2027")
    assert stop.reason == "unexpected"
    assert stop.raw == "brand_new_reason_2027"
    assert "brand_new_reason_2027" in (stop.detail or "")
    missing = read_stop(provider, None)
    assert missing.reason == "unexpected" and "no stop reason" in (missing.detail or "")


def test_i28_1_a_tool_call_nobody_asked_for_is_unexpected() -> None:
    for provider, raw in (
        ("anthropic", "tool_use"),
        ("openai", "tool_calls"),
        ("groq", "tool_calls"),
        ("openai", "function_call"),
        ("gemini", "UNEXPECTED_TOOL_CALL"),
    ):
        stop = read_stop(provider, raw)
        assert stop.reason == "unexpected", (provider, raw)
        assert raw in (stop.detail or "") and "did not ask for" in (stop.detail or "")
    # Anthropic's forced ``answer`` tool is the answer agac asked for.
    assert read_stop("anthropic", "tool_use", tool_answer=True).reason == "end"


def test_i28_1_explicit_rules_for_the_documented_values() -> None:
    assert read_stop("anthropic", "max_tokens").reason == "max_tokens"
    assert read_stop("anthropic", "model_context_window_exceeded").reason == "max_tokens"
    assert read_stop("anthropic", "refusal").reason == "refusal"
    assert read_stop("anthropic", "pause_turn").reason == "paused"
    assert read_stop("openai", "length").reason == "max_tokens"
    assert read_stop("openai", "content_filter").reason == "content_filter"
    assert read_stop("gemini", "MAX_TOKENS").reason == "max_tokens"
    assert read_stop("gemini", "SAFETY", detail="safety: X").detail == "safety: X"
    assert read_stop("gemini", "OTHER").reason == "unexpected"
    assert read_stop("ollama", "length").reason == "max_tokens"
    assert read_stop("ollama", "load").reason == "unexpected"
    # A refusal beside the finish reason (OpenAI message.refusal) wins over "stop".
    refused = read_stop("openai", "stop", refusal="I can't help with that.")
    assert refused.reason == "refusal" and refused.detail == "I can't help with that."
    blocked = read_stop("gemini", None, blocked="PROHIBITED_CONTENT", detail="not allowed")
    assert (blocked.reason, blocked.raw) == ("content_filter", "PROHIBITED_CONTENT")
    assert blocked.detail == "the prompt was blocked: not allowed"


def test_i28_1_no_adapter_keeps_a_stop_table_of_its_own() -> None:
    """One function decides: no adapter maps stop values itself."""
    for path in SRC.glob("*.py"):
        if path.name == "stops.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {
            t.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign | ast.AnnAssign)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        assert "STOP_REASONS" not in names, path.name
        text = path.read_text(encoding="utf-8")
        for field in ('stop_reason"', 'finish_reason"', 'done_reason"'):
            if field in text:
                assert "read_stop(" in text, f"{path.name} reads {field} without read_stop"


def test_i28_9_docs_have_one_table_per_provider_with_every_rule() -> None:
    docs = (SRC.parents[2] / "docs" / "providers.md").read_text(encoding="utf-8")
    section = docs.split('<a id="stop-reasons"></a>', 1)[1].split("\n### ", 2)[1]
    titles = {
        "anthropic": "**Anthropic**",
        "openai": "**OpenAI**",
        "gemini": "**Gemini**",
        "ollama": "**Ollama**",
        "groq": "**Groq**",
        "azure": "**Azure**",
        "deepseek": "**DeepSeek**",
        "mistral": "**Mistral**",
        "together": "**Together**",
        "openrouter": "**OpenRouter**",
        "bedrock": "**Bedrock**",
        "vllm": "**vLLM**",
        "xai": "**xAI**",
        "fireworks": "**Fireworks**",
    }
    for provider, table in STOP_TABLES.items():
        start = section.index(titles[provider])
        own = section[start:].split("\n**", 1)[0]
        inherits = (
            "groq",
            "azure",
            "deepseek",
            "together",
            "openrouter",
            "vllm",
            "xai",
            "fireworks",
        )
        if provider in inherits:
            own = section[section.index(titles["openai"]) :] + own
        for raw in table:
            assert f"`{raw}`" in own, (provider, raw)
