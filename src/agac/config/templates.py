"""Static checks of prompts, ``system`` and guards against what an action can see.

What a template sees (docs/workflow-reference.md): ``source`` and the output of every ancestor by
name, narrowed by ``context.observe`` and ``context.drop``. A template that reads
anything else is ``undefined_variable``; a Jinja syntax error is ``invalid_template``
at the line inside the file. A guard reading a field that the ancestor's schema cannot
produce is the warning ``guard_reads_missing_field`` (at run time such a guard is
simply false). A check (``checks:``) that reads a field its action's schema (or an
ancestor's) cannot produce is the error ``check_reads_missing_field``: a check that can
never pass is a mistake, not a guard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jinja2 import TemplateSyntaxError

from agac.config.actions import RawAction
from agac.config.model import CheckSpec, ContextSpec
from agac.config.source import Findings, Path, did_you_mean
from agac.prompt.attachments import compile_attachments
from agac.prompt.references import Reference, template_references
from agac.prompt.render import compile_guard, compile_template

__all__ = [
    "TEXT_SCHEMA",
    "can_produce",
    "check_check_expressions",
    "check_guard_fields",
    "check_templates",
    "template_entries",
]

TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}
"""The shape of an answer without ``schema``: ``{"text": ...}``."""

_TEMPLATES = (("system", False), ("prompt", False), ("when", True))


def check_templates(
    f: Findings,
    raw: RawAction,
    ancestors: tuple[str, ...],
    context: ContextSpec | None,
    names: Iterable[str],
    extra: frozenset[str] = frozenset(),
) -> dict[str, set[Reference]]:
    """Compile and check the templates of one action; return the references of each.

    ``extra`` are roots the action sees whatever its ``context`` says: the item of a
    fan-out (``item``, its ``as:`` name, ``version``) and a join's ``fulfilled``,
    ``rejected`` and ``skipped`` (docs/workflow-reference.md, Fan-out and join)."""
    visible = {"source", *ancestors, *extra}
    names = set(names)
    observe, drop = _view_paths(f, raw, context, visible, names)
    found: dict[str, set[Reference]] = {}
    for key, expression, text, where in template_entries(raw):
        try:
            if expression:
                compile_guard(text)
            else:
                compile_template(text, f"{raw.name}.{key}")
            refs = template_references(text, expression=expression)
            if key.startswith("attachments"):
                compile_attachments((text,), raw.name)
        except TemplateSyntaxError as exc:
            line = f.doc.value_line(where) + max((exc.lineno or 1) - 1, 0)
            f.error(
                "invalid_template",
                f"{key} of action {raw.name!r} is not a valid Jinja "
                f"{'expression' if expression else 'template'}: {exc.message}",
                where,
                line=line,
            )
            continue
        found[key] = refs
        for ref in sorted(refs, key=str):
            if str(ref[0]) in extra:
                continue
            reason = _invisible(ref, visible, observe, drop, names)
            if reason is not None:
                message, hint = reason
                f.error(
                    "undefined_variable",
                    f"{key} of action {raw.name!r} reads {_dotted(ref)!r}, {message}",
                    where,
                    hint=hint,
                )
    return found


def template_entries(raw: RawAction) -> list[tuple[str, bool, str, Path]]:
    """(key, is an expression, text, where) of every template of the action: ``system``,
    ``prompt``, ``when`` and each ``attachments`` entry (``attachments[0]``, …)."""
    out = []
    for key, expression in _TEMPLATES:
        text = raw.values.get(key)
        if isinstance(text, str) and (key == "when" or raw.kind == "llm"):
            out.append((key, expression, text, raw.origin(key)))
    entries = raw.values.get("attachments")
    if raw.kind == "llm" and isinstance(entries, list):
        for i, text in enumerate(entries):
            if isinstance(text, str):
                out.append((f"attachments[{i}]", False, text, raw.origin("attachments") + (i,)))
    return out


def _view_paths(
    f: Findings, raw: RawAction, context: ContextSpec | None, visible: set[str], names: set[str]
) -> tuple[list[tuple[str, ...]] | None, list[tuple[str, ...]]]:
    if context is None:
        return None, []
    observe: list[tuple[str, ...]] | None = None
    if context.observe is not None:
        observe = [] if "*" not in context.observe else None
        if observe is not None:
            observe = _checked(f, raw, "observe", context.observe, visible, names)
    drop = _checked(f, raw, "drop", context.drop, visible, names)
    return observe, drop


def _checked(
    f: Findings, raw: RawAction, key: str, paths: Iterable[str], visible: set[str], names: set[str]
) -> list[tuple[str, ...]]:
    result = []
    for i, text in enumerate(paths):
        parts = tuple(p for p in text.split(".") if p != "*")
        result.append(parts)
        if parts and parts[0] not in visible:
            _, hint = _not_visible(parts[0], visible, names)
            f.error(
                "undefined_variable",
                f"context.{key} of action {raw.name!r} names {text!r}, which it cannot see",
                raw.origin("context") + (key, i),
                hint=hint,
            )
    return result


def _invisible(
    ref: Reference,
    visible: set[str],
    observe: list[tuple[str, ...]] | None,
    drop: list[tuple[str, ...]],
    names: set[str],
) -> tuple[str, str | None] | None:
    root = str(ref[0])
    if root not in visible:
        return _not_visible(root, visible, names)
    path = tuple(str(p) for p in ref)
    if observe is not None and not any(_prefix(o, path) or _prefix(path, o) for o in observe):
        return "which is not in context.observe", "add it to context.observe"
    if any(_prefix(d, path) for d in drop):
        return "which context.drop removes", "remove it from context.drop"
    return None


def _not_visible(root: str, visible: set[str], names: set[str]) -> tuple[str, str | None]:
    if root in names:
        return (
            f"but {root!r} is not an ancestor of this action",
            f"add {root!r} to its dependencies",
        )
    seen = ", ".join(sorted(visible))
    return f"which it cannot see (it sees {seen})", did_you_mean(root, visible)


def _prefix(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short


def _dotted(ref: Reference) -> str:
    return ".".join(str(p) for p in ref)


def check_guard_fields(
    f: Findings,
    raw: RawAction,
    refs: Iterable[Reference],
    outputs: Mapping[str, tuple[str, dict[str, Any] | None]],
) -> None:
    """Warn when the guard reads a field that an ancestor's output cannot have.

    ``outputs`` maps an action name to (kind, schema). An llm answer without a schema is
    ``{"text": …}``; a tool without a schema can return anything, so it is never judged.
    """
    where: Path = raw.origin("when")
    for ref in sorted(refs, key=str):
        if len(ref) < 2 or str(ref[0]) not in outputs:
            continue
        kind, schema = outputs[str(ref[0])]
        if schema is None and kind != "llm":
            continue
        if not can_produce(schema or TEXT_SCHEMA, ref[1:]):
            f.warn(
                "guard_reads_missing_field",
                f"guard of action {raw.name!r} reads "
                f"{_dotted(ref)!r}, which the schema of {str(ref[0])!r} cannot produce; "
                "the guard will be false",
                where,
            )


def can_produce(schema: Any, path: Reference) -> bool:
    """Whether a value of ``schema`` can hold ``path`` (True when the schema cannot tell)."""
    for key in path:
        if not isinstance(schema, dict) or any(
            k in schema for k in ("$ref", "anyOf", "oneOf", "allOf", "if", "not")
        ):
            return True
        types = schema.get("type")
        types = {types} if isinstance(types, str) else set(types or ())
        if isinstance(key, int):
            items = schema.get("items")
            if not isinstance(items, dict):
                return True
            schema = items
            continue
        if types and not types & {"object"}:
            return False
        props = schema.get("properties")
        if (
            props is None
            or schema.get("patternProperties")
            or schema.get("additionalProperties") not in (None, False)
        ):
            return True
        if key not in props:
            return False
        schema = props[key]
    return True


def check_check_expressions(
    f: Findings,
    action: str,
    checks: Iterable[CheckSpec],
    where: Path,
    schema: dict[str, Any] | None,
    visible: Iterable[str],
    outputs: Mapping[str, tuple[str, dict[str, Any] | None]],
) -> None:
    """Compile each check's ``expr`` and check what it reads: ``answer`` against the
    action's own ``schema`` (``{"text": …}`` without one), an ancestor's output against
    its schema, anything else against what the action sees."""
    roots = {"answer", "source", *visible}
    for i, check in enumerate(checks):
        if check.judge is not None:
            _check_judge_templates(f, action, check, where + (i, "judge"), roots)
            continue
        assert check.expr is not None
        at = where + (i, "expr")
        try:
            compile_guard(check.expr)
            refs = template_references(check.expr, expression=True)
        except TemplateSyntaxError as exc:
            f.error(
                "invalid_template",
                f"check {check.name!r} of action {action!r} is not a valid Jinja expression: "
                f"{exc.message}",
                at,
            )
            continue
        for ref in sorted(refs, key=str):
            root = str(ref[0])
            dotted = ".".join(str(p) for p in ref)
            if root not in roots:
                f.error(
                    "undefined_variable",
                    f"check {check.name!r} of action {action!r} reads {dotted!r}, which it "
                    f"cannot see (it sees {', '.join(sorted(roots))})",
                    at,
                    hint=did_you_mean(root, roots),
                )
                continue
            shape = _shape_of(root, schema, outputs)
            if shape is not None and len(ref) > 1 and not can_produce(shape, ref[1:]):
                f.error(
                    "check_reads_missing_field",
                    f"check {check.name!r} of action {action!r} reads {dotted!r}, which "
                    f"the schema of {action if root == 'answer' else root!r} cannot produce",
                    at,
                    hint="fix the field's name, or add it to the schema",
                )


def _check_judge_templates(
    f: Findings, action: str, check: CheckSpec, where: Path, roots: set[str]
) -> None:
    """A judge's prompt and system compile and read only what the check sees (``answer``,
    ``source``, the ancestors); the fields of ``answer`` are the model's to read, unchecked."""
    assert check.judge is not None
    for key, text in (("prompt", check.judge.prompt), ("system", check.judge.system)):
        if text is None:
            continue
        try:
            compile_template(text, f"{action}.checks.{check.name}.{key}")
            refs = template_references(text)
        except TemplateSyntaxError as exc:
            f.error(
                "invalid_template",
                f"the {key} of judge {check.name!r} of action {action!r} is not a valid "
                f"template: {exc.message}",
                where + (key,),
            )
            continue
        for ref in sorted(refs, key=str):
            root = str(ref[0])
            if root not in roots:
                f.error(
                    "undefined_variable",
                    f"judge {check.name!r} of action {action!r} reads "
                    f"{'.'.join(str(p) for p in ref)!r}, which it cannot see (it sees "
                    f"{', '.join(sorted(roots))})",
                    where + (key,),
                    hint=did_you_mean(root, roots),
                )


def _shape_of(
    root: str,
    schema: dict[str, Any] | None,
    outputs: Mapping[str, tuple[str, dict[str, Any] | None]],
) -> dict[str, Any] | None:
    if root == "answer":
        return schema or TEXT_SCHEMA
    if root not in outputs:
        return None
    kind, theirs = outputs[root]
    if theirs is None and kind != "llm":
        return None
    return theirs or TEXT_SCHEMA
