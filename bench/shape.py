"""The engine's typing shape, counted: ``Any`` (as a name, not in comments or strings),
``type: ignore`` comments, ``hasattr``/``getattr`` calls (and those whose first argument
names a provider), and ``dict[str, Any]`` annotations, in ``src/agac/engine``.

Usage: python bench/shape.py [CHECKOUT ...]   (default: this checkout)

Each checkout (a directory holding ``src/agac``: this one, or another commit's worktree)
gives one JSON line, so two commits compare with one command:
``python bench/shape.py . /path/to/worktree-of-b1f6518``.
"""

from __future__ import annotations

import ast
import io
import json
import sys
import tokenize
from pathlib import Path

PROVIDERISH = ("provider", "rt.provider", "p")


def count(root: Path) -> dict[str, object]:
    engine = root / "src" / "agac" / "engine"
    totals = {
        "any": 0,
        "type_ignore": 0,
        "hasattr_getattr": 0,
        "on_providers": 0,
        "dict_str_any": 0,
        "files": 0,
        "lines": 0,
    }
    for path in sorted(engine.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        totals["files"] += 1
        totals["lines"] += text.count("\n")
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string == "Any":
                totals["any"] += 1
            elif tok.type == tokenize.COMMENT and "type: ignore" in tok.string:
                totals["type_ignore"] += 1
        totals["dict_str_any"] += text.count("dict[str, Any]")
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr")
                and node.args
            ):
                totals["hasattr_getattr"] += 1
                if ast.unparse(node.args[0]) in PROVIDERISH:
                    totals["on_providers"] += 1
    return {"checkout": str(root), **totals}


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["."]:
        print(json.dumps(count(Path(arg).resolve())))
