"""JSON text as agac stores it: compact, UTF-8 kept, the same bytes on every dialect.

``dumps`` is the stored form; ``canonical`` adds sorted keys and is what request
fingerprints hash (docs/getting-started.md). Both produce exactly what ``json.JSONEncoder`` with the
same options produces, but call the standard library's C encoder directly: an
encoder's ``encode`` builds a new C encoder object on every call, which shows on the
per-unit hot path (three or four encodings per unit). Where the C encoder is missing
the regular encoder is used. Values are JSON data (parsed answers, records, request
parts), so no circular-reference bookkeeping is done.

Strict JSON: Python's ``json`` reads and writes ``NaN`` and ``Infinity``, which are not
JSON, and a string may hold a lone surrogate (``"\\ud800"`` parses to one), which UTF-8
cannot encode and neither store accepts. :func:`flaw` finds either in a value, naming
where; what agac writes for others to read (exports, ``--json`` documents) goes through
:func:`strict_dumps`, which refuses them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "JSON",
    "Flaw",
    "JSONObject",
    "NotJSON",
    "canonical",
    "dumps",
    "encoder",
    "flaw",
    "loads",
    "storable_text",
    "strict_dumps",
]

JSON: TypeAlias = "dict[str, JSON] | list[JSON] | str | int | float | bool | None"
"""A JSON value as Python holds it once parsed: a record's payload, an answer's output, a
template's view."""

JSONObject: TypeAlias = "dict[str, JSON]"
"""A JSON object: a record's payload, a view, an event's data."""


def encoder(*, sort_keys: bool, default: Callable[[Any], Any] | None = str) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys,
    default=default).encode``, without its per-call set-up. With ``default=None`` a value
    that is not JSON data raises TypeError."""
    fallback = json.JSONEncoder(
        separators=(",", ":"), ensure_ascii=False, default=default, sort_keys=sort_keys
    )
    try:
        from json.encoder import (  # type: ignore[attr-defined]  # private, C-accelerated
            c_make_encoder,
            encode_basestring,
        )
    except ImportError:  # pragma: no cover - CPython always has _json
        return fallback.encode
    if c_make_encoder is None:  # pragma: no cover
        return fallback.encode
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys,
    #  skipkeys, allow_nan): the arguments JSONEncoder.iterencode passes for one shot.
    make = c_make_encoder(
        None, default or fallback.default, encode_basestring, None, ":", ",", sort_keys, False, True
    )
    join = "".join

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return encode_basestring(value)  # type: ignore[no-any-return]
        return join(make(value, 0))

    return encode


dumps = encoder(sort_keys=False)
dumps.__doc__ = "Compact JSON text, UTF-8 kept (the stored form)."
canonical = encoder(sort_keys=True)
canonical.__doc__ = "Compact JSON text with sorted keys (the form fingerprints hash)."


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Flaw:
    """What strict JSON cannot hold, and where: ``path`` is ``score``, ``items[2].name``
    or ``""`` for the value itself; ``what`` is ``NaN``, ``Infinity``, ``-Infinity`` or
    ``a lone surrogate (\\ud800)``. Both are ASCII, so a message quoting them can be stored."""

    path: str
    what: str

    @property
    def fix(self) -> str:
        """What to put there instead."""
        if self.what.endswith(("NaN", "Infinity")):
            return "null or a finite number"
        return "text without lone surrogates (pair it, or drop it)"

    def __str__(self) -> str:
        return f"{self.what} at {self.path}" if self.path else self.what


class NotJSON(ValueError):
    """The value holds what strict JSON cannot (see :class:`Flaw`); ``record`` is the key
    of the record it belongs to, when the raiser knows it."""

    def __init__(self, found: Flaw, record: str | None = None) -> None:
        super().__init__(f"{found}: not JSON")
        self.flaw = found
        self.record = record


def flaw(value: Any) -> Flaw | None:
    """The first non-finite number or lone surrogate in ``value`` (JSON data: dicts, lists,
    strings, numbers, booleans, None), keys included; None when it is strict JSON."""
    return _flaw(value, "")


def _flaw(value: Any, path: str) -> Flaw | None:
    if isinstance(value, str):
        lone = _LONE_SURROGATE.search(value)
        return Flaw(path, f"a lone surrogate (\\u{ord(lone.group()):04x})") if lone else None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return Flaw(
            path, "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        )
    if isinstance(value, dict):
        for key, item in value.items():
            inner = _member(path, key)
            if isinstance(key, str) and _LONE_SURROGATE.search(key):
                return Flaw(inner, "a lone surrogate in the field name")
            found = _flaw(item, inner)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _flaw(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _member(path: str, key: Any) -> str:
    name = str(key)
    if _PLAIN_NAME.fullmatch(name):
        return f"{path}.{name}" if path else name
    return f"{path}[{json.dumps(name)}]"  # ASCII, a lone surrogate escaped


def strict_dumps(
    value: Any,
    *,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """``json.dumps(value, ensure_ascii=False, allow_nan=False, …)``: strict JSON text, or
    :class:`NotJSON` naming where a non-finite number is (a lone surrogate fails when the
    text is encoded as UTF-8)."""
    try:
        return json.dumps(
            value,
            ensure_ascii=False,
            allow_nan=False,
            indent=indent,
            separators=separators,
            default=default,
        )
    except ValueError as exc:
        found = flaw(value)
        if found is None:
            raise
        raise NotJSON(found) from exc


def storable_text(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``): user code's
    messages and tracebacks are stored as they are, but UTF-8 (and so the store) cannot
    hold a lone surrogate."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
