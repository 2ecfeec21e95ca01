"""What an adapter may be told under ``providers: <name>:`` in ``agac.yml``.

Each provider class declares its own options as a tuple of :class:`Option` in its
``options`` class attribute, so a plugin provider brings its own and ``agac.yml``
validation learns them through the provider registry, without importing any SDK. A
key no option declares is ``unknown_key`` (with a "did you mean"); a declared key with a
value of the wrong type or out of range is ``invalid_provider_option`` naming the key.
Values reach the adapter already checked and converted (config/project.py does it), in
``ProviderSettings.options``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agac.errors import ConfigError, Problem

__all__ = [
    "FIND_BATCH_SCAN",
    "TIMEOUT",
    "Option",
    "OptionKind",
    "options_table",
    "structured_output",
]

OptionKind = Literal["number", "integer", "seconds", "choice", "text"]


@dataclass(frozen=True, slots=True)
class Option:
    """One adapter option: its name, what values it takes and what it means.

    ``number`` is any finite number in ``[minimum, maximum]`` (``(minimum, …]`` with
    ``exclusive_minimum``); ``integer`` an integer ``>= minimum``; ``seconds`` a positive
    duration (a number of seconds or ``<n>ms|s|m|h|d``), given to the adapter as seconds;
    ``choice`` one of ``choices``; ``text`` a non-empty string (an endpoint, a version).
    ``default`` is what the adapter uses when the key is
    not set (for the docs; the adapter owns it).
    """

    name: str
    kind: OptionKind
    meaning: str
    default: Any = None
    minimum: float = 0.0
    maximum: float | None = None
    exclusive_minimum: bool = False
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        """The values the option takes, in words."""
        if self.kind == "choice":
            return " or ".join(repr(c) for c in self.choices)
        if self.kind == "text":
            return "a non-empty string"
        if self.kind == "seconds":
            return "a positive duration (seconds, or <n>ms|s|m|h|d)"
        if self.kind == "integer":
            return f"an integer >= {self.minimum:g}"
        low = f"> {self.minimum:g}" if self.exclusive_minimum else f">= {self.minimum:g}"
        high = f" and <= {self.maximum:g}" if self.maximum is not None else ""
        return f"a number {low}{high}"

    def from_environment(self, variable: str, environ: Mapping[str, str]) -> float | None:
        """The value of environment ``variable`` for this (``number`` or ``integer``)
        option, checked like the same key in ``agac.yml``; None when it is unset or empty.
        ConfigError ``invalid_provider_option`` naming the variable when it is not a value
        the option takes."""
        text = environ.get(variable, "").strip()
        if not text:
            return None
        try:
            value = float(text) if self.kind == "number" else float(int(text))
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (
            value > self.minimum if self.exclusive_minimum else value >= self.minimum
        )
        if ok and (self.maximum is None or value <= self.maximum):
            return value
        raise ConfigError(
            problems=[
                Problem(
                    "invalid_provider_option",
                    f"{variable} must be {self.describe()}, got {text!r}",
                    "environment",
                    hint=f"{self.meaning}; unset it or give such a value",
                )
            ]
        )


def options_table(rows: Iterable[tuple[str, Option]]) -> list[tuple[str, str, str, str]]:
    """``(provider, option, values, meaning)`` rows, for docs and ``--help``-like listings."""
    return [(provider, o.name, o.describe(), o.meaning) for provider, o in rows]


# -- options several adapters share ------------------------------------------------------

TIMEOUT = Option(
    "timeout",
    "seconds",
    "timeout of each of the adapter's batch and file calls "
    "(create, poll, list, cancel, upload, download); a live call is timed by its "
    "action's `timeout`",
    default="600s",
)
FIND_BATCH_SCAN = Option(
    "find_batch_scan",
    "integer",
    "how many of the provider's most recent "
    "batches B2 recovery looks through for a submission whose answer was "
    "lost",
    default=2000,
    minimum=1,
)


def structured_output(fallback: str, meaning: str) -> Option:
    """``structured_output``: ``auto`` (the provider's native schema form, falling back to
    ``fallback`` for a model that rejects it) or ``fallback`` from the start."""
    return Option(
        "structured_output",
        "choice",
        f"`auto`: the native structured-output form, "
        f"falling back for a model that rejects it; `{fallback}`: {meaning} from the "
        "start",
        default="auto",
        choices=("auto", fallback),
    )
