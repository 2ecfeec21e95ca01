"""The stored and canonical JSON forms are byte for byte what ``json.JSONEncoder`` writes
with the same options: fingerprints of requests stored by earlier versions must not move."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agac.jsontext import canonical, dumps, encoder
from agac.providers.base import Message, Request, canonical_json

STORED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)
SORTED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str, sort_keys=True)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(json_values)
def test_dumps_and_canonical_match_the_standard_encoder(value: object) -> None:
    assert dumps(value) == STORED.encode(value)
    assert canonical(value) == SORTED.encode(value)
    assert canonical_json(value) == SORTED.encode(value)


def test_non_json_values_are_written_as_text_or_refused_by_a_strict_encoder() -> None:
    assert dumps({"when": b"x"}) == '{"when":"b\'x\'"}'
    strict = encoder(sort_keys=False, default=None)
    with pytest.raises(TypeError):
        strict({"x": object()})


def test_request_fingerprint_form_is_unchanged() -> None:
    req = Request(
        provider="openai",
        model="gpt-4o-mini",
        messages=(Message("system", "Be brief."), Message("user", 'Héllo "quoted" \u2028')),
        max_tokens=64,
        temperature=0.2,
        schema={"type": "object", "required": ["b", "a"]},
        seed=3,
    )
    assert req.canonical() == SORTED.encode(req.to_dict())
    assert req.canonical() == (
        '{"max_tokens":64,"messages":[{"content":"Be brief.","role":"system"},'
        '{"content":"Héllo \\"quoted\\" \u2028","role":"user"}],"model":"gpt-4o-mini",'
        '"provider":"openai","schema":{"required":["b","a"],"type":"object"},"seed":3,'
        '"temperature":0.2}'
    )


# -- strict JSON (issue 29 items 12 and 13) ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "path", "what"),
    [
        (float("nan"), "", "NaN"),
        ({"score": float("inf")}, "score", "Infinity"),
        ({"a": [1, {"b c": -float("inf")}]}, 'a[1]["b c"]', "-Infinity"),
        ({"name": "x\ud800"}, "name", "a lone surrogate (\\ud800)"),
        ([{"ok": 1}, {"t": "\udfff"}], "[1].t", "a lone surrogate (\\udfff)"),
        ({"\ud800": 1}, '["\\ud800"]', "a lone surrogate in the field name"),
    ],
)
def test_i29_12_flaw_names_the_field_path(value: object, path: str, what: str) -> None:
    from agac.jsontext import flaw

    found = flaw(value)
    assert found is not None
    assert (found.path, found.what) == (path, what)
    str(found).encode("ascii")  # safe to store and print


@pytest.mark.parametrize("value", [None, 1, 1.5, "text \U0001f600 é", {"a": [True, None, -0.0]}])
def test_i29_12_strict_json_has_no_flaw(value: object) -> None:
    from agac.jsontext import flaw, strict_dumps

    assert flaw(value) is None
    assert json.loads(strict_dumps(value)) == value


def test_x3_strict_dumps_refuses_nan_naming_where() -> None:
    from agac.jsontext import NotJSON, strict_dumps

    with pytest.raises(NotJSON, match=r"NaN at rows\[2\]"):
        strict_dumps({"rows": [0, 1, float("nan")]})


def test_i29_13_storable_text_escapes_lone_surrogates_only() -> None:
    from agac.jsontext import storable_text

    assert storable_text("ok \U0001f600") == "ok \U0001f600"
    assert storable_text("bad \ud800 \udc80.") == "bad \\ud800 \\udc80."
