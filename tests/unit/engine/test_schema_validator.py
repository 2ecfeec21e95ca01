"""The action's schema validator remembers valid answers; its verdicts must stay
jsonschema's own, whatever was seen before."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agac.engine.actions import SchemaValidator

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"enum": ["a", "b", 1, True]},
        "score": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["label"],
    "additionalProperties": False,
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, width=16)
    | st.sampled_from(["a", "b", "c", ""]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["label", "score", "tags", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(json_values, min_size=1, max_size=12))
def test_remembered_verdicts_match_jsonschema(values: list[Any]) -> None:
    memo = SchemaValidator(SCHEMA)
    plain = Draft202012Validator(SCHEMA)
    for value in values + values:  # the second pass answers from memory where it can
        assert memo.is_valid(value) == plain.is_valid(value)


def test_same_text_other_type_is_not_confused() -> None:
    memo = SchemaValidator(SCHEMA)
    assert memo.is_valid({"label": 1, "score": 1})
    assert not memo.is_valid({"label": 1, "score": 1.5})  # 1.5 is no integer
    assert memo.is_valid({"label": True})
    assert not memo.is_valid({"label": "true"})
    assert not memo.is_valid({"label": "a", "x": 1})  # additionalProperties
    assert memo.is_valid({"label": "a", "x": 1}) is False  # invalid answers are never remembered


def test_memory_is_bounded() -> None:
    memo = SchemaValidator({"type": "integer"})
    for i in range(SchemaValidator.LIMIT + 50):
        assert memo.is_valid(i)
    assert len(memo._valid) == SchemaValidator.LIMIT
    assert not memo.is_valid("x")
    assert list(memo.iter_errors("x"))
