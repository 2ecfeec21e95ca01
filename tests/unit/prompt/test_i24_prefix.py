"""The static head of a prompt template and its late literal blocks, from the Jinja AST
(docs/workflow-reference.md, Prompt caching)."""

from __future__ import annotations

import pytest

from agac.engine.limits.rates import estimate_tokens
from agac.prompt.prefix import late_literal, static_head, text_tokens
from agac.prompt.render import render


@pytest.mark.parametrize(
    "source,head",
    [
        ("Classify this.\n{{ source.text }}", "Classify this.\n"),
        ("{{ source.text }} then text", ""),
        ("{% if source.x %}a{% endif %}b", ""),
        ("{# a note #}Hello {{ source.name }}", "Hello "),
        ("No expression at all.\n", "No expression at all.\n"),
        ("Lead {{- source.text }}", "Lead"),  # whitespace control trims the head as it renders
        ("Raw {% raw %}{{ kept }}{% endraw %} {{ source.x }}", "Raw {{ kept }} "),
        ("", ""),
    ],
)
def test_i24_static_head_is_the_literal_start(source: str, head: str) -> None:
    assert static_head(source) == head
    assert render(source, {"source": {"text": "T", "name": "N", "x": ""}}).startswith(head)


@pytest.mark.parametrize(
    "source,late",
    [
        ("Head {{ source.a }} middle {{ source.b }} a longer tail", " a longer tail"),
        ("Head only", ""),
        ("{{ source.a }}{% if x %} inside a block {% endif %}", ""),
        ("Big head, no tail {{ source.a }}", ""),
    ],
)
def test_i24_late_literal_is_the_longest_block_after_an_expression(source: str, late: str) -> None:
    assert late_literal(source) == late


def test_i24_prefix_tokens_use_the_engine_estimate() -> None:
    for text in ("", "a", "abcd", "abcde", "x" * 4097):
        assert text_tokens(text) == estimate_tokens(len(text))
