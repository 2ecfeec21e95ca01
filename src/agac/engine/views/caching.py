"""What prompt caching would change in ``agac plan``'s estimate of an llm action.

The cacheable part of a request is its **static prefix**: the system prompt when it reads
no record field (nor any upstream answer), then the prompt template's literal head (the
text before its first ``{{``, ``{%`` or ``{#``). A system prompt that varies per record
leaves nothing static in front of it. When the action's runtime already carries a cache
hint (``ActionRuntime.cache``) its ``prefix_tokens`` is used instead. Tokens are
``ceil(chars / 4)``, as in the rest of the plan. A prefix shorter than the provider's
``cache_minimum`` for the model is not cached at all.

The estimate assumes one cache for the action's whole run: its first request writes the
prefix (at the ``cache_write`` price; Anthropic's 5-minute write is 1.25× input — the
price table's — a 1-hour write would be 2×), every later request reads it (at the
``cached_input`` price). A cache that expires between requests, or batch lines the
provider serves without it, make the real saving smaller.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from jinja2 import TemplateSyntaxError

from agac.errors import ConfigError
from agac.prompt.references import template_references
from agac.providers import registry
from agac.providers.base import Usage, cache_minimum

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime

__all__ = ["cached_usage", "static_prefix_tokens"]

_TAG = re.compile(r"\{[{%#]")


def static_prefix_tokens(rt: ActionRuntime) -> int:
    """The tokens of the action's static prefix, 0 when nothing would be cached."""
    hint = rt.cache
    if hint is not None and hint.prefix_tokens:
        return int(hint.prefix_tokens)
    action = rt.action
    chars = 0
    if action.system:
        if not _static(action.system):
            return 0  # the first thing sent varies per record: nothing before it to cache
        chars += len(action.system)
    match = _TAG.search(action.prompt or "")
    chars += match.start() if match else len(action.prompt or "")
    tokens = math.ceil(chars / 4)
    least = _minimum(action.provider, action.model_name)
    return 0 if least is not None and tokens < least else tokens


def cached_usage(input_tokens: int, output_tokens: int, prefix: int, first: bool) -> Usage:
    """One request's usage with its ``prefix`` tokens written to the cache (the first
    request) or read from it (every later one)."""
    p = min(prefix, input_tokens)
    return Usage(input_tokens - p, output_tokens, 0 if first else p, p if first else 0)


def _static(template: str) -> bool:
    """A template that reads nothing: the same text for every record."""
    try:
        return not template_references(template)
    except TemplateSyntaxError:
        return False


def _minimum(provider: str | None, model: str | None) -> int | None:
    """The provider's fewest cacheable prefix tokens for ``model`` (None: not known)."""
    try:
        cls = registry.provider_class(provider or "")
    except (ConfigError, ImportError):
        return None
    return cache_minimum(cls, model or "")
