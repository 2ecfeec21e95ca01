"""Sandboxed Jinja2 rendering of prompts and guard expressions (DESIGN §3).

One module-level environment serves every template: a ``SandboxedEnvironment`` with
``StrictUndefined`` (a template that reads a missing value fails instead of rendering
an empty string), no autoescaping (prompts are not HTML) and trailing newlines kept.
Compiled templates and guards are cached by source, so rendering the same prompt for
every record costs one compilation.

Attribute access prefers a mapping's items over its methods: ``{{ source.items }}``
reads the record's ``items`` field, not ``dict.items``. The ``tojson`` filter writes
JSON with sorted keys and non-ASCII characters kept as they are.

A rendering has a size cap (``render(..., limit=N)``, UTF-8 bytes; an llm action's
``max_prompt_bytes``): text past it raises :class:`PromptTooLarge`, and so does a
repetition (``"a" * 10**10``) or a power whose result would be past it — checked before
the value is built, since the sandbox lets templates multiply sequences — and a
rendering that runs out of memory. Neither is folded at compile time: the sandbox
intercepts ``*`` and ``**``.
"""

from __future__ import annotations

import json
import math
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from agac.errors import AgacError

__all__ = [
    "ENV",
    "PROMPT_TOO_LARGE",
    "RENDER_ERROR",
    "SANDBOX_LIMIT",
    "PromptTooLarge",
    "RenderError",
    "TemplateSyntaxError",
    "compile_guard",
    "compile_template",
    "evaluate_guard",
    "render",
    "tojson",
]


RENDER_ERROR = "render_error"
PROMPT_TOO_LARGE = "prompt_too_large"


class RenderError(AgacError):
    """A template could not be rendered for this record."""

    code = RENDER_ERROR

    def __init__(self, message: str | None = None, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


class PromptTooLarge(RenderError):
    """The rendered text would be larger than the cap."""

    code = PROMPT_TOO_LARGE


SANDBOX_LIMIT = 64 * 1024 * 1024
"""The largest string or sequence a template may build when the caller sets no cap."""

_LIMIT: ContextVar[int] = ContextVar("agac_render_limit", default=SANDBOX_LIMIT)


class _Environment(SandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """``*`` and ``**``, refused when their result would be past the cap (a
        sequence repeated, or an integer of more digits than the cap has bytes)."""
        limit = _LIMIT.get()
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | bytes | list | tuple) and isinstance(times, int) \
                        and len(seq) * times > limit:
                    raise PromptTooLarge(f"builds a value of {len(seq) * times:,} items, over "
                                         f"the cap of {limit:,} bytes")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) \
                and abs(left) > 1 and right > 0 \
                and right * math.log10(abs(left)) > limit:
            raise PromptTooLarge(f"builds a number ({left} ** {right}) of more digits than "
                                 f"the cap of {limit:,} bytes")
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


def render(template: Template | str, view: dict[str, Any], *, limit: int | None = None) -> str:
    """Render ``template`` with ``view`` (``source`` and ancestor outputs).

    Raises RenderError naming the template and the missing variable when the template
    reads something ``view`` lacks, and for any other failure inside the template;
    PromptTooLarge when the text would be past ``limit`` UTF-8 bytes (default
    ``SANDBOX_LIMIT``) or the rendering runs out of memory.
    """
    if isinstance(template, str):
        template = compile_template(template)
    text = getattr(template, "_agac_text", None)
    if text is not None:
        return _capped(text, template.name, limit)  # type: ignore[arg-type]
    token = _LIMIT.set(limit) if limit is not None else None
    try:
        return _capped(_render(template, view, limit or SANDBOX_LIMIT), template.name, limit)
    finally:
        if token is not None:
            _LIMIT.reset(token)


def _capped(text: str, name: str | None, limit: int | None) -> str:
    if limit is not None and len(text) * 4 > limit:  # else it fits however it encodes
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if size > limit:
            raise PromptTooLarge(f"template {name!r} renders {size:,} bytes, over the cap "
                                 f"of {limit:,} bytes (max_prompt_bytes)")
    return text


def _render(template: Template, view: dict[str, Any], limit: int) -> str:
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
            return _joined(template.root_render_func(ctx), limit, template.name)
        except Exception:  # noqa: BLE001 - Jinja's own handler re-raises it with the template's line
            ENV.handle_exception()
    except PromptTooLarge as exc:
        raise PromptTooLarge(f"template {template.name!r} {exc} (max_prompt_bytes)") from None
    except MemoryError:
        raise PromptTooLarge(f"template {template.name!r} ran out of memory while rendering "
                             "(a value too large to build; max_prompt_bytes caps a prompt)"
                             ) from None
    except UndefinedError as exc:
        raise RenderError(
            f"template {template.name!r} reads an undefined value: {exc.message}",
            variable=exc.message,
        ) from exc
    except SecurityError as exc:
        raise RenderError(f"template {template.name!r} did something unsafe: {exc}") from exc
    except Exception as exc:
        raise RenderError(f"template {template.name!r} failed: {type(exc).__name__}: {exc}") from exc


def _joined(chunks: Any, limit: int, name: str | None) -> str:
    """The chunks joined, stopping as soon as they are past ``limit`` characters (a
    character is at least one byte: the byte size is checked after, see ``_capped``)."""
    parts: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise PromptTooLarge(f"renders more than {limit:,} characters, over the cap of "
                                 f"{limit:,} bytes")
        parts.append(chunk)
    return "".join(parts)


def evaluate_guard(expr: str, view: dict[str, Any]) -> bool:
    """The truth of guard ``expr`` over ``view``.

    A guard that reads a missing field is False (the unit is skipped with reason
    ``guard``), not an error. Other failures (a type error, a sandbox violation) raise
    RenderError: they are mistakes in the guard, not facts about the record.
    """
    try:
        return bool(compile_guard(expr)(view))
    except UndefinedError:
        return False
    except TemplateSyntaxError:
        raise
    except Exception as exc:
        raise RenderError(f"guard {expr!r} failed: {type(exc).__name__}: {exc}") from exc
