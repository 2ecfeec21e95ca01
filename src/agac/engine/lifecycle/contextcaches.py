"""Explicit context caches of a run (docs/providers.md, Gemini explicit caches).

An llm action with ``cache: on`` whose provider keeps explicit caches (Gemini
``cachedContents``) and whose static prefix — the system prompt that reads no record
field, the rendered ``context_prefix`` and the prompt's literal head — reaches the model's
cache minimum gets one cache per run: created before its first request is sent (online
actions, when the run's invocation starts) or its batch is written (batch actions, right
before the batch is sent), named by every request after (``CacheHint.name``).

Lifetime (TTL), decided when it is created:

- an online action: ``min(1 h, time left to the run's deadline)``; while the run goes on,
  a cache within :data:`RENEW_BEFORE` of its expiry is replaced by a new one;
- a batch action: the action's ``batch_deadline`` (25 h when none), capped by the time
  left to the run's deadline: the batch reads the cache until it ends.

Each cache is recorded as an event ``context_cache_created`` (its name, tokens, expiry and
a digest of the prefix), durable before any request names it; a run continued after a
crash or a pause reuses a recorded cache of the same prefix still alive long enough, else
creates another. Every cache of the run is deleted when the run ends, whatever its final
state, and on ``agac cancel`` (event ``context_cache_deleted``); a crash leaves it to
expire by its TTL (event ``context_cache_expired`` when the run next finds it so).

What a cache costs to keep is a ledger row of its own, origin ``cache_storage``: its
tokens × the hours it lived × the model's storage price per million tokens per hour
(:meth:`~agac.providers.pricing.PriceTable.storage`), written once, when it is deleted or
found expired. A cache the provider refuses to create is an event
``context_cache_refused``; the action's requests then send their whole prompt.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.engine.actions import is_batched
from agac.engine.lifecycle.closing import run_event
from agac.errors import AgacError, ProviderError
from agac.jsontext import dumps, loads
from agac.providers.contextcaches import ContextCacheApi, context_cache_api
from agac.providers.factory import open_providers
from agac.providers.pricing import PriceTable
from agac.store.rows import Checkpoint, EventRow, UsageRow

if TYPE_CHECKING:
    from agac.config.project import Project
    from agac.engine.actions import ActionRuntime
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.values import RunControl
    from agac.providers.base import Provider
    from agac.store.repository import Store

__all__ = [
    "CREATED",
    "DELETED",
    "EXPIRED",
    "REFUSED",
    "STORAGE_ORIGIN",
    "ContextCaches",
    "KeptCache",
    "cache_ttl",
    "release_context_caches",
]

CREATED = "context_cache_created"
DELETED = "context_cache_deleted"
EXPIRED = "context_cache_expired"
REFUSED = "context_cache_refused"
STORAGE_ORIGIN = "cache_storage"
"""The ledger origin of what keeping explicit context caches cost."""

ONLINE_TTL = 3600.0
"""The longest an online action's cache lives: one hour."""
BATCH_TTL = 25 * 3600.0
"""A batch action's cache lifetime when it has no ``batch_deadline`` (as a batch's)."""
RENEW_BEFORE = 300.0
"""A cache this close to its expiry is not reused: a new one is created."""
MIN_TTL = 60.0
"""A run with less time left than this creates no cache."""


@dataclass(frozen=True, slots=True)
class KeptCache:
    """One cache the run created, as its ``context_cache_created`` event records it."""

    action: str
    provider: str
    model: str
    name: str
    tokens: int
    created_at: float
    expires_at: float
    digest: str

    @classmethod
    def from_event(cls, row: Any) -> KeptCache:
        d = loads(row.data)
        return cls(
            row.action or "",
            d["provider"],
            d["model"],
            d["name"],
            int(d["tokens"]),
            float(row.created_at),
            float(d["expires_at"]),
            d["digest"],
        )

    def event(self, run_id: str) -> EventRow:
        return EventRow(
            run_id,
            CREATED,
            self.action,
            None,
            dumps(
                {
                    "provider": self.provider,
                    "model": self.model,
                    "name": self.name,
                    "tokens": self.tokens,
                    "expires_at": self.expires_at,
                    "digest": self.digest,
                }
            ),
            self.created_at,
        )


