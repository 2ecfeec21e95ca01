"""The CLI's one error boundary: whatever stops a command becomes a message and an exit code.

:func:`describe` turns any exception into a :class:`Failure` — a stable code, a message
that names the path (or store, or run) involved, a hint that names the fix, and the exit
code (1, or 2 for a refused command or bad usage, 75 paused, 130 interrupted).
:func:`report` prints it: ``agac: message`` and ``  hint: the fix`` on stderr, and with
``--json`` one JSON document on stdout:

- ``{"ok": false, "errors": [...]}`` for configuration problems (each located);
- the run's summary with ``"ok": false`` and an ``error`` member when the failure
  stopped a run that exists;
- ``{"ok": false, "error": {"code", "message", "hint"}}`` otherwise.

No traceback reaches the user: an unexpected exception is ``internal_error`` (with
``AGAC_DEBUG=1`` its traceback goes to stderr as well). Store errors arrive already
translated by the store (no SQL text, no bound values).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

import click

from agac.errors import AgacError, ConfigError, Problem, ProviderError
from agac.jsontext import NotJSON, strict_dumps

__all__ = ["Failure", "describe", "report"]


@dataclass(frozen=True)
class Failure:
    """What stopped a command, as the user is told."""

    code: str
    message: str
    hint: str | None
    exit_code: int
    run_id: str | None = None
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


_REPORT = (
    "this is a bug in agac: please report it with the command you ran "
    "(AGAC_DEBUG=1 prints the traceback)"
)

# errno -> (code, what it means, the fix); the path is put in front of the meaning.
_OS_ERRORS: dict[int, tuple[str, str, str]] = {
    errno.ENOENT: (
        "not_found",
        "no such file or folder",
        "check the path; its folder must exist (or be creatable) and be writable",
    ),
    errno.EACCES: (
        "permission_denied",
        "permission denied",
        "check its permissions (ls -l), or choose a path you can write",
    ),
    errno.EPERM: (
        "permission_denied",
        "operation not permitted",
        "check its permissions and attributes (ls -l, lsattr), or choose another path",
    ),
    errno.EROFS: (
        "read_only",
        "on a read-only file system",
        "choose a path on a writable file system",
    ),
    errno.EISDIR: ("is_a_directory", "is a folder, not a file", "name a file inside it"),
    errno.ENOTDIR: (
        "not_a_directory",
        "a part of the path is a file, not a folder",
        "check the path",
    ),
    errno.ENOSPC: ("disk_full", "no space left on the device", "free some space"),
    errno.EEXIST: ("exists", "already exists", "choose another path, or remove it first"),
}


def describe(exc: BaseException) -> Failure:
    """The :class:`Failure` a user is shown for ``exc``."""
    if isinstance(exc, ConfigError) and exc.problems:
        return Failure(
            "config_error", exc.message, exc.hint, exc.exit_code, exc.run_id, tuple(exc.problems)
        )
    if isinstance(exc, ProviderError):
        return Failure("provider_error", exc.message, exc.hint, exc.exit_code, exc.run_id)
    if isinstance(exc, AgacError):
        return Failure(exc.code, exc.message, exc.hint, exc.exit_code, exc.run_id)
    if isinstance(exc, KeyboardInterrupt):
        return Failure("interrupted", "interrupted", "run the same command again to go on", 130)
    if isinstance(exc, OSError):
        return _os_failure(exc)
    if isinstance(exc, click.ClickException):
        return Failure("usage_error", exc.format_message(), "see --help", exc.exit_code)
    return Failure(
        "internal_error", f"unexpected {type(exc).__name__}: {_first_line(exc)}", _REPORT, 1
    )


def _os_failure(exc: OSError) -> Failure:
    path = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    known = _OS_ERRORS.get(exc.errno or 0)
    if known is None:
        said = exc.strerror or _first_line(exc)
        return Failure(
            "os_error", f"{path}: {said}" if path else said, "check the path and its permissions", 1
        )
    code, meaning, hint = known
    return Failure(code, f"{path}: {meaning}" if path else meaning, hint, 1)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__


def report(exc: BaseException, as_json: bool) -> int:
    """Print ``exc`` as the user sees it (see the module docstring); its exit code.

    A reader that went away (``agac export … | head``) is not an error to explain: the
    command stops quietly with exit 1, as a shell pipeline expects."""
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        return 1
    failure = describe(exc)
    if failure.code == "internal_error" and os.environ.get("AGAC_DEBUG"):
        traceback.print_exception(exc, file=sys.stderr)
    if as_json:
        click.echo(_json_text(failure))
    if failure.problems:
        for p in failure.problems:
            click.echo(p.render(), err=True)
    else:
        click.echo(f"agac: {failure.message}", err=True)
        if failure.hint:
            click.echo(f"  hint: {failure.hint}", err=True)
    return failure.exit_code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests capture stdout)
        pass


def _json_text(failure: Failure) -> str:
    """The failure's document as strict JSON; without the run's summary when that summary
    holds a value JSON cannot (the error itself is always told)."""
    try:
        return strict_dumps(_json_document(failure), indent=2, default=str)
    except NotJSON:
        return strict_dumps({"ok": False, "error": failure.to_dict()}, indent=2, default=str)


def _json_document(failure: Failure) -> dict[str, Any]:
    if failure.problems:
        return {"ok": False, "errors": [p.to_dict() for p in failure.problems]}
    summary = _summary(failure.run_id)
    if summary is not None:
        return {**summary, "ok": False, "error": failure.to_dict()}
    return {"ok": False, "error": failure.to_dict()}


def _summary(run_id: str | None) -> dict[str, Any] | None:
    """The run's summary, when there is a run and the store can still be read."""
    if run_id is None:
        return None
    from agac import api

    try:
        return api.status(run_id).to_dict()
    except Exception:  # noqa: BLE001 - the store that failed may not be readable either
        return None
