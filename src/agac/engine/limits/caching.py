"""What prompt caching would change in ``agac plan``'s estimate of an llm action.

The cacheable part of a request is its **static prefix** (engine/prefixes.py, decision
0084): the system prompt when it reads no record field, then the rendered
``context_prefix`` and the prompt template's literal head. The action's cache hint
(``ActionRuntime.cache``) gives its tokens when its requests carry one; an action without
a hint (``cache: off``, or a prefix under the provider's minimum) is estimated as
``cache: auto`` would send it: its static prefix's tokens (``ceil(chars / 4)``) when they
reach the provider's ``cache_minimum`` for the model, else nothing — a provider agac
cannot ask to cache caches nothing.

The estimate assumes one cache for the action's whole run: its first request writes the
prefix, every later request reads it (at the ``cached_input`` price). A write costs the
price table's ``cache_write`` (Anthropic's 5-minute write, 1.25× input); an Anthropic
action with ``cache_ttl: 1h`` writes at 2× input. A cache that expires between
requests, or batch lines the provider serves without it, make the real saving smaller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agac.config.caching import provider_cache_minimum
from agac.engine.limits.rates import estimate_tokens
from agac.providers.base import Usage

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime

__all__ = ["cached_usage", "one_hour_writes", "static_prefix_tokens"]


def static_prefix_tokens(rt: ActionRuntime) -> int:
    """The tokens of the action's static prefix the provider would cache, 0 for none."""
    if rt.cache is not None:
        return int(rt.cache.prefix_tokens)
    action = rt.action
    system, static = rt.cache_texts
    tokens = estimate_tokens(len(system or "") + len(static)) if system or static else 0
    least = provider_cache_minimum(action.provider or "", action.model_name or "")
    return 0 if least is None or tokens < least else tokens


def one_hour_writes(rt: ActionRuntime) -> bool:
    """An Anthropic action whose cache lives an hour: its writes are priced at the 1-hour rate."""
    return rt.action.provider == "anthropic" and rt.action.cache_ttl == "1h"


def cached_usage(
    input_tokens: int, output_tokens: int, prefix: int, first: bool, *, one_hour: bool = False
) -> Usage:
    """One request's usage with its ``prefix`` tokens written to the cache (the first
    request) or read from it (every later one). A one-hour write is priced at the price
    table's 1-hour write rate (``cache_write_1h``), not its 5-minute ``cache_write``."""
    p = min(prefix, input_tokens)
    if not first:
        return Usage(input_tokens - p, output_tokens, p, 0)
    return Usage(input_tokens - p, output_tokens, 0, p, cache_write_1h_tokens=p if one_hour else 0)
