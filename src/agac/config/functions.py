"""Resolving a tool's ``function: module:name`` from the project root (docs/workflow-reference.md).

The project root goes first on ``sys.path`` so a project's ``tools/mail.py`` is found
as ``tools.mail``. A module already imported from a different place under the same
name (another project in the same process, as in tests) is imported afresh from this
root, so two projects never share a ``tools`` module by accident.

An import is bounded: a module whose top-level code has not finished within
``AGAC_IMPORT_TIMEOUT`` seconds (default 30) is ``FunctionNotFound`` saying so, and is not
waited for again in this process (its import, still running in a daemon thread, holds
that module's import lock), so ``agac validate`` and a run never hang on a tool's import.

:func:`code_hash` is what a tool's stored results are tied to besides its inputs: the
text of the file that defines the function (its helpers in that file included), so an
edited tool is called again rather than answered from its old results (decision 0096).
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import inspect
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agac.config.variables import IMPORT_TIMEOUT
from agac.usercode import describe, fails_only_its_unit, user_stdout

__all__ = ["FunctionNotFound", "code_hash", "resolve_function"]

_STUCK: set[str] = set()
"""Modules whose import did not finish in time: never waited for again."""


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
            target: Any = _bounded_import(module_name)
    except FunctionNotFound:
        raise
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


def code_hash(fn: Callable[..., Any]) -> str:
    """The sha256 of the code a tool runs: the bytes of the source file that defines it
    (through ``functools.wraps`` decorators), its own source text, and its qualified name.
    A callable object is hashed by its class. A function with no source file (built in,
    made by ``exec``) is hashed by its compiled code instead; only code outside that file
    (another module it imports, a package) is not part of it."""
    target: Any = inspect.unwrap(fn)
    if not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isclass(target)):
        target = type(target)
    digest = hashlib.sha256(f"{target.__module__}:{target.__qualname__}".encode())
    for part in (_source_file(target), _source_text(target)):
        digest.update(b"\x1f" + part)
    return digest.hexdigest()


def _source_file(target: Any) -> bytes:
    try:
        file = inspect.getsourcefile(target)
    except TypeError:  # built in
        return b""
    if file is None:
        return b""
    try:
        return Path(file).read_bytes()
    except OSError:
        return b""


def _source_text(target: Any) -> bytes:
    try:
        return inspect.getsource(target).encode("utf-8", "surrogatepass")
    except (OSError, TypeError):
        if not inspect.isfunction(target):
            return b""
        code = target.__code__
        return code.co_code + repr(code.co_consts).encode()


def _bounded_import(module_name: str) -> Any:
    """``importlib.import_module``, in a daemon thread given ``AGAC_IMPORT_TIMEOUT``
    seconds; FunctionNotFound when it takes longer. A module already imported is returned
    at once."""
    if module_name in sys.modules:
        return importlib.import_module(module_name)
    top = module_name.split(".")[0]
    stuck = next((m for m in _STUCK if m == module_name or m.split(".")[0] == top), None)
    seconds = IMPORT_TIMEOUT.from_environment("AGAC_IMPORT_TIMEOUT", os.environ) or 30.0
    if stuck is not None:
        raise FunctionNotFound(
            f"cannot import {module_name!r}: importing {stuck!r} did not "
            f"finish within {seconds:g} seconds earlier in this process"
        )
    done: dict[str, Any] = {}

    def load() -> None:
        try:
            done["module"] = importlib.import_module(module_name)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            done["error"] = exc

    # The import runs in the caller's context, so what redirects user code's prints there
    # (agac.usercode.user_stdout) holds in the thread too.
    context = contextvars.copy_context()
    worker = threading.Thread(
        target=context.run, args=(load,), name=f"agac-import-{module_name}", daemon=True
    )
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        _STUCK.add(module_name)
        raise FunctionNotFound(
            f"cannot import {module_name!r}: it did not finish importing "
            f"within {seconds:g} seconds (its top-level code runs at import; "
            "AGAC_IMPORT_TIMEOUT sets the bound)"
        )
    if "error" in done:
        raise done["error"]
    return done["module"]


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
    # A copy: another run's thread may be importing (adding to sys.modules) meanwhile.
    for loaded in [m for m in sys.modules.copy() if m == top or m.startswith(top + ".")]:
        sys.modules.pop(loaded, None)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True
