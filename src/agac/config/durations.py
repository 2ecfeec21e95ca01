"""Durations in workflow files and ``agac.yml`` (docs/workflow-reference.md).

A duration is an integer number of seconds (``90``) or an integer with a unit:
``<n>ms``, ``<n>s``, ``<n>m``, ``<n>h`` or ``<n>d`` (``250ms``, ``5m``, ``25h``).
Fractions (``1.5h``) are refused: write ``90m``. Negative durations never parse;
whether zero is acceptable is the caller's choice (``positive=True`` refuses it).
"""

from __future__ import annotations

import math
import re

__all__ = ["DURATION_FORMAT", "parse_duration"]

DURATION_FORMAT = "an integer of seconds or <n>ms|s|m|h|d, e.g. 30s, 5m, 25h"

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: object, *, positive: bool = False) -> float:
    """Seconds in ``value``; ``ValueError`` naming the accepted format otherwise.

    Accepts an ``int`` (not a ``bool``, not a ``float``) or a string as described in the
    module docstring. With ``positive=True`` a zero duration is refused as well.
    """
    if isinstance(value, bool):  # one error type for every bad spelling, by contract
        raise ValueError(f"{value!r} is not a duration ({DURATION_FORMAT})")  # noqa: TRY004
    match = _PATTERN.match(value) if isinstance(value, str) else None
    try:
        if isinstance(value, int):
            seconds = float(value)
        elif match is not None:
            digits = match.group(1)
            seconds = (int(digits) if len(digits) <= 30 else math.inf) * _UNITS[
                match.group(2) or "s"
            ]
        else:
            raise ValueError(f"{_shown(value)} is not a duration ({DURATION_FORMAT})")
    except OverflowError:  # past the float range
        seconds = math.inf
    if not math.isfinite(seconds):
        raise ValueError(f"{_shown(value)} is too long to be a duration ({DURATION_FORMAT})")
    if seconds < 0:
        raise ValueError(f"{value!r} is negative; a duration is {DURATION_FORMAT}")
    if positive and seconds == 0:
        raise ValueError(f"{value!r} must be greater than zero")
    return seconds


def _shown(value: object) -> str:
    """``value``'s repr, cut short (an integer of thousands of digits)."""
    text = (
        repr(value)
        if not isinstance(value, int) or value.bit_length() < 200
        else "a number of more than 60 digits"
    )
    return text if len(text) <= 60 else text[:57] + "..."
