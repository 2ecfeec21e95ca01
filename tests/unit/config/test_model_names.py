"""Issue 29, item 9: a model name can only name a model. Names that would change which URL
of the provider a request goes to (``..`` or empty segments, ``?``, ``#``, ``%``, spaces)
are refused at validation with a located ``invalid_model``; the names providers really use
still validate; and where a name goes into a URL it is percent-encoded."""

from __future__ import annotations

import pytest

from agac.errors import FatalError
from agac.providers._common import url_path, url_segment

BASE = """
input: {path: data.jsonl}
actions:
"""

BAD = [
    "gemini/../../_emulator/reset?x=",
    "gemini/models/../../v1/files",
    "openai/gpt-4o mini",
    "openai/gpt#4",
    "openai/%2e%2e",
    "openai//gpt-4o",
    "anthropic/./claude",
    "anthropic/claude/",
    "ollama/llama3?raw=1",
]

GOOD = [
    "openai/gpt-4o-mini",
    "openai/ft:gpt-4o-mini-2024-07-18:acme::9xYz",
    "groq/meta-llama/llama-4-scout-17b-16e-instruct",
    "gemini/models/gemini-2.5-flash",
    "gemini/tunedModels/my-model-123",
    "anthropic/claude-3-5-sonnet@20241022",
    "ollama/llama3.1:8b",
    "ollama/hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
]


@pytest.mark.parametrize("model", BAD)
def test_i29_9_a_model_name_that_leaves_the_path_is_refused_with_its_line(wf, model: str) -> None:
    checked = wf.check(BASE + f"  - name: a\n    model: {model!r}\n    prompt: x\n")
    problem = checked.one("invalid_model")
    assert (problem.file, problem.line) == ("wf.yml", checked.line_of("model:"))
    assert "letters, digits" in problem.message


@pytest.mark.parametrize("model", GOOD)
def test_i29_9_model_names_providers_use_still_validate(wf, model: str) -> None:
    checked = wf.check(BASE + f"  - name: a\n    model: {model!r}\n    prompt: x\n")
    assert [p.code for p in checked.problems if p.code == "invalid_model"] == []


def test_i29_9_a_model_name_in_a_url_is_percent_encoded() -> None:
    assert url_path("models/gemini-2.5-flash") == "models/gemini-2.5-flash"
    assert url_path("models/tuned:v1") == "models/tuned%3Av1"
    assert url_path("claude-3-5-sonnet@20241022") == "claude-3-5-sonnet@20241022"
    # What validation refuses could not escape the path even if it got this far: a query
    # or fragment is encoded, a dot or empty segment (which HTTP clients resolve into
    # another path) is refused.
    assert "?" not in url_path("a?b#c%d e") and "#" not in url_path("a?b#c%d e")
    for name in ("../../_emulator/reset?x=", "models/./x", "a//b", "x/.."):
        with pytest.raises(FatalError, match="not a model name"):
            url_path(name)
    assert url_segment("org/model:v1") == "org%2Fmodel:v1"
