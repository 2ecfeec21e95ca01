"""Everything the emulator remembers: its clock, files, batches and request counters.

The state is owned by the event loop that serves the app: handlers mutate it without
locks because none of them awaits between reading and writing it. Other threads (a test
driving :class:`~agac.emulator.testing.RunningEmulator`) go through the HTTP control API.

Batch time is *emulator time*: wall-clock time plus an offset that tests move forward
(``POST /_emulator/clock``), plus a per-batch offset (``POST /_emulator/batches/{id}/advance``).
A held clock (``{"hold": true}``) stops following the wall: it moves only when advanced, so a
test's batches never progress because the machine was slow.
A batch's life is a pure function of its elapsed emulator time and its fault plan
(:class:`Batch.phase`), so nobody has to sleep for a batch to end.
"""

from __future__ import annotations

import json
import math
import random
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .answers import Answer, answer, fingerprint
from .caching import CachePlan, PromptCache
from .faults import FaultBook
from .media import Seen
from .search import Source, WebSearchAsked, billed_searches

__all__ = [
    "CACHE_NOT_FOUND",
    "Batch",
    "BatchItem",
    "CachedContent",
    "Clock",
    "Config",
    "EmulatorState",
    "EntraTokens",
    "ItemError",
    "ItemResult",
    "Journal",
    "Stats",
    "StoredFile",
    "with_cache",
]


CACHE_NOT_FOUND = "CachedContent not found (or permission denied)"
"""What Gemini says (403 ``PERMISSION_DENIED``) of a cache it does not have."""


def with_cache(found: Answer, tokens: int, own: int) -> Answer:
    """An answer to a request that named a cache of ``tokens`` and sent ``own`` tokens of
    its own: the cache's are its cached tokens, a part of its prompt (as Gemini counts)."""
    return replace(found, input_tokens=tokens + own, cached_tokens=tokens)


@dataclass(frozen=True)
class Config:
    """Server settings: ``latency_ms`` delays live answers, ``batch_seconds`` is how much
    emulator time a batch takes from creation to its end, ``seed`` varies every answer."""

    latency_ms: int = 0
    batch_seconds: float = 60.0
    seed: int = 0


