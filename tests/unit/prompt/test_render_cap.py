"""Issue 29 item 15 in the renderer: under a cap, a template that would build a value past
it fails at once with ``PromptTooLarge`` (``prompt_too_large``) and a message that says
so — never an empty ``MemoryError:`` — nothing is folded at compile time, and output is
stopped as soon as it is past the cap."""

from __future__ import annotations

import pytest

from agac.config.model import DEFAULT_MAX_PROMPT_CHARS
from agac.prompt.render import (
    DEFAULT_MAX_PROMPT_CHARS as RENDER_DEFAULT,
)
from agac.prompt.render import (
    PromptTooLarge,
    RenderError,
    capped,
    compile_template,
    render,
)


@pytest.mark.parametrize(
    "source",
    [
        '{{ "a" * 10**10 }}',
        '{{ 10**10 * "a" }}',
        '{{ ["x"] * 10**12 }}',
        "{{ 10 ** (10 ** 10) }}",
        '{% for i in range(100000) %}{{ "y" * 1000 }}{% endfor %}',
    ],
)
def test_i29_15_a_template_past_the_cap_fails_named(source: str) -> None:
    template = compile_template(source, "a.prompt")  # neither folded nor built here
    with pytest.raises(PromptTooLarge) as caught:
        capped(template, {}, 1_000_000)
    assert caught.value.reason == "prompt_too_large"
    assert str(caught.value).strip() and "MemoryError" not in str(caught.value)


def test_i29_15_a_loop_is_stopped_once_past_the_cap() -> None:
    """A loop writing a long field many times is refused at the cap, not after it built
    the whole text (here 100,000 × 100 kB = 10 GB)."""
    with pytest.raises(PromptTooLarge, match="more than 1,000,000 characters"):
        capped(
            "{% for i in range(100000) %}{{ source.text }}{% endfor %}",
            {"source": {"text": "z" * 100_000}},
            1_000_000,
        )


def test_i29_15_without_a_cap_the_default_bounds_values() -> None:
    assert DEFAULT_MAX_PROMPT_CHARS == RENDER_DEFAULT
    with pytest.raises(PromptTooLarge):
        render('{{ "a" * 10**10 }}', {})
    assert render("{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ 6 * 7 }}", {}) == "ababab 1024 42"
    assert capped("static text over the cap", {}, 100) == "static text over the cap"
    with pytest.raises(PromptTooLarge):
        capped("static text over the cap", {}, 5)


def test_i29_15_a_memory_error_is_prompt_too_large_with_a_message() -> None:
    class Huge:
        def __str__(self) -> str:
            raise MemoryError

    with pytest.raises(PromptTooLarge, match="ran out of memory"):
        capped("{{ x }}", {"x": Huge()}, 100)
    assert issubclass(PromptTooLarge, RenderError)
