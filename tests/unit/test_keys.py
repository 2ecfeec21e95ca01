"""Unit keys (agac/keys.py): a record key escaped never looks like another record's item."""

from __future__ import annotations

import hashlib

import pytest

from agac.keys import (
    escape,
    idempotency_key,
    item_key,
    item_path,
    legacy_form,
    record_of,
    unescape,
    unit_key_of,
)

KEYS = ["plain", "a/0", "http://example.com/x?y=1", "50%", "a%2F0", "%25/%2F", "", "/"]


@pytest.mark.parametrize("key", KEYS)
def test_record_keys_and_item_keys_cannot_collide(key: str) -> None:
    unit = escape(key)
    assert "/" not in unit
    assert unescape(unit) == key and record_of(unit) == key
    assert record_of(item_key(item_key(unit, 3), 10)) == key
    assert item_path(item_key(item_key(unit, 3), 10)) == (3, 10)
    assert item_path(unit) == ()


def test_escaping_is_one_to_one() -> None:
    escaped = [escape(k) for k in KEYS]
    assert len(set(escaped)) == len(KEYS)
    # the record "a/0" and item 0 of record "a" are told apart
    assert escape("a/0") != item_key(escape("a"), 0)


def test_plain_keys_are_their_own_unit_keys() -> None:
    """Every key without '/' or '%' (all keys agac stored before) is unchanged."""
    for key in ("r0001", "a.jsonl:3", "review 17", "ä-ß"):
        assert escape(key) == key


def test_typed_key_is_a_record_key_or_a_unit_key() -> None:
    records = {"a", "a/0"}
    assert unit_key_of("a/0", records.__contains__) == "a%2F0"  # the record
    assert unit_key_of("a/1", records.__contains__) == "a/1"  # item 1 of "a"
    assert unit_key_of("a%2F0/1", records.__contains__) == "a%2F0/1"  # item 1 of "a/0"


def test_e1_idempotency_key_is_what_it_was_before_escaping() -> None:
    """Effects done before keys were escaped keep their key (E1: never done twice)."""

    def before(unit: str) -> str:
        return hashlib.sha256(f"wf\x1fsend\x1f{unit}\x1fh".encode()).hexdigest()

    assert idempotency_key("wf", "send", escape("a/b"), "h") == before("a/b")
    assert idempotency_key("wf", "send", item_key(escape("a/b"), 2), "h") == before("a/b/2")
    assert idempotency_key("wf", "send", "plain", "h") == before("plain")
    assert legacy_form("50%25/3") == "50%/3"
