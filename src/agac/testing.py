"""Helpers for testing agac and projects built on it: write a project to a folder.

Shipped in the package (like procrastinate's in-memory connector) so that users'
own tests can build throwaway projects the same way agac's suite does.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agac.clock import ManualClock

__all__ = ["ManualClock", "write_jsonl", "write_project"]


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any] | str]) -> Path:
    """Write rows (dicts, or raw lines for malformed input) as JSONL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def write_project(
    root: Path,
    workflow: str,
    *,
    data: Mapping[str, Iterable[Mapping[str, Any] | str]] | None = None,
    agac_yml: str = "",
    files: Mapping[str, str] | None = None,
    workflow_file: str = "workflows/wf.yml",
) -> Path:
    """Create a project: ``agac.yml``, the workflow, JSONL data files and extra files.

    ``data`` maps a path under the root (``data/a.jsonl``) to rows; ``files`` maps a
    path to text (tool modules, CSV files). Returns the workflow's path.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "agac.yml").write_text(textwrap.dedent(agac_yml), encoding="utf-8")
    for rel, rows in (data or {}).items():
        write_jsonl(root / rel, rows)
    for rel, text in (files or {}).items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")
    wf = root / workflow_file
    wf.parent.mkdir(parents=True, exist_ok=True)
    wf.write_text(textwrap.dedent(workflow), encoding="utf-8")
    return wf
