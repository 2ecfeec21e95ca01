"""Unit keys (docs/getting-started.md; docs/workflow-reference.md, Fan-out and join): what a unit is called in the store, in status, export and
sessions, and what a person types (``agac records show KEY``, ``--record KEY``).

A record's own units are keyed by its record key, *escaped*: ``%`` becomes ``%25`` and
``/`` becomes ``%2F``. A fan-out item is its parent's unit key, ``/``, and its index
(``<record>/<i>``, nested ``<record>/<i>/<j>``). Record keys may be URLs or paths; escaped,
they hold no ``/``, so the first ``/`` of a unit key always starts an item path and a
record key can never be mistaken for another record's item (``a/0`` the record vs item 0
of ``a``: ``a%2F0`` vs ``a/0``). A record key without ``/`` or ``%`` — nearly every key —
is its own unit key, unchanged.

A person may type a record key as it is in the input (``http://x/y``) or a unit key as
agac shows it (``http:%2F%2Fx%2Fy/0``): :func:`unit_key_of` tells which.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

__all__ = [
    "ESCAPED_KEYS",
    "escape",
    "idempotency_key",
    "item_key",
    "item_path",
    "legacy_form",
    "needs_escaping",
    "record_of",
    "unescape",
    "unit_key_of",
]

ESCAPED_KEYS = "escaped"
"""``unit_keys`` of a run's settings: its unit keys escape record keys (this module); a
run admitted before wrote keys holding ``/`` or ``%`` as they were."""

_ESCAPED = re.compile(r"%(25|2[Ff])")


def needs_escaping(record_key: str) -> bool:
    return "/" in record_key or "%" in record_key


def escape(record_key: str) -> str:
    """A record key as a unit key: ``%`` -> ``%25``, ``/`` -> ``%2F``."""
    if not needs_escaping(record_key):
        return record_key
    return record_key.replace("%", "%25").replace("/", "%2F")


def unescape(text: str) -> str:
    return _ESCAPED.sub(lambda m: "%" if m.group(1) == "25" else "/", text)


def item_key(parent: str, index: int) -> str:
    """The unit key of item ``index`` of a parent (a record's or an item's unit key)."""
    return f"{parent}/{index}"


def record_of(unit_key: str) -> str:
    """The record key (as in the input) of a unit key."""
    return unescape(unit_key.split("/", 1)[0])


def item_path(unit_key: str) -> tuple[int, ...]:
    """The indexes of an item key (``rec/3/10`` -> (3, 10)); () for a record's unit."""
    _, _, rest = unit_key.partition("/")
    return tuple(int(p) for p in rest.split("/") if p.isdigit()) if rest else ()


def legacy_form(unit_key: str) -> str:
    """The unit key as agac wrote it before keys were escaped: the record key unescaped,
    then the item path. Idempotency keys of effects (E1) are made of it, so an effect
    done before the change is recognized after it."""
    head, sep, rest = unit_key.partition("/")
    return unescape(head) + sep + rest


def unit_key_of(typed: str, is_record: Callable[[str], bool]) -> str:
    """The unit key a person means: ``typed`` names a record (as in the input) when
    ``is_record(typed)``; otherwise it is a unit key as agac shows it."""
    return escape(typed) if is_record(typed) else typed


def idempotency_key(workflow: str, action: str, unit_key: str, input_hash: str) -> str:
    """E1: a tool's idempotency key per (workflow, action, unit, hash of its arguments),
    made of the unit key as written before keys were escaped (:func:`legacy_form`), so
    it stays what it was for every effect already done."""
    text = f"{workflow}\x1f{action}\x1f{legacy_form(unit_key)}\x1f{input_hash}"
    return hashlib.sha256(text.encode()).hexdigest()
