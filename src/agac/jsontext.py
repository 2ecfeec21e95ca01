"""JSON text as agac stores it: compact, UTF-8 kept, the same bytes on every dialect.

One encoder instance is shared: ``json.dumps`` with keyword arguments builds a new
``JSONEncoder`` on every call, which shows on the per-unit hot path.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps", "loads"]

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
