"""Resolving a tool's ``function: module:name`` from the project root (DESIGN §3).

The project root goes first on ``sys.path`` so a project's ``tools/mail.py`` is found
as ``tools.mail``. A module already imported from a different place under the same
name (another project in the same process, as in tests) is imported afresh from this
root, so two projects never share a ``tools`` module by accident.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agac.usercode import describe, fails_only_its_unit, user_stdout

__all__ = ["FunctionNotFound", "resolve_function"]


class FunctionNotFound(Exception):
    """The tool function could not be imported; the message says why."""


def resolve_function(spec: str, root: Path) -> Callable[..., Any]:
    """The callable named by ``module:name`` (``name`` may be dotted) under ``root``.

    Raises FunctionNotFound with the reason (bad spelling, import failure, missing
    attribute, not callable). Importing runs the module's top-level code; what it prints
    goes to stderr.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise FunctionNotFound(f"{spec!r} is not module:name")
    root_text = str(root.resolve())
    if root_text not in sys.path:
        sys.path.insert(0, root_text)
    _forget_foreign(module_name, Path(root_text))
    importlib.invalidate_caches()
    try:
        with user_stdout():  # what the module prints at import goes to stderr
            target: Any = importlib.import_module(module_name)
    except BaseException as exc:  # user code at import (even sys.exit) never ends agac
        if not fails_only_its_unit(exc):
            raise
        raise FunctionNotFound(f"cannot import {module_name!r}: {describe(exc)}") from exc
    for part in attr.split("."):
        if not hasattr(target, part):
            raise FunctionNotFound(f"module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise FunctionNotFound(f"{spec!r} is not callable")
    return target  # type: ignore[no-any-return]


def _forget_foreign(module_name: str, root: Path) -> None:
    """Drop a loaded module of that name when ``root`` holds its own copy of it."""
    top = module_name.split(".")[0]
    if not ((root / f"{top}.py").is_file() or (root / top).is_dir()):
        return
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None) if module is not None else None
    paths = [file] if file else list(getattr(module, "__path__", []) or [])
    if module is None or any(_inside(Path(p), root) for p in paths):
        return
    for loaded in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        del sys.modules[loaded]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True
