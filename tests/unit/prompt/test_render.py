from __future__ import annotations

import time

import pytest
from jinja2 import TemplateSyntaxError

from agac.prompt import RenderError, compile_template, evaluate_guard, render
from agac.prompt.render import ENV


def test_render_reads_source_and_ancestors() -> None:
    view = {"source": {"text": "hi"}, "classify": {"label": "pos"}}
    assert render("{{ source.text }}/{{ classify.label }}", view) == "hi/pos"


def test_trailing_newline_kept_and_no_escaping() -> None:
    assert render("<b>{{ source.t }}</b>\n", {"source": {"t": "a & b"}}) == "<b>a & b</b>\n"


def test_fields_win_over_dict_methods() -> None:
    view = {"source": {"items": ["x"], "keys": 3}}
    assert render("{{ source.items[0] }} {{ source.keys }}", view) == "x 3"
    assert render("{{ source.items | length }}", view) == "1"


def test_tojson_is_sorted_and_keeps_unicode() -> None:
    assert render("{{ source | tojson }}", {"source": {"b": "é", "a": 1}}) == '{"a": 1, "b": "é"}'


def test_undefined_is_a_clear_error() -> None:
    with pytest.raises(RenderError, match="missing") as info:
        render(compile_template("{{ source.missing }}", "a.prompt"), {"source": {}})
    assert "a.prompt" in str(info.value)


def test_sandbox_blocks_unsafe_access() -> None:
    with pytest.raises(RenderError, match="unsafe"):
        render("{{ source.__class__.__mro__ }}", {"source": {}})


def test_syntax_error_has_line() -> None:
    with pytest.raises(TemplateSyntaxError) as info:
        compile_template("ok\n{% if %}", "bad")
    assert info.value.lineno == 2


def test_compiled_templates_are_cached() -> None:
    assert compile_template("{{ x }}", "n") is compile_template("{{ x }}", "n")


def test_guards() -> None:
    view = {"classify": {"sentiment": "neg"}, "source": {}}
    assert evaluate_guard("classify.sentiment == 'neg'", view) is True
    assert evaluate_guard("classify.sentiment == 'pos'", view) is False
    # a guard reading a missing field is false, not an error
    assert evaluate_guard("classify.missing == 'neg'", view) is False
    assert evaluate_guard("nothing.at.all", view) is False
    assert evaluate_guard("source.x is not defined", view) is True
    with pytest.raises(TemplateSyntaxError):
        evaluate_guard("classify ==", view)
    with pytest.raises(RenderError):
        evaluate_guard("classify.sentiment > 3", view)


def test_one_environment() -> None:
    assert ENV.undefined.__name__ == "StrictUndefined" and ENV.autoescape is False


def test_rendering_is_fast() -> None:
    template = compile_template("Classify: {{ source.text }} ({{ classify.label }})", "t")
    view = {"source": {"text": "x" * 200}, "classify": {"label": "pos"}}
    start = time.perf_counter()
    for _ in range(5000):
        render(template, view)
    assert time.perf_counter() - start < 2.0  # generous: ~50 µs budget per render


@pytest.mark.parametrize(
    "source",
    [
        "You label product reviews.",
        "line one\r\nline two\rthree\n",
        "keep the trailing newline\n\n",
        "braces alone: { } }} %} #} {x} ${y}",
        "unicode é ✓ 中文",
        "",
    ],
)
def test_a_template_without_markers_renders_as_jinja_does_for_any_view(source: str) -> None:
    expected = ENV.from_string(source).render()
    template = compile_template(source)
    assert render(template, {}) == expected
    assert render(template, {"source": {"text": "other"}}) == expected
    assert render(source, {"source": {}}) == expected


def test_a_template_with_a_marker_is_rendered_per_view() -> None:
    for source in ("{{ source.t }}", "a {# note #} b", "{% if source.t %}yes{% endif %}"):
        expected_a = ENV.from_string(source).render(source={"t": "A"})
        assert render(source, {"source": {"t": "A"}}) == expected_a
    assert render("x{{ source.t }}", {"source": {"t": "B"}}) == "xB"
    with pytest.raises(RenderError):
        render("{{ source.missing }}", {"source": {}})
