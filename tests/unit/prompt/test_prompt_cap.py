"""Issue 29 item 15: a rendered prompt has a cap. A template that would build a value past
it fails at once with ``PromptTooLarge`` (``prompt_too_large``), with a message that says
so — never an empty ``MemoryError:`` — and nothing is folded at compile time."""

from __future__ import annotations

import pytest

from agac.prompt.render import PromptTooLarge, RenderError, compile_template, render


@pytest.mark.parametrize("source", [
    '{{ "a" * 10**10 }}',
    '{{ 10**10 * "a" }}',
    '{{ ["x"] * 10**12 }}',
    '{{ 10 ** (10 ** 10) }}',
    '{% for i in range(100000) %}{{ "y" * 1000 }}{% endfor %}',
])
def test_i29_15_a_template_past_the_cap_fails_named(source: str) -> None:
    template = compile_template(source, "a.prompt")  # not folded (nor built) here
    with pytest.raises(PromptTooLarge) as caught:
        render(template, {}, limit=1_000_000)
    assert caught.value.code == "prompt_too_large"
    assert "a.prompt" in str(caught.value) and str(caught.value).strip()


def test_i29_15_the_cap_counts_utf8_bytes() -> None:
    assert render("{{ x }}", {"x": "é" * 10}, limit=20) == "é" * 10
    with pytest.raises(PromptTooLarge, match="21 bytes"):
        render("{{ x }}!", {"x": "é" * 10}, limit=20)
    with pytest.raises(PromptTooLarge):
        render("static text over the cap", {}, limit=5)


def test_i29_15_without_a_cap_the_sandbox_still_bounds_values() -> None:
    with pytest.raises(PromptTooLarge):
        render('{{ "a" * 10**10 }}', {})
    assert render("{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ 6 * 7 }}", {}) == "ababab 1024 42"


def test_i29_15_a_memory_error_is_prompt_too_large() -> None:
    class Huge:
        def __str__(self) -> str:
            raise MemoryError

    with pytest.raises(PromptTooLarge, match="ran out of memory"):
        render("{{ x }}", {"x": Huge()}, limit=100)
    assert issubclass(PromptTooLarge, RenderError)