class Clock:
    """Emulator time in Unix seconds: ``time.time()`` plus an offset tests advance, or,
    once :meth:`hold` is called, the instant it was held plus that offset."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.held_at: float | None = None

    def now(self) -> float:
        base = time.time() if self.held_at is None else self.held_at
        return base + self.offset

    def hold(self) -> float:
        """Stop following the wall clock: from now on time moves only by :meth:`advance`."""
        if self.held_at is None:
            self.held_at = time.time()
        return self.now()

    def advance(self, seconds: float) -> float:
        """Move emulator time forward by ``seconds`` (never backwards) and return now."""
        self.offset += max(0.0, float(seconds))
        return self.now()


@dataclass
class StoredFile:
    """An uploaded or generated file (OpenAI/Groq ``file-…``, Gemini ``files/…``)."""

    id: str
    provider: str
    filename: str
    purpose: str
    content: bytes
    created_at: float
    mime_type: str = "application/jsonl"
    described: Seen | None = None
    """An attachment uploaded as a file (Gemini's Files API): what its bytes were, which
    are not kept (``content`` is empty)."""
    pending: int = 0
    """``file.get`` calls that still read ``pending`` (Azure's file processing)."""

    @property
    def size(self) -> int:
        return self.described.size if self.described is not None else len(self.content)


@dataclass
class CachedContent:
    """An explicit context cache (Gemini ``cachedContents/<id>``): what it holds (a system
    instruction and contents, as sent), the ``tokens`` that is, when it expires (emulator
    time), and how it was used — ``live`` and ``batch`` count the requests that named it.
    A deleted cache is kept, ``deleted_at`` set, so a test can count what was created."""

    id: str
    model: str
    display_name: str | None
    system: Any
    contents: list[Any]
    tokens: int
    created_at: float
    expires_at: float
    deleted_at: float | None = None
    live: int = 0
    batch: int = 0

    def alive(self, now: float) -> bool:
        return self.deleted_at is None and now < self.expires_at

    def to_json(self) -> dict[str, Any]:
        """The cache in ``GET /_emulator/caches``."""
        return {
            "name": f"cachedContents/{self.id}",
            "model": self.model,
            "display_name": self.display_name,
            "tokens": self.tokens,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "deleted_at": self.deleted_at,
            "live": self.live,
            "batch": self.batch,
        }


@dataclass(frozen=True)
class ItemError:
    """A per-item failure injected by a ``custom_id`` rule on ``batch.create``."""

    status: int
    code: str | None
    message: str
    body: Any = None
    """The error body as the provider sends it (an ``http`` fault's ``body``), if given."""


@dataclass
class BatchItem:
    """One request of a batch, already decoded by its provider module.

    ``canonical`` is what the answer and the fingerprint depend on, ``prompt`` what counts
    as input characters; ``cache`` what it may read from and write to the prompt cache
    when it is answered; ``extra`` keeps provider details (Gemini inline ``metadata``).
    ``tools``, ``results`` and ``turns`` are its tool loop so far, as a live call's (the
    tools it offers, the results it sends back, its assistant turns that called tools).
    """

    custom_id: str
    model: str
    canonical: Any
    prompt: Any
    schema: dict[str, Any] | None
    max_tokens: int | None
    answer_fault: str | None = None
    reply: dict[str, Any] | None = None
    error: ItemError | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cache: CachePlan | None = None
    tools: frozenset[str] = frozenset()
    results: tuple[str, ...] = ()
    turns: int = 0
    search: WebSearchAsked | None = None


@dataclass(frozen=True)
class ItemResult:
    """What became of one item: ``answered`` (with ``answer``), ``errored`` (with
    ``error``) or ``unanswered`` (the batch expired or was cancelled first)."""

    item: BatchItem
    kind: str
    answer: Answer | None = None
    error: ItemError | None = None


@dataclass
class Batch:
    """A provider batch in neutral terms; provider modules render its phase and results.

    ``end`` is how it will end when its time is up (``completed`` unless a ``batch_end``
    fault says ``failed``/``expired``/``cancelled``), ``answer_limit`` how many items are
    answered before a non-completed end, ``drop`` how many items go missing from results.
    """

    id: str
    provider: str
    model: str
    created_at: float
    duration: float
    items: list[BatchItem]
    metadata: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    end: str = "completed"
    answer_limit: int = 0
    drop: int = 0
    offset: float = 0.0
    cancel_elapsed: float | None = None
    cancel_requested_at: float | None = None
    stuck: bool = False
    final: str | None = None
    ended_at: float | None = None
    dropped: list[str] = field(default_factory=list)
    results: list[ItemResult] | None = None
    invalid: list[dict[str, Any]] = field(default_factory=list)

    def elapsed(self, now: float) -> float:
        return now - self.created_at + self.offset

    def progress(self, elapsed: float) -> float:
        """Fraction of items processed after ``elapsed`` seconds (running is the middle half)."""
        if self.duration <= 0:
            return 1.0
        return min(1.0, max(0.0, (elapsed - self.duration / 4) / (self.duration / 2)))

    def cancel(self, now: float) -> None:
        """Record a cancel request; a batch that already ended ignores it."""
        if self.final is None and self.cancel_elapsed is None:
            self.cancel_elapsed = self.elapsed(now)
            self.cancel_requested_at = now


@dataclass
class Stats:
    """Request counters and billing, since the last reset (``DELETE /_emulator/stats``)."""

    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    answered: int = 0
    duplicate_answers: int = 0
    billed: set[str] = field(default_factory=set)
    searches: dict[str, int] = field(default_factory=dict)
    """Web searches billed per provider (:mod:`.search`): Anthropic's and Gemini's one per
    search made, OpenAI's one per call of a search model."""

    def searched(self, provider: str, model: str, sources: tuple[Source, ...]) -> None:
        """Bill the searches that found ``sources`` as ``provider`` bills them."""
        n = billed_searches(provider, model, sources)
        if n:
            self.searches[provider] = self.searches.get(provider, 0) + n

    def count(self, provider: str, op: str) -> None:
        per_op = self.requests.setdefault(provider, {})
        per_op[op] = per_op.get(op, 0) + 1

    def bill(self, provider: str, model: str, canonical: Any) -> None:
        """Count one billed answer; an identical request billed before is a duplicate."""
        self.answered += 1
        key = fingerprint(provider, model, canonical)
        if key in self.billed:
            self.duplicate_answers += 1
        else:
            self.billed.add(key)

    def reset(self) -> None:
        self.requests = {}
        self.answered = 0
        self.duplicate_answers = 0
        self.billed = set()
        self.searches = {}


class Journal:
    """The last requests received, as they arrived: method, path (decoded, and raw as
    sent), query, headers, body
    and the client's address (``host:port``, one per connection), so that a test can
    compare what two clients sent for the same request and see connections reused.

    Only ``chat`` requests keep their body (raw bytes, decoded when read). The provider
    module adds ``cache``, the prompt-caching markers it saw, to an entry whose request
    carried any (:func:`~agac.emulator.handling.note_cache`). At most ``size`` entries
    are kept, oldest dropped first.
    """

    def __init__(self, size: int = 1000) -> None:
        self.entries: deque[dict[str, Any]] = deque(maxlen=size)

    def add(
        self,
        provider: str,
        op: str,
        method: str,
        path: str,
        query: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes | None,
        client: str,
        *,
        raw_path: str = "",
    ) -> dict[str, Any]:
        """Keep one request; the entry is returned for its handler to annotate."""
        entry = {
            "provider": provider,
            "op": op,
            "method": method,
            "path": path,
            "raw_path": raw_path or path,
            "query": query,
            "headers": headers,
            "body": body,
            "client": client,
        }
        self.entries.append(entry)
        return entry

    def clear(self) -> None:
        self.entries.clear()

    def document(self) -> list[dict[str, Any]]:
        """The entries as JSON: header names lower-cased (repeated ones joined with
        ``, ``), the body parsed when it is JSON (else its text)."""
        out = []
        for entry in self.entries:
            headers: dict[str, str] = {}
            for raw_name, raw_value in entry["headers"]:
                name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
            body: Any = entry["body"]
            if body is not None:
                try:
                    body = json.loads(body)
                except ValueError:
                    body = body.decode("utf-8", errors="replace")
            out.append({**entry, "headers": headers, "body": body})
        return out


@dataclass
class EntraTokens:
    """The Entra ID tokens the emulator issued (:mod:`.entra`): how long a new one lives,
    and each one's expiry, in wall-clock seconds (the credential that holds a token reads
    its expiry against the wall clock, not the emulator's)."""

    seconds: float = 3600.0
    issued: dict[str, float] = field(default_factory=dict)

    def issue(self) -> tuple[str, float]:
        token = f"emu-entra-{len(self.issued) + 1}-{uuid.uuid4().hex[:12]}"
        expires = time.time() + self.seconds
        self.issued[token] = expires
        return token, expires

    def expired(self, token: str) -> bool:
        """Whether ``token`` is one the emulator issued and it has expired."""
        expires = self.issued.get(token)
        return expires is not None and time.time() >= expires

    def document(self) -> dict[str, Any]:
        return {
            "token_seconds": self.seconds,
            "issued": [{"token": t, "expires_on": e} for t, e in self.issued.items()],
        }


class EmulatorState:
    """The emulator's memory; one per app."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.clock = Clock()
        self.faults = FaultBook()
        self.stats = Stats()
        self.journal = Journal()
        #: Every provider's cached prompt prefixes (:mod:`.caching`).
        self.cache = PromptCache()
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, Batch] = {}
        #: explicit context caches (Gemini), deleted ones kept: id -> cache.
        self.caches: dict[str, CachedContent] = {}
        #: requests that named a cache the emulator does not have (or no longer has).
        self.cache_refusals = 0
        #: open resumable uploads (Gemini): upload id -> {"chunks", "spec", "mime"}.
        self.uploads: dict[str, dict[str, Any]] = {}
        #: provider -> function(batch, phase) giving the provider's own status word.
        self.status_names: dict[str, Callable[[Batch, str], str]] = {}
        #: model id -> {"lifecycle", "deprecated_at", "retires_at"} for the Models API;
        #: a model not listed is active.
        self.models: dict[str, dict[str, Any]] = {}
        #: Entra ID tokens issued by the managed-identity endpoint (:mod:`.entra`).
        self.entra = EntraTokens()
        #: Cloud Storage objects (:mod:`.gcs`): ``bucket/key`` -> (bytes, epoch written).
        self.objects: dict[str, tuple[bytes, float]] = {}
        #: Cloud Storage multipart uploads in progress (:mod:`.gcs`): upload id ->
        #: {"object": ``bucket/key``, "parts": {part number: bytes}}.
        self.gcs_uploads: dict[str, dict[str, Any]] = {}
        #: Google OAuth access tokens the token endpoint issued (:mod:`.vertex`).
        self.google_tokens: list[str] = []

    def reset(self) -> None:
        """Forget everything: files, batches, faults, counters, the prompt cache and the
        clock offset."""
        self.clock = Clock()
        self.faults = FaultBook()
        self.stats = Stats()
        self.journal.clear()
        self.cache.clear()
        self.files.clear()
        self.batches.clear()
        self.caches.clear()
        self.cache_refusals = 0
        self.uploads.clear()
        self.models.clear()
        self.entra = EntraTokens()
        self.objects.clear()
        self.gcs_uploads.clear()
        self.google_tokens.clear()

    def new_id(self, prefix: str, length: int = 24) -> str:
        return prefix + uuid.uuid4().hex[:length]

    def add_file(
        self,
        provider: str,
        file_id: str,
        filename: str,
        purpose: str,
        content: bytes,
        mime_type: str = "application/jsonl",
    ) -> StoredFile:
        stored = StoredFile(
            file_id, provider, filename, purpose, content, self.clock.now(), mime_type
        )
        self.files[file_id] = stored
        return stored

    def add_batch(self, batch: Batch) -> Batch:
        self.batches[batch.id] = batch
        return batch

    def clear_faults(self) -> None:
        """Drop every fault rule and release batches stuck in cancelling."""
        self.faults.clear()
        for batch in self.batches.values():
            batch.stuck = False

    def phase(self, batch: Batch) -> str:
        """The batch's phase now: ``queued``, ``running``, ``finalizing``, ``cancelling``
        or ``ended`` (then ``batch.final`` says how). Ends the batch when its time is up."""
        if batch.final is not None:
            return "ended"
        elapsed = batch.elapsed(self.clock.now())
        if batch.cancel_elapsed is not None:
            if not batch.stuck and elapsed >= batch.cancel_elapsed + batch.duration / 10:
                answered = math.floor(len(batch.items) * batch.progress(batch.cancel_elapsed))
                self.finish(batch, "cancelled", answered)
                return "ended"
            return "cancelling"
        if batch.invalid and elapsed >= batch.duration / 4:
            self.finish(batch, "failed", 0)
            return "ended"
        if elapsed >= batch.duration:
            limit = len(batch.items) if batch.end == "completed" else batch.answer_limit
            self.finish(batch, batch.end, limit)
            return "ended"
        if elapsed < batch.duration / 4:
            return "queued"
        return "running" if elapsed < batch.duration * 3 / 4 else "finalizing"

    def finish(self, batch: Batch, final: str, answered: int) -> None:
        """End ``batch`` as ``final``: answer the first ``answered`` kept items, leave the
        rest unanswered, drop ``batch.drop`` items, shuffle, and bill what was answered."""
        rng = random.Random(f"{self.config.seed}:{batch.id}")
        items = [] if final == "failed" and batch.invalid else list(batch.items)
        dropped = set(rng.sample(range(len(items)), min(batch.drop, len(items))))
        batch.dropped = [items[i].custom_id for i in sorted(dropped)]
        results: list[ItemResult] = []
        done = 0
        for index, item in enumerate(items):
            if index in dropped:
                continue
            if done >= answered:
                results.append(ItemResult(item, "unanswered"))
                continue
            done += 1
            if item.error is None:
                item.error = self.cache_gone(item)
            if item.error is not None:
                results.append(ItemResult(item, "errored", error=item.error))
                continue
            found = self.answer_item(batch, item)
            results.append(ItemResult(item, "answered", answer=found))
            self.stats.bill(batch.provider, item.model, item.canonical)
            self.stats.searched(batch.provider, item.model, found.sources)
        rng.shuffle(results)
        batch.results = results
        batch.final = final
        batch.ended_at = self.clock.now()

    def answer_item(self, batch: Batch, item: BatchItem) -> Answer:
        found = answer(
            provider=batch.provider,
            model=item.model,
            body=item.canonical,
            prompt=item.prompt,
            schema=item.schema,
            max_tokens=item.max_tokens,
            seed=self.config.seed,
            fault=item.answer_fault,
            reply=item.reply,
            tools=item.tools,
            results=item.results,
            turns=item.turns,
            search=item.search,
        )
        cache = self.caches.get(str(item.extra.get("cached_content") or ""))
        if cache is not None:  # an explicit cache: its tokens are what the item read
            return with_cache(found, cache.tokens, int(item.extra.get("own_tokens", 0)))
        return self.cached(found, item.cache)

    def cache_gone(self, item: BatchItem) -> ItemError | None:
        """A batch item naming a cache that is gone when the batch runs it: Gemini's 403."""
        name = item.extra.get("cached_content")
        cache = self.caches.get(str(name)) if name else None
        if not name or (cache is not None and cache.alive(self.clock.now())):
            return None
        self.cache_refusals += 1
        return ItemError(403, None, CACHE_NOT_FOUND)

    def cached(self, found: Answer, plan: CachePlan | None) -> Answer:
        """``found`` with what its request read from and wrote to the prompt cache now."""
        use = self.cache.use(plan, self.clock.now())
        if not (use.read or use.written):
            return found
        return replace(
            found, cached_tokens=use.read, cache_write_5m=use.write_5m, cache_write_1h=use.write_1h
        )

    def stats_document(self) -> dict[str, Any]:
        """The ``GET /_emulator/stats`` body (issue 3's format)."""
        batches = []
        for batch in self.batches.values():
            phase = self.phase(batch)
            render = self.status_names.get(batch.provider)
            batches.append(
                {
                    "id": batch.info.get("name", batch.id),
                    "provider": batch.provider,
                    "requests": len(batch.items),
                    "status": render(batch, phase) if render else (batch.final or phase),
                    "dropped": list(batch.dropped),
                }
            )
        return {
            "requests": {p: dict(ops) for p, ops in self.stats.requests.items()},
            "batches": batches,
            "answered": self.stats.answered,
            "duplicate_answers": self.stats.duplicate_answers,
            "searches": dict(self.stats.searches),
        }
