from __future__ import annotations

import pytest
from jinja2 import TemplateSyntaxError

from agac.prompt import template_references


def test_attribute_and_item_chains() -> None:
    refs = template_references("{{ source.text }} {{ classify['sentiment'] }} {{ x.tags[0] }}")
    assert refs == {("source", "text"), ("classify", "sentiment"), ("x", "tags", 0)}


def test_locals_and_globals_are_not_roots() -> None:
    text = (
        "{% set y = a.b %}{{ y }}{% for c in items.list %}{{ c.v }}{{ loop.index }}"
        "{% endfor %}{{ range(3) | list }}"
    )
    assert template_references(text) == {("a", "b"), ("items", "list")}


def test_method_call_reads_its_object() -> None:
    assert template_references("{{ source.text.upper() }}") == {("source", "text")}


def test_dynamic_key_stops_the_chain() -> None:
    assert template_references("{{ a[source.k].z }}") == {("a",), ("source", "k")}


def test_filters_and_tests() -> None:
    refs = template_references(
        "{{ source.t | default(other.v) }}{% if c.x is defined %}{% endif %}"
    )
    assert refs == {("source", "t"), ("other", "v"), ("c", "x")}


def test_expressions() -> None:
    refs = template_references("classify.sentiment == 'neg' and source.n > 3", expression=True)
    assert refs == {("classify", "sentiment"), ("source", "n")}
    with pytest.raises(TemplateSyntaxError):
        template_references("a b", expression=True)
