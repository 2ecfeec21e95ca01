"""``agac validate`` on an llm action's prompt caching (docs/workflow-reference.md, Prompt
caching).

- ``context_prefix`` is compiled, checked to read nothing but ``read(…)`` (it sees no
  record: ``undefined_variable`` otherwise) and rendered, as admission will: a file it
  cannot read is ``context_file_refused`` or ``context_file_not_found``, located at the key.
  A template that the open run being continued was admitted with is not rendered again:
  the run keeps the text it rendered then, whatever became of its files.
- ``cache_unfriendly_prompt`` (a warning, at the prompt): the prompt reads a record field
  before a literal block long enough for the provider's prompt cache, which caches a
  prefix only — that block is sent again, uncached, with every record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import TemplateSyntaxError

from agac.config.actions import RawAction
from agac.config.project import Project
from agac.config.source import Findings
from agac.errors import ConfigError
from agac.prompt.prefix import ContextFileError, late_literal, render_context_prefix, text_tokens
from agac.prompt.references import template_references
from agac.prompt.render import DEFAULT_MAX_PROMPT_CHARS, RenderError
from agac.providers import registry

__all__ = ["check_caching", "provider_cache_minimum"]


def check_caching(
    f: Findings,
    project: Project,
    raw: RawAction,
    fields: dict[str, Any],
    kept_prefixes: Mapping[str, str] | None = None,
) -> None:
    """Report the action's context_prefix and cache problems (see the module docstring).
    ``kept_prefixes``: action -> the ``context_prefix`` template whose rendered text the
    open run being continued keeps (not rendered again)."""
    if raw.kind != "llm":
        return
    source = fields.get("context_prefix")
    if isinstance(source, str):
        kept = (kept_prefixes or {}).get(raw.name) == source
        limit = fields.get("max_prompt_chars") or DEFAULT_MAX_PROMPT_CHARS
        _check_prefix(f, project, raw, source, limit, render=not kept)
    prompt = raw.values.get("prompt")
    if fields.get("cache_mode", "auto") != "off" and isinstance(prompt, str):
        _check_layout(f, raw, prompt, fields.get("provider"), fields.get("model_name"))


def _check_prefix(
    f: Findings, project: Project, raw: RawAction, source: str, limit: int, *, render: bool
) -> None:
    where = raw.origin("context_prefix")
    try:
        refs = template_references(source)
    except TemplateSyntaxError as exc:
        line = f.doc.value_line(where) + max((exc.lineno or 1) - 1, 0)
        f.error(
            "invalid_template",
            f"context_prefix of action {raw.name!r} is not a valid Jinja template: {exc.message}",
            where,
            line=line,
        )
        return
    others = sorted(".".join(map(str, r)) for r in refs if r[0] != "read")
    if others:
        f.error(
            "undefined_variable",
            f"context_prefix of action {raw.name!r} reads "
            f"{others[0]!r}; it is rendered once per run and sees no record, only "
            "read(path)",
            where,
            hint="move record fields to the prompt; read project "
            'files with {{ read("docs/policy.md") }}',
        )
        return
    if not render:
        return
    try:
        render_context_prefix(source, project.root, limit, f"{raw.name}.context_prefix")
    except ContextFileError as exc:
        f.error(
            exc.code, f"context_prefix of action {raw.name!r}: {exc.message}", where, hint=exc.hint
        )
    except RenderError as exc:
        f.error(
            "invalid_template",
            f"context_prefix of action {raw.name!r} does not render: {exc.message}",
            where,
        )


def _check_layout(f: Findings, raw: RawAction, prompt: str, provider: Any, model: Any) -> None:
    try:
        literal = late_literal(prompt)
        reads = bool(template_references(prompt))
    except TemplateSyntaxError:
        return  # reported as invalid_template
    if not literal or not reads or not isinstance(provider, str) or not isinstance(model, str):
        return
    minimum = provider_cache_minimum(provider, model)
    tokens = text_tokens(literal)
    if minimum is None or tokens < minimum:
        return
    f.warn(
        "cache_unfriendly_prompt",
        f"the prompt of action {raw.name!r} reads the record "
        f"before a literal block of about {tokens:,} tokens ({provider} caches a prefix of "
        f"{minimum:,} or more): that block is sent again with every record, uncached",
        raw.origin("prompt"),
        hint="move the static text to context_prefix or to the "
        "start of the prompt, before the first {{ … }}",
    )


def provider_cache_minimum(provider: str, model: str) -> int | None:
    """The fewest prefix tokens ``provider`` caches for ``model``; None when agac cannot ask
    it to cache (or the provider is unknown: validation reports that elsewhere)."""
    try:
        return registry.provider_spec(provider).minimum_for(model)
    except (ConfigError, ImportError):
        return None
