"""A labels file (``--labels FILE``): the verdicts a person expects, per record, against
which ``agac pilot`` and ``agac compare`` measure the judges (docs/cli.md, agac pilot).

A ``.csv`` (a header row) or ``.jsonl`` file: each row a record's ``key`` and, per check,
``pass`` or ``fail`` (``true``/``false``); a ``pairwise`` column holds which run's answer
a pairwise judge should prefer: ``a``, ``b`` or ``tie``. An empty cell labels nothing. A
bad row is refused naming the file and its line, before anything is sent.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agac.errors import UsageError

__all__ = ["PAIRWISE_COLUMN", "Labels", "read_labels"]

PAIRWISE_COLUMN = "pairwise"
_PREFERENCES = ("a", "b", "tie")


@dataclass(frozen=True)
class Labels:
    """The expected verdicts: record key → check name → whether it should pass, and
    record key → the answer a pairwise judge should prefer (``a``, ``b`` or ``tie``)."""

    checks: dict[str, dict[str, bool]]
    pairwise: dict[str, str]


def read_labels(path: Path) -> Labels:
    """The labels of a CSV or JSON lines file; UsageError naming the file and line of a
    bad one."""
    checks: dict[str, dict[str, bool]] = {}
    pairwise: dict[str, str] = {}
    for line, row in _rows(path):
        if not isinstance(row, dict) or not row.get("key"):
            raise UsageError(f"{path}:{line}: a label needs its record's key (a key column)")
        key = str(row["key"])
        verdicts: dict[str, bool] = {}
        for name, value in row.items():
            if name == "key" or value in (None, ""):
                continue
            if name == PAIRWISE_COLUMN:
                pairwise[key] = _preference(path, line, value)
                continue
            verdict = _verdict_of(value)
            if verdict is None:
                raise UsageError(
                    f"{path}:{line}: {name} is {value!r}; write pass or fail (or true/false)"
                )
            verdicts[str(name)] = verdict
        checks[key] = verdicts
    return Labels(checks, pairwise)


def _rows(path: Path) -> list[tuple[int, Any]]:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise UsageError(f"--labels {path}: give the expected verdicts as .csv or .jsonl")
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            if suffix == ".csv":
                return [(n + 2, row) for n, row in enumerate(csv.DictReader(fh))]
            return [(n + 1, json.loads(line)) for n, line in enumerate(fh) if line.strip()]
    except (OSError, ValueError) as exc:
        raise UsageError(f"--labels {path}: cannot read it: {exc}") from exc


def _preference(path: Path, line: int, value: Any) -> str:
    text = str(value).strip().lower()
    if text not in _PREFERENCES:
        raise UsageError(
            f"{path}:{line}: {PAIRWISE_COLUMN} is {value!r}; write a, b or tie "
            "(the run whose answer should win)"
        )
    return text


def _verdict_of(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return {"pass": True, "true": True, "fail": False, "false": False}.get(text)
