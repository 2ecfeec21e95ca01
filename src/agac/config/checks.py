"""An llm action's ``checks:`` read into :class:`CheckSpec` values (docs/workflow-reference.md,
Checks); their expressions are checked with the other templates (config/templates.py).

A check's ``expr`` is a sandboxed Jinja expression (the same compiler as a guard) that sees
``answer`` (this action's answer), ``source`` and the outputs of the action's ancestors.
"""

from __future__ import annotations

from typing import Any

from agac.config.keys import CHECK_KEYS, CHECK_ON_FAIL
from agac.config.model import CheckSpec
from agac.config.source import Findings, Path, did_you_mean
from agac.config.values import read_int, read_mapping, read_str

__all__ = ["read_checks"]

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def read_checks(f: Findings, value: Any, path: Path) -> tuple[CheckSpec, ...]:
    """The typed ``checks:`` list; every bad entry reported at its line."""
    if not isinstance(value, list):
        f.error("invalid_value", f"checks must be a list of checks, got {value!r}", path)
        return ()
    out: list[CheckSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(value):
        spec = _check(f, entry, path + (i,))
        if spec is None:
            continue
        if spec.name in seen:
            f.error("invalid_value", f"two checks are named {spec.name!r}", path + (i, "name"))
            continue
        seen.add(spec.name)
        out.append(spec)
    return tuple(out)


def _check(f: Findings, entry: Any, path: Path) -> CheckSpec | None:
    body = read_mapping(f, entry, path)
    if body is None:
        return None
    f.unknown_keys(body, CHECK_KEYS, path, "a check")
    name = read_str(f, body.get("name"), path + ("name",))
    expr = read_str(f, body.get("expr"), path + ("expr",))
    if name is not None and not set(name) <= _NAME_CHARS:
        f.error(
            "invalid_value",
            f"check name {name!r} may hold only letters, digits, _ and -",
            path + ("name",),
            hint="it names the check's column in exports: check.<name>",
        )
        name = None
    message = None
    if "message" in body:
        message = read_str(f, body["message"], path + ("message",))
    on_fail = body.get("on_fail", "fail")
    if on_fail not in CHECK_ON_FAIL:
        f.error(
            "invalid_value",
            f"on_fail must be one of {', '.join(CHECK_ON_FAIL)}, got {on_fail!r}",
            path + ("on_fail",),
            hint=did_you_mean(str(on_fail), CHECK_ON_FAIL),
        )
        return None
    repairs = 1
    if "max_repairs" in body:
        repairs = read_int(f, body["max_repairs"], path + ("max_repairs",)) or 1
    if name is None or expr is None:
        return None
    return CheckSpec(name, expr, message, on_fail, repairs)
