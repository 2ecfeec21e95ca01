"""Which top-level fields of a record a workflow reads: the columns a columnar input is
read for (a 200-column table whose prompt reads two columns is not read 200 wide).

A workflow reads ``source.X`` where

- a prompt, ``system``, guard (``when``) or ``attachments`` entry of an action names
  ``source.X…`` (found statically in the template, as ``agac validate`` finds them);
- a fan-out iterates ``over: source.X``;
- a tool or join action's ``context.observe`` lists ``source.X…``: the view is what its
  function gets.

It reads **everything** when one of them names ``source`` itself (``{{ source }}``,
``source[key]``, ``source.items()``), when an action's ``context.observe`` holds
``source``, ``source.*`` or ``*``, or when a tool action has no ``context.observe``
(its function sees the whole record). ``id_field`` is always read besides.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from jinja2 import TemplateSyntaxError

from agac.config.model import Action, Workflow
from agac.prompt.references import template_references

__all__ = ["EVERYTHING", "TEMPLATE_FIELDS", "source_columns"]

EVERYTHING = None
"""What :func:`source_columns` returns for a workflow that reads every field."""

TEMPLATE_FIELDS: tuple[tuple[str, bool], ...] = (
    ("system", False),
    ("prompt", False),
    ("when", True),
)
"""The action fields holding one template (name, is an expression) that may read ``source``;
``attachments`` holds a list of them."""


class _All(Exception):
    """The workflow reads every field of a record."""


def source_columns(workflow: Workflow) -> frozenset[str] | None:
    """The top-level record fields ``workflow`` reads (besides ``id_field``), or None
    (:data:`EVERYTHING`) when it reads them all (see the module docstring)."""
    try:
        return frozenset(c for action in workflow.actions for c in _action_reads(action))
    except _All:
        return EVERYTHING


def _action_reads(action: Action) -> Iterator[str]:
    observe = action.context.observe
    if observe is not None and any(o.strip() in ("*", "source", "source.*") for o in observe):
        raise _All
    if action.kind == "tool" and observe is None:
        raise _All
    for key, expression in TEMPLATE_FIELDS:
        text = getattr(action, key)
        if isinstance(text, str) and text:
            yield from _template_reads(text, expression)
    for attachment in action.attachments:
        yield from _template_reads(attachment, False)
    for check in action.checks:  # a check's expression sees ``source`` like a guard
        if check.expr is not None:
            yield from _template_reads(check.expr, True)
        if check.judge is not None:  # and a judge's templates like a prompt
            for text in (check.judge.prompt, check.judge.system):
                if text is not None:
                    yield from _template_reads(text, False)
    over = action.fan_out.over if action.fan_out is not None else None
    if over is not None:
        yield from _heads([over])
    if action.kind != "llm" and observe is not None:
        yield from _heads(observe)


def _template_reads(text: str, expression: bool) -> Iterator[str]:
    try:
        refs = template_references(text, expression=expression)
    except TemplateSyntaxError:
        raise _All from None  # validation refuses it; never guess less than everything
    for ref in refs:
        if not ref or ref[0] != "source":
            continue
        if len(ref) < 2 or not isinstance(ref[1], str):
            raise _All
        yield ref[1]


def _heads(paths: Iterable[str]) -> Iterator[str]:
    """The top-level field of each dotted path under ``source``."""
    for path in paths:
        parts = path.strip().split(".")
        if parts[0] != "source":
            continue
        if len(parts) < 2 or parts[1] in ("", "*"):
            raise _All
        yield parts[1]
