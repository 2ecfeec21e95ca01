"""Explicit context caches (docs/providers.md, Gemini explicit caches): the part of the
provider contract for a provider that holds a prompt prefix as a resource of its own.

Gemini's ``cachedContents`` are created before the requests that name them, billed per
token-hour while they live, and deleted by the one who made them; every other provider's
caching is implicit or marked in the request (:class:`~agac.providers.base.CacheHint`).
Adapters translate their SDK's errors here as everywhere (:mod:`agac.errors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agac.providers.base import Provider

__all__ = ["ContextCache", "ContextCacheApi", "SupportsContextCache", "context_cache_api"]


@dataclass(frozen=True, slots=True)
class ContextCache:
    """An explicit context cache the provider holds for a static prefix (Gemini
    ``cachedContents/…``): its full resource ``name`` (what a request names and what
    :meth:`SupportsContextCache.delete_context_cache` takes), the ``tokens`` it holds (what
    every request naming it reads from the cache, and what its storage is billed on), and
    when it expires (Unix seconds)."""

    name: str
    tokens: int
    expires_at: float


@runtime_checkable
class SupportsContextCache(Protocol):
    """A provider that holds a prompt prefix as a resource of its own, created before the
    requests that name it and billed per token-hour while it lives (Gemini's explicit
    context caches). The engine creates one per run and action (docs/providers.md,
    Gemini explicit caches) and deletes it when the run ends."""

    async def create_context_cache(
        self, model: str, system: str | None, prefix: str, ttl_seconds: float, display_name: str
    ) -> ContextCache: ...

    async def delete_context_cache(self, name: str) -> None:
        """Delete the cache; one already gone (deleted, expired) is not an error."""
        ...


@dataclass(frozen=True, slots=True)
class ContextCacheApi:
    """What a run may do with a provider's explicit context caches, found once: the API
    and the fewest prefix tokens it caches for a model (None: it cannot say)."""

    api: SupportsContextCache
    minimum: int | None


def context_cache_api(provider: Provider | None, model: str) -> ContextCacheApi | None:
    """The provider's explicit context caches for ``model``, or None when it has none
    (every provider but Gemini: their caches are implicit or marked in the request)."""
    if provider is None or not isinstance(provider, SupportsContextCache):
        return None
    return ContextCacheApi(provider, provider.spec.minimum_for(model))
