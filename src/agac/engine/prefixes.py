"""An llm action's static prefix and the cache hint its requests carry, worked out once per
run (docs/workflow-reference.md, Prompt caching; decision 0084).

The first user message is the rendered ``context_prefix``, a blank line, then the rendered
prompt (just the prompt without a ``context_prefix``: those requests are as they always
were). Its static part is that prefix and the prompt template's literal head; with a system
prompt that reads no record field before it, that is what the provider may cache.

``cache: off`` sends no hint; ``auto`` one when the prefix's estimated tokens reach the
provider's cache minimum for the model; ``on`` one whenever there is a static prefix. A
provider that cannot be asked to cache (no minimum) gets none. The hint never enters a
request's fingerprint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from jinja2 import TemplateSyntaxError

from agac.config.caching import provider_cache_minimum
from agac.engine.limits.rates import estimate_tokens
from agac.errors import ConfigError, Problem
from agac.prompt.prefix import (
    PREFIX_SEPARATOR,
    ContextFileError,
    render_context_prefix,
    static_head,
)
from agac.prompt.references import template_references
from agac.prompt.render import RenderError, render
from agac.providers.base import CacheHint, CacheMode

if TYPE_CHECKING:
    from agac.config.model import Action, Workflow

__all__ = ["PromptPrefix", "context_text", "context_texts", "prompt_prefix", "with_context_texts"]


@dataclass(frozen=True, slots=True)
class PromptPrefix:
    """What every request of an action starts with, and the hints that describe it."""

    prefix: str = ""
    """The rendered ``context_prefix`` and the blank line after it (``""`` without one)."""
    head: str = ""
    """The prompt template's literal head."""
    hint: CacheHint | None = None
    """The hint of a request whose rendered prompt starts with ``head`` (every one, but for
    a template whose whitespace control eats into it)."""
    fallback: CacheHint | None = None
    """The hint of any other request: its static part is ``prefix`` alone."""
    texts: tuple[str | None, str] = (None, "")
    """(the static system prompt or None, ``prefix`` + ``head``)."""


def context_text(action: Action, root: Path) -> str | None:
    """The action's rendered ``context_prefix``: the one its run was admitted with, else
    rendered now from the project's files; None without one. ConfigError
    (``context_file_refused``, ``context_file_not_found``, ``invalid_template``) when it
    cannot be rendered."""
    if action.context_text is not None or action.context_prefix is None:
        return action.context_text
    try:
        return render_context_prefix(
            action.context_prefix, root, action.max_prompt_chars, f"{action.name}.context_prefix"
        )
    except ContextFileError as exc:
        raise ConfigError(
            problems=[
                Problem(
                    exc.code,
                    f"context_prefix of action {action.name!r}: {exc.message}",
                    hint=exc.hint,
                )
            ]
        ) from exc
    except RenderError as exc:
        raise ConfigError(
            problems=[
                Problem(
                    "invalid_template",
                    f"context_prefix of action {action.name!r} does not render: {exc.message}",
                )
            ]
        ) from exc


def prompt_prefix(action: Action, workflow: str, root: Path) -> PromptPrefix:
    """The static prefix of ``action``'s requests and their hints (see the module docstring)."""
    text = context_text(action, root)
    prefix = text + PREFIX_SEPARATOR if text else ""  # an empty one adds nothing
    head = static_head(action.prompt or "")
    system = _static_system(action.system)
    if action.cache_mode == "off":
        return PromptPrefix(prefix, head, texts=(system, prefix + head))
    minimum = provider_cache_minimum(action.provider or "", action.model_name or "")
    key = hashlib.sha256(
        "\x1f".join((workflow, action.name, system or "", prefix + head)).encode()
    ).hexdigest()[:32]

    def hint(static: str) -> CacheHint | None:
        tokens = estimate_tokens(len(system or "") + len(static))
        wanted = system is not None or bool(static)
        if minimum is None or not wanted or (action.cache_mode == "auto" and tokens < minimum):
            return None
        return CacheHint(
            mode=cast(CacheMode, action.cache_mode),
            ttl=cast(Literal["5m", "1h"], action.cache_ttl),
            system=system is not None,
            static_chars=len(static),
            prefix_tokens=tokens,
            key=key,
        )

    return PromptPrefix(prefix, head, hint(prefix + head), hint(prefix), (system, prefix + head))


def _static_system(source: str | None) -> str | None:
    """The system prompt when it reads nothing (the same for every record), else None."""
    if not source:
        return None
    try:
        if template_references(source):
            return None
        return render(source, {})
    except (TemplateSyntaxError, RenderError):
        return None


def with_context_texts(
    workflow: Workflow,
    root: Path,
    kept: Mapping[str, tuple[str | None, str | None]] | None = None,
) -> Workflow:
    """``workflow`` with every ``context_prefix`` rendered into its action's
    ``context_text``, as a run is admitted with it (kept in its config snapshot: the run
    sends that text to the end, whatever the files become). ``kept``: action -> (template,
    text) of the run a retry retries; an action whose template is unchanged keeps its text."""
    kept = kept or {}
    actions = []
    for action in workflow.actions:
        if action.context_prefix is not None:
            was = kept.get(action.name)
            text = was[1] if was is not None and was[0] == action.context_prefix else None
            if text is None:  # rendered now, even when the workflow came with a text
                text = context_text(replace(action, context_text=None), root)
            action = replace(action, context_text=text)
        actions.append(action)
    return replace(workflow, actions=tuple(actions))


def context_texts(workflow: Workflow) -> dict[str, tuple[str | None, str | None]]:
    """action -> (``context_prefix`` template, its text as admitted) of a workflow (a run's
    as its graph holds it)."""
    return {a.name: (a.context_prefix, a.context_text) for a in workflow.actions}


def cache_report(
    action: Action, prefix: str, head: str, system: str | None, text: str, hint: CacheHint | None
) -> dict[str, Any]:
    """What ``agac render`` says of a request's prompt caching: its static prefix (the
    system prompt when static, then ``static_chars`` of the first user message ``text``),
    the estimate of its tokens against the provider's minimum, and the hint it carries."""
    static = len(prefix) + (len(head) if text.startswith(head, len(prefix)) else 0)
    return {
        "mode": action.cache_mode,
        "ttl": action.cache_ttl,
        "system": system is not None,
        "static_chars": static,
        "prefix_tokens": estimate_tokens(len(system or "") + static),
        "minimum": provider_cache_minimum(action.provider or "", action.model_name or ""),
        "hint": hint is not None,
    }
