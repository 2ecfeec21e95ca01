"""Typed readers for YAML values: each returns the value, or reports and returns None.

Every reader reports through :class:`~agac.config.source.Findings` at the value's path,
so a wrong type or range is an ``invalid_value`` Problem with file and line, and
validation carries on to find the next problem.
"""

from __future__ import annotations

import math
from typing import Any

from agac.config.durations import parse_duration
from agac.config.source import Findings, Path, format_path

__all__ = [
    "finite",
    "read_bool",
    "read_duration",
    "read_int",
    "read_mapping",
    "read_number",
    "read_str",
    "read_str_list",
]


def _name(path: Path) -> str:
    return format_path(path) or "document"


def read_str(f: Findings, value: Any, path: Path, *, nonempty: bool = True) -> str | None:
    if isinstance(value, str) and (value.strip() or not nonempty):
        return value
    f.error("invalid_value", f"{_name(path)} must be a non-empty string, got {value!r}", path)
    return None


def read_bool(f: Findings, value: Any, path: Path) -> bool | None:
    if isinstance(value, bool):
        return value
    f.error("invalid_value", f"{_name(path)} must be true or false, got {value!r}", path)
    return None


def read_int(f: Findings, value: Any, path: Path, *, minimum: int = 1) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    f.error("invalid_value", f"{_name(path)} must be an integer >= {minimum}, got {value!r}", path)
    return None


def read_number(
    f: Findings,
    value: Any,
    path: Path,
    *,
    minimum: float = 0.0,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
) -> float | None:
    """A finite number in ``[minimum, maximum]`` (``(minimum, …]`` with
    ``exclusive_minimum``): YAML's ``.inf`` and ``.nan`` are refused, as is an integer too
    large for a float."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value)
    if ok:
        ok = value > minimum if exclusive_minimum else value >= minimum
        ok = ok and (maximum is None or value <= maximum)
    if ok:
        return float(value)
    low = f"> {minimum:g}" if exclusive_minimum else f">= {minimum:g}"
    high = f" and <= {maximum:g}" if maximum is not None else ""
    f.error(
        "invalid_value", f"{_name(path)} must be a finite number {low}{high}, got {value!r}", path
    )
    return None


def finite(value: float) -> bool:
    """Whether ``value`` is a finite number a float can hold (not inf, nan, or an integer
    beyond the float range)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def read_duration(
    f: Findings, value: Any, path: Path, *, code: str = "invalid_duration", positive: bool = True
) -> float | None:
    """Seconds, or a ``code`` Problem (``invalid_duration``, ``invalid_poll_interval``, …)."""
    try:
        return parse_duration(value, positive=positive)
    except ValueError as exc:
        f.error(code, f"{_name(path)}: {exc}", path)
        return None


def read_mapping(f: Findings, value: Any, path: Path) -> dict[Any, Any] | None:
    if isinstance(value, dict):
        return value
    f.error("invalid_value", f"{_name(path)} must be a mapping, got {value!r}", path)
    return None


def read_str_list(
    f: Findings, value: Any, path: Path, *, allow_single: bool = False
) -> list[str] | None:
    """A list of strings; with ``allow_single`` one string counts as a list of one."""
    if allow_single and isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return list(value)
    f.error("invalid_value", f"{_name(path)} must be a list of strings, got {value!r}", path)
    return None
