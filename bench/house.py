"""The house's shape, counted from the tree (issue "The house, third pass"): ``Any`` as a
name in ``engine/`` and in ``src/``; the places that write an outcome row (calls of the
store's outcome writers outside ``store/``, and ``OutcomeRow(...)`` built outside it); the
places reading the run's config as a dict (``config["actions"]`` / ``config.get("actions"``)
in ``engine/``; the imports between ``engine/lifecycle`` and ``engine/views`` each way; the
lengths of ``cli/render.py`` and ``engine/views/summary.py``.

Usage: python bench/house.py [CHECKOUT ...]   (default: this checkout). One JSON line each.
Duplicate pairs are counted apart: ``duplicates --repo src --seconds 300 --most 1``.
"""

from __future__ import annotations

import ast
import io
import json
import sys
import tokenize
from pathlib import Path

# The store methods that insert or update rows of the outcomes table.
OUTCOME_WRITERS = (
    "checkpoint",
    "copy_outcomes",
    "carry_run_outcomes",
    "settle_read_items",
    "end_batch_unread",
    "settle_outcomes",
    "close_units",
)


def _any_count(root: Path) -> int:
    n = 0
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string == "Any":
                n += 1
    return n


def _writes(src: Path) -> dict[str, int]:
    calls = 0
    rows = 0
    config_reads = 0
    for path in sorted(src.rglob("*.py")):
        if "store" in path.relative_to(src).parts[:1]:
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in OUTCOME_WRITERS:
                calls += 1
            elif isinstance(f, ast.Name) and f.id == "OutcomeRow":
                rows += 1
        if path.relative_to(src).parts[:1] == ("engine",):
            config_reads += text.count('config["actions"]') + text.count('config.get("actions"')
    return {
        "outcome_writer_calls": calls,
        "outcome_rows_built": rows,
        "config_dict_reads": config_reads,
    }


def _imports(a: Path, b: str) -> int:
    n = 0
    for path in sorted(a.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(b):
                n += 1
    return n


def _lines(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("\n") if path.exists() else 0


def count(root: Path) -> dict[str, object]:
    src = root / "src" / "agac"
    eng = src / "engine"
    return {
        "checkout": str(root),
        "any_engine": _any_count(eng),
        "any_src": _any_count(src),
        **_writes(src),
        "lifecycle_imports_views": _imports(eng / "lifecycle", "agac.engine.views"),
        "views_imports_lifecycle": _imports(eng / "views", "agac.engine.lifecycle"),
        "render_py_lines": _lines(src / "cli" / "render.py"),
        "summary_py_lines": _lines(eng / "views" / "summary.py"),
    }


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["."]:
        print(json.dumps(count(Path(arg).resolve())))
