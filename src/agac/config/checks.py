"""An llm action's ``checks:`` read into :class:`CheckSpec` values (docs/workflow-reference.md,
Checks); their expressions are checked with the other templates (config/templates.py).

A check's ``expr`` is a sandboxed Jinja expression (the same compiler as a guard) that sees
``answer`` (this action's answer), ``source`` and the outputs of the action's ancestors. A
check with ``judge:`` instead asks a model (``model``, ``prompt``, ``system``,
``max_tokens``) to grade the answer; its prompt is a template that sees the same names.
"""

from __future__ import annotations

from typing import Any

from agac.config.keys import CHECK_KEYS, CHECK_ON_FAIL, FOLLOW_UP_RUN_MODES, JUDGE_KEYS
from agac.config.model import CheckSpec, JudgeSpec
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
    expr, judge = _expr_or_judge(f, body, path)
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
    repair_mode = _run_mode(f, body, "repair_run_mode", path)
    if name is None or (expr is None and judge is None):
        return None
    return CheckSpec(name, expr, message, on_fail, repairs, judge, repair_mode)


def _run_mode(f: Findings, body: dict[str, Any], key: str, path: Path) -> str | None:
    """A follow-up's ``run_mode`` (a judge's) or a check's ``repair_run_mode``: ``online``
    or ``batch``; None when not given (as the action runs)."""
    if key not in body:
        return None
    value = body[key]
    if value not in FOLLOW_UP_RUN_MODES:
        f.error(
            "invalid_value",
            f"{key} must be one of {', '.join(FOLLOW_UP_RUN_MODES)}, got {value!r}",
            path + (key,),
            hint=did_you_mean(str(value), FOLLOW_UP_RUN_MODES)
            or "batch: in the batch round after the answers are read; online: asked live",
        )
        return None
    return str(value)


def _expr_or_judge(
    f: Findings, body: dict[str, Any], path: Path
) -> tuple[str | None, JudgeSpec | None]:
    """A check's ``expr``, or its ``judge``: exactly one of them."""
    if ("expr" in body) == ("judge" in body):
        f.error(
            "invalid_value",
            "a check has either expr: (an expression) or judge: (a model that grades)",
            path,
            hint='expr: "answer.total >= 0", or judge: {model: openai/gpt-4o-mini, prompt: ...}',
        )
        return None, None
    if "expr" in body:
        return read_str(f, body["expr"], path + ("expr",)), None
    return None, _judge(f, body["judge"], path + ("judge",))


def _judge(f: Findings, value: Any, path: Path) -> JudgeSpec | None:
    from agac.providers.registry import available_providers

    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, JUDGE_KEYS, path, "a judge")
    model = read_str(f, body.get("model"), path + ("model",))
    prompt = read_str(f, body.get("prompt"), path + ("prompt",))
    system = read_str(f, body["system"], path + ("system",)) if "system" in body else None
    tokens = 256
    if "max_tokens" in body:
        tokens = read_int(f, body["max_tokens"], path + ("max_tokens",)) or tokens
    run_mode = _run_mode(f, body, "run_mode", path)
    if model is None or prompt is None:
        return None
    provider, sep, name = model.partition("/")
    known = available_providers()
    if not sep or not name or provider not in known:
        f.error(
            "unknown_provider" if sep and name else "invalid_value",
            f"judge model {model!r} is not provider/model with a known provider",
            path + ("model",),
            hint=did_you_mean(provider, known) or f"known: {', '.join(known)}",
        )
        return None
    return JudgeSpec(model, provider, name, prompt, system, tokens, run_mode)
