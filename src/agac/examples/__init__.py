"""Bundled example projects, copied by ``agac init DIR --example NAME`` (no network)."""

from __future__ import annotations

import shutil
from pathlib import Path

from agac.errors import UsageError

__all__ = ["EXAMPLES", "init_project"]

_HERE = Path(__file__).parent
EXAMPLES = sorted(p.name for p in _HERE.iterdir() if p.is_dir() and not p.name.startswith("_"))


def init_project(directory: str | Path, example: str = "quickstart") -> tuple[list[str], list[str]]:
    """Copy example ``example`` into ``directory`` (created if needed); never overwrite a file.

    Returns (created, kept) relative paths.
    """
    if example not in EXAMPLES:
        raise UsageError(f"no example {example!r}; bundled examples: {', '.join(EXAMPLES)}")
    source = _HERE / example
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    created: list[str] = []
    kept: list[str] = []
    for path in sorted(source.rglob("*")):
        if "__pycache__" in path.parts or path.is_dir():
            continue
        rel = path.relative_to(source)
        dest = target / rel
        if dest.exists():
            kept.append(rel.as_posix())
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        created.append(rel.as_posix())
    return created, kept
