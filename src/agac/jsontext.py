"""JSON text as agac stores it: compact, UTF-8 kept, the same bytes on every dialect.

``dumps`` is the stored form; ``canonical`` adds sorted keys and is what request
fingerprints hash (DESIGN §1). Both produce exactly what ``json.JSONEncoder`` with the
same options produces, but call the standard library's C encoder directly: an
encoder's ``encode`` builds a new C encoder object on every call, which shows on the
per-unit hot path (three or four encodings per unit). Where the C encoder is missing
the regular encoder is used. Values are JSON data (parsed answers, records, request
parts), so no circular-reference bookkeeping is done.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = ["JSON", "JSONObject", "canonical", "dumps", "encoder", "loads"]

JSON: TypeAlias = "dict[str, JSON] | list[JSON] | str | int | float | bool | None"
"""A JSON value as Python holds it once parsed: a record's payload, an answer's output, a
template's view."""

JSONObject: TypeAlias = "dict[str, JSON]"
"""A JSON object: a record's payload, a view, an event's data."""


def encoder(*, sort_keys: bool, default: Callable[[Any], Any] | None = str) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys,
    default=default).encode``, without its per-call set-up. With ``default=None`` a value
    that is not JSON data raises TypeError."""
    fallback = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=default,
                                sort_keys=sort_keys)
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
    make = c_make_encoder(None, default or fallback.default, encode_basestring, None, ":", ",", sort_keys, False, True)
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