def prefix_digest(model: str, system: str | None, prefix: str) -> str:
    """What identifies a cache's content: the model, the system text and the prefix."""
    return hashlib.sha256(dumps([model, system, prefix]).encode()).hexdigest()


def cache_ttl(rt: ActionRuntime, deadline_at: float | None, now: float) -> float:
    """How long a cache created now for ``rt`` lives (the module's rule)."""
    ttl = (rt.action.batch_deadline or BATCH_TTL) if is_batched(rt) else ONLINE_TTL
    if deadline_at is not None:
        ttl = min(ttl, deadline_at - now)
    return ttl


def eligible(rt: ActionRuntime) -> ContextCacheApi | None:
    """The explicit cache API ``rt`` should use, or None: not an llm action with ``cache:
    on``, a provider without explicit caches, or a prefix under the model's minimum."""
    hint = rt.cache
    if hint is None or hint.mode != "on" or rt.action.kind != "llm":
        return None
    api = context_cache_api(rt.provider, rt.action.model_name or "")
    if api is None or api.minimum is None or hint.prefix_tokens < api.minimum:
        return None
    return api


def recorded(store: Store, run_id: str) -> list[KeptCache]:
    """The caches the run created that it has not deleted nor found expired yet."""
    live: dict[str, KeptCache] = {}
    for row in store.run_events_of(run_id, (CREATED, DELETED, EXPIRED)):
        if row.kind == CREATED:
            kept = KeptCache.from_event(row)
            live[kept.name] = kept
        else:
            live.pop(loads(row.data).get("name", ""), None)
    return list(live.values())


class ContextCaches:
    """The explicit caches of one run (or one worker's shard of it): made ready for an
    action before its requests are built, kept fresh for online actions while the run
    goes on. Every method is a no-op for an action :func:`eligible` refuses."""

    def __init__(
        self, run_id: str, store: Store, gateway: StoreGateway, control: RunControl
    ) -> None:
        self.run_id = run_id
        self.store = store
        self.gateway = gateway
        self.control = control
        self.clock = control.clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._renewals: list[ActionRuntime] = []

    async def prepare(self, runtimes: Iterable[ActionRuntime]) -> None:
        """Make a cache ready for every online action that should have one."""
        for rt in runtimes:
            if not is_batched(rt) and await self.ready(rt):
                self._renewals.append(rt)

    async def ready(self, rt: ActionRuntime) -> bool:
        """Name a cache alive long enough in ``rt.held``: one the run recorded for the
        same prefix, else a new one. False when ``rt`` gets none."""
        api = eligible(rt)
        if api is None:
            return False
        async with self._locks.setdefault(rt.name, asyncio.Lock()):
            now = self.clock.time()
            ttl = cache_ttl(rt, self.control.deadline_at, now)
            if ttl < MIN_TTL:
                return False
            system, head = self._texts(rt)
            digest = prefix_digest(rt.action.model_name or "", system, head)
            # A batch reads the cache until it ends; an online action renews it (keep_fresh).
            need = now + (ttl - RENEW_BEFORE if is_batched(rt) else RENEW_BEFORE)
            found = [
                c
                for c in await self.gateway.call(recorded, self.store, self.run_id)
                if c.action == rt.name and c.digest == digest and c.expires_at > need
            ]
            kept = found[-1] if found else await self._create(rt, api, system, head, digest, ttl)
            # Refused: the requests go whole, naming no cache (not one about to expire).
            rt.held.name(kept.name if kept is not None else None)
            return kept is not None

    @staticmethod
    def _texts(rt: ActionRuntime) -> tuple[str | None, str]:
        assert rt.cache is not None
        system, head = rt.cache_texts
        return (system if rt.cache.system else None), head

    async def _create(
        self,
        rt: ActionRuntime,
        api: ContextCacheApi,
        system: str | None,
        head: str,
        digest: str,
        ttl: float,
    ) -> KeptCache | None:
        """Create the cache and record it durably; an event ``context_cache_refused`` and
        None when the provider refuses (the requests then send their whole prompt)."""
        try:
            made = await api.api.create_context_cache(
                rt.action.model_name or "", system, head, ttl, f"agac-{self.run_id}-{rt.name}"[:128]
            )
        except ProviderError as exc:
            await self.gateway.commit(
                events=(
                    run_event(
                        self.run_id, REFUSED, {"error": str(exc)}, self.clock.time(), action=rt.name
                    ).events
                )
            )
            return None
        kept = KeptCache(
            rt.name,
            rt.action.provider or "",
            rt.action.model_name or "",
            made.name,
            made.tokens,
            self.clock.time(),
            made.expires_at,
            digest,
        )
        await self.gateway.commit(events=(kept.event(self.run_id),))
        return kept

    async def keep_fresh(self) -> None:
        """Until cancelled: renew the online actions' caches before they expire."""
        while self._renewals and not await self.control.sleep(RENEW_BEFORE / 2):
            for rt in self._renewals:
                await self.ready(rt)


