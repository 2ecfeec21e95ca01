"""Sandboxed Jinja2 rendering of prompts and guard expressions (docs/workflow-reference.md).

One module-level environment serves every template: a ``SandboxedEnvironment`` with
``StrictUndefined`` (a template that reads a missing value fails instead of rendering
an empty string), no autoescaping (prompts are not HTML) and trailing newlines kept.
Compiled templates and guards are cached by source, so rendering the same prompt for
every record costs one compilation.

Attribute access prefers a mapping's items over its methods: ``{{ source.items }}``
reads the record's ``items`` field, not ``dict.items``. The ``tojson`` filter writes
JSON with sorted keys and non-ASCII characters kept as they are.

:func:`capped` renders under a cap (an llm action's ``max_prompt_chars``): text longer
than it, a repetition (``"a" * 10**10``) or a power past it — checked before the value is
built, as the sandbox intercepts ``*`` and ``**``, so neither is folded at compile time
either — and a rendering that runs out of memory all raise :class:`PromptTooLarge`.
Output is joined as it comes and stopped once past the cap.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from agac.errors import AgacError

__all__ = [
    "DEFAULT_MAX_PROMPT_CHARS",
    "ENV",
    "Guard",
    "PromptTooLarge",
    "RenderError",
    "TemplateSyntaxError",
    "capped",
    "compile_guard",
    "compile_template",
    "evaluate_guard",
    "render",
    "tojson",
]


class RenderError(AgacError):
    """A template could not be rendered for this record."""

    code = "render_error"
    reason = "render_error"
    """The unit's reason code when it fails on this error."""

    def __init__(self, message: str | None = None, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


class PromptTooLarge(RenderError):
    """The rendered prompt (or a value built on the way to it) is over the action's
    ``max_prompt_chars``: the unit fails before anything is sent or stored."""

    reason = "prompt_too_large"


DEFAULT_MAX_PROMPT_CHARS = 8_000_000
"""About two million tokens: the largest context window offered today."""

_CAP: ContextVar[int] = ContextVar("agac_prompt_cap", default=DEFAULT_MAX_PROMPT_CHARS)
_MAX_EXPONENT = 4096


class _Environment(SandboxedEnvironment):
    # ``"a" * 10**10`` or ``10 ** 10 ** 10`` inside a template would take all the memory
    # or all the time of the process: the sizes are checked before they are computed.
    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                    size = len(seq) * times
                    if size > _CAP.get():
                        raise PromptTooLarge(
                            f"the template builds a value of {size:,} items, over the "
                            f"action's max_prompt_chars ({_CAP.get():,})"
                        )
        elif (
            operator == "**"
            and isinstance(left, int)
            and isinstance(right, int)
            and abs(left) > 1
            and right > _MAX_EXPONENT
        ):
            raise PromptTooLarge(
                f"the template raises a number to the power {right:,} (at most {_MAX_EXPONENT:,})"
            )
        return super().call_binop(context, operator, left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # Records are dicts: a field called "items" or "keys" must win over the method.
        if type(obj) is dict:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


def tojson(value: Any, indent: int | None = None) -> str:
    """JSON for a prompt: sorted keys (stable renderings, stable fingerprints), UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=indent, default=str)


ENV = _Environment(
    undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, cache_size=0
)
ENV.filters["tojson"] = tojson


@lru_cache(maxsize=4096)
def compile_template(source: str, name: str = "<template>") -> Template:
    """The compiled template for ``source``; TemplateSyntaxError (with ``lineno``) if bad."""
    try:
        template = ENV.from_string(source)
    except TemplateSyntaxError as exc:
        exc.name = exc.name or name
        raise
    template.name = name
    if not any(marker in source for marker in _MARKERS):
        # Nothing to evaluate: the text is the same for every view (newlines as Jinja
        # writes them), rendered here once instead of once per record.
        template._agac_text = template.render()  # type: ignore[attr-defined]
    return template


_MARKERS = ("{{", "{%", "{#")
"""What starts an expression, a statement or a comment (the environment's defaults; it sets
no line statement or line comment prefix)."""


@lru_cache(maxsize=4096)
def compile_guard(expr: str) -> Any:
    """The compiled guard expression; TemplateSyntaxError if it does not parse."""
    return ENV.compile_expression(expr, undefined_to_none=False)


def render(template: Template | str, view: dict[str, Any]) -> str:
    """Render ``template`` with ``view`` (``source`` and ancestor outputs).

    Raises RenderError naming the template and the missing variable when the template
    reads something ``view`` lacks, and for any other failure inside the template.
    """
    if isinstance(template, str):
        template = compile_template(template)
    text = getattr(template, "_agac_text", None)
    if text is not None:
        return text  # type: ignore[no-any-return]
    try:
        # Template.render merges the template's ChainMap of globals into a new dict on
        # every call; building that dict ourselves and passing it as the shared
        # context renders the same text at a fraction of the cost.
        flat = getattr(template, "_agac_globals", None)
        if flat is None:
            flat = dict(template.globals)
            template._agac_globals = flat  # type: ignore[attr-defined]
        parent = dict(flat)
        parent.update(view)
        ctx = template.new_context(parent, shared=True)
        try:
            return _joined(template.root_render_func(ctx), _CAP.get())
        except Exception:  # noqa: BLE001 - Jinja's own handler re-raises it with the template's line
            ENV.handle_exception()
    except UndefinedError as exc:
        raise RenderError(
            f"template {template.name!r} reads an undefined value: {exc.message}",
            variable=exc.message,
        ) from exc
    except SecurityError as exc:
        raise RenderError(f"template {template.name!r} did something unsafe: {exc}") from exc
    except RenderError:
        raise
    except MemoryError:
        raise PromptTooLarge(
            f"template {template.name!r} ran out of memory while rendering "
            "(a value too large to build; max_prompt_chars caps a prompt)"
        ) from None
    except Exception as exc:
        raise RenderError(
            f"template {template.name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _joined(chunks: Any, cap: int) -> str:
    """The chunks joined, stopped as soon as they are longer than ``cap``: a loop that
    writes a little many times (``{% for i in range(10**5) %}{{ source.text }}``) is
    refused before it is all in memory."""
    parts: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > cap:
            raise PromptTooLarge(
                f"the template renders more than {cap:,} characters, over "
                f"the action's max_prompt_chars ({cap:,})"
            )
        parts.append(chunk)
    return "".join(parts)


@dataclass(frozen=True)
class Guard:
    """A compiled ``when:`` guard with its one meaning, shared by the walk, ``agac plan``
    and ``agac render``: a guard that reads a missing field is False (the unit is skipped
    with reason ``guard``), not an error. Other failures (a type error, a sandbox
    violation) raise RenderError: they are mistakes in the guard, not facts about the
    record, and the unit fails ``render_error``."""

    expr: str
    compiled: Any = field(repr=False, compare=False)

    @classmethod
    def compile(cls, expr: str) -> Guard:
        """TemplateSyntaxError if ``expr`` does not parse."""
        return cls(expr, compile_guard(expr))

    def holds(self, view: dict[str, Any]) -> bool:
        try:
            return bool(self.compiled(view))
        except UndefinedError:
            return False
        except Exception as exc:
            raise RenderError(f"guard {self.expr!r} failed: {type(exc).__name__}: {exc}") from exc


def evaluate_guard(expr: str, view: dict[str, Any]) -> bool:
    """The truth of guard ``expr`` over ``view`` (:meth:`Guard.holds`)."""
    return Guard.compile(expr).holds(view)


def capped(template: Template | str, view: dict[str, Any], cap: int) -> str:
    """``render`` under a cap of ``cap`` characters: PromptTooLarge if the text (or a value
    the template builds on the way) is longer, or if rendering runs out of memory."""
    token = _CAP.set(cap)
    try:
        text = render(template, view)
    finally:
        _CAP.reset(token)
    if len(text) > cap:
        raise PromptTooLarge(
            f"the rendered text is {len(text):,} characters, over the "
            f"action's max_prompt_chars ({cap:,})"
        )
    return text