def release_context_caches(project: Project, store: Store, run_id: str) -> list[str]:
    """Delete every cache the ended run still holds and ledger what each cost to keep; a
    cache already expired is only ledgered. Notes for a person when a delete failed (the
    cache then expires by its TTL, and is ledgered until then)."""
    kept = recorded(store, run_id)
    if not kept:
        return []
    prices = PriceTable(dict(project.config.prices) if project.config else {})
    alive = [c for c in kept if c.expires_at > store.clock.time()]
    notes = asyncio.run(_delete_all(project, alive)) if alive else {}
    now = store.clock.time()  # after the deletes: a cache is billed until it is gone
    rows: list[UsageRow] = []
    events: list[EventRow] = []
    for c in kept:
        failed = notes.get(c.name)
        gone = c not in alive or failed is not None
        until = c.expires_at if gone else now
        rows.append(storage_row(run_id, c, until, prices, now))
        data = {"name": c.name, "cost_usd": rows[-1].cost_usd}
        if failed is not None:
            data["error"] = failed
        events.append(
            EventRow(run_id, EXPIRED if gone else DELETED, c.action, None, dumps(data), now)
        )
    store.checkpoint(Checkpoint(usage=tuple(rows), events=tuple(events)))
    return [
        f"context cache {name} could not be deleted ({why}); it expires by its TTL"
        for name, why in notes.items()
    ]


async def _delete_all(project: Project, kept: list[KeptCache]) -> dict[str, str]:
    """Delete the caches at their providers: cache name -> why, for those not deleted."""
    failed: dict[str, str] = {}
    try:
        opened: dict[str, Provider] = open_providers({c.provider for c in kept}, project.config)
    except AgacError as exc:
        return {c.name: str(exc) for c in kept}
    try:
        for c in kept:
            api = context_cache_api(opened.get(c.provider), c.model)
            try:
                if api is None:
                    raise ProviderError(f"{c.provider} keeps no explicit caches")
                await api.api.delete_context_cache(c.name)
            except ProviderError as exc:
                failed[c.name] = str(exc)
    finally:
        for p in opened.values():
            await p.aclose()
    return failed


def storage_row(
    run_id: str, c: KeptCache, until: float, prices: PriceTable, now: float
) -> UsageRow:
    """What keeping ``c`` from its creation until ``until`` cost, as a ledger row."""
    seconds = max(0.0, until - c.created_at)
    model = f"{c.provider}/{c.model}"
    cost = prices.storage_cost(model, c.tokens, seconds)
    per_hour = prices.storage(model)
    rate = f"${per_hour:g} per 1M tokens per hour" if per_hour is not None else "no known price"
    return UsageRow(
        run_id,
        c.action,
        "",
        0,
        "cache",
        c.provider,
        c.model,
        "live",
        0,
        0,
        0,
        0,
        cost,
        0.0,
        "ok",
        f"context cache {c.name}: {c.tokens} tokens kept {seconds / 3600:.3f} h at {rate}",
        None,
        now,
        STORAGE_ORIGIN,
    )
