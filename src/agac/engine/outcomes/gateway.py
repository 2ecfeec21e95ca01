"""The engine's only door to the store while a run executes.

Every store call runs in ONE dedicated thread, so the event loop keeps rendering
and calling providers while SQLite or PostgreSQL writes. Progress is written by
group commit: units hand their outcome, answer, usage and events to
:meth:`StoreGateway.commit` and await it; a single writer task takes everything
queued, writes it in one fenced transaction (:meth:`Store.checkpoint`) and then
wakes them all. A unit keeps its concurrency slot until its answer is committed,
so a crash loses at most the calls in flight (DESIGN §4 S1).

Answer lookups are batched the same way: concurrent ``lookup_answer`` calls are
coalesced into one ``IN (...)`` query.

**Tenant.** A gateway serves one run (or one shard of it), so everything it reads and
writes is that run's tenant's (DESIGN §13 T2): answers and tool results are looked up in
the tenant only, and the answer, tool result, usage and batch item rows it commits (and the
prices it gives calls of unknown outcome) are stamped with the tenant here, in one place.

Any store failure fails every waiter with :class:`StoreError` and marks the gateway
broken: the run stops with its last good checkpoint (S2, fail closed).

**Where a group is written.** On a store that :attr:`~agac.store.core.StoreCore.commits_inline`
(a SQLite file) the writer task writes each group of up to ``inline_rows`` rows from the
event loop's own thread: the commit is local and short, and the hop to the store thread
and back (with a GIL hand-over around every driver call) was most of the time a unit
waited for it, with its slot held. Larger groups (a batch's ingest, a staging walk) and
other store calls (shard loads, batch intents, effects) still run in the store thread, so
the loop keeps working while they are written; and while a store call is out there, the
next group goes there too, behind it, so the loop never waits on SQLite's lock for a
transaction of its own process. On PostgreSQL, a storage point and the in-memory store,
every group is written in the store thread.

**Durability.** A group's waiters are woken at its COMMIT: on SQLite and PostgreSQL that
is durable, and on a storage point the local commit is what releases a unit's slot (O5).
Before something that cannot be taken back — a batch submission, an effect, an approved
unit acting — the engine also waits for :meth:`StoreGateway.durable` (the store's
acknowledgement that everything committed so far is stored durably: at once on SQL
stores, once the log is shipped on a storage point) and checks :meth:`StoreGateway.owned`.

**Progress for other processes** (DESIGN §13 T6): given a ``progress`` source (an event row
built from the run's live counters), the writer adds a ``progress`` event to a group
commit at most once every ``progress_every`` seconds, and once more when it closes, so
``agac serve`` sees a run move without counting its outcomes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from agac.engine.crashpoints import maybe_crash
from agac.errors import StoreError
from agac.store.repository import Store

__all__ = ["Lease", "StoreGateway"]

T = TypeVar("T")


def _retrieve(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()


_TENANT_ROWS = ("answers", "tool_results", "usage", "batch_items", "priced")
"""The rows of a group commit that carry their run's tenant."""


def _rows(writes: list[tuple[dict[str, list[Any]], asyncio.Future[None]]]) -> int:
    return sum(len(rows) for parts, _ in writes for rows in parts.values())


class Lease:
    """Our hold on a store lease: name, fencing token, TTL."""

    def __init__(self, name: str, token: int, ttl: float) -> None:
        self.name = name
        self.token = token
        self.ttl = ttl

    def as_tuple(self) -> tuple[str, int, float]:
        return (self.name, self.token, self.ttl)


class StoreGateway:
    def __init__(
        self, store: Store, lease: Lease | None, *, tenant: str, max_group: int = 5000,
        gather_seconds: float = 0.002, gather_rounds: int = 16,
        progress: Callable[[], dict[str, Any]] | None = None, progress_every: float = 1.0,
        inline_rows: int = 1000,
    ) -> None:
        self.store = store
        self.tenant = tenant
        self._progress = progress
        self._progress_every = progress_every
        self._progress_due = 0.0
        """Loop time after which the next group commit carries a progress event."""
        self.gather_rounds = gather_rounds
        self.gather_seconds = gather_seconds
        self.lease = lease
        self.max_group = max_group
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agac-store")
        self._inline = store.commits_inline
        self._calls = 0
        """Store calls out in the store thread: while one is, groups go there too (after
        it), so the loop never waits on SQLite's lock for a long transaction of its own."""
        self.inline_rows = inline_rows
        """The largest group (in rows) written from the loop's thread on such a store; a
        larger one (a batch's ingest, a staging walk) goes to the store thread, so the loop
        keeps reading and rendering while it is written."""
        self._writes: list[tuple[dict[str, list[Any]], asyncio.Future[None]]] = []
        self._lookups: dict[str, list[asyncio.Future[str | None]]] = {}
        self._tool_lookups: dict[str, list[asyncio.Future[str | None]]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._broken: BaseException | None = None
        self.commits = 0
        self._switch = sys.getswitchinterval()

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        # The store thread gives up the GIL around every SQLite/PostgreSQL call and then
        # waits for the event loop's thread to hand it back, by default up to 5 ms each
        # time: a checkpoint of a dozen driver calls could wait 50 ms while units hold
        # their slots. A short switch interval keeps commits prompt.
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, 0.0005))
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="agac-writer")

    async def close(self) -> None:
        """Flush what is queued (with a last progress event) and stop the writer."""
        if self._task is not None:
            self._progress_due = 0.0
            if self._broken is None:
                try:
                    await self.flush()
                except StoreError:
                    pass  # already reported to the waiters; the run stops (S2)
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        self._pool.shutdown(wait=True)
        sys.setswitchinterval(self._switch)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one store call in the store thread."""
        self._raise_if_broken()
        loop = asyncio.get_running_loop()
        self._calls += 1
        try:
            return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))
        finally:
            self._calls -= 1

    # -- writes -------------------------------------------------------------------------

    async def commit(self, **parts: list[Any]) -> None:
        """Queue rows (outcomes, answers, tool_results, usage, events, batch_items, fanouts,
        item_results, marks, priced) and wait until durable."""
        self._raise_if_broken()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writes.append((parts, fut))
        assert self._wake is not None
        self._wake.set()
        await fut

    def commit_nowait(self, **parts: list[Any]) -> asyncio.Future[None]:
        """Queue rows without waiting; a failure still breaks the gateway (S2) and
        surfaces at the next ``commit`` or ``flush``."""
        self._raise_if_broken()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieve)
        self._writes.append((parts, fut))
        assert self._wake is not None
        self._wake.set()
        return fut

    async def durable(self) -> None:
        """The durability acknowledgement: wait until everything committed so far is stored
        durably — at once on SQL stores, whose commit is durable; on a storage point, until
        the log holding it is shipped (DESIGN §14). Call it after recording an intent and
        before the effect it announces (S1): a batch submission, an effect, an approved
        unit acting. A failure breaks the gateway like a failed checkpoint (S2)."""
        self._raise_if_broken()
        ticket = self.store.durability_ticket()
        if ticket is None:
            return
        try:
            await asyncio.wrap_future(ticket)
        except StoreError as exc:
            self._broken = exc
            raise

    async def owned(self) -> None:
        """The ownership check, right before something irreversible (an effect, a batch
        submission): at once while the store vouches for this process's hold (always on SQL
        stores, whose every write is fenced); on a storage point whose lease was not
        confirmed lately (the process was paused), ``head`` is rewritten first, and a
        point taken over meanwhile raises :class:`LeaseTaken` (DESIGN §14, O2)."""
        self._raise_if_broken()
        if self.store.owner_confirmed():
            return
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.store.confirm_owner)
        except StoreError as exc:
            self._broken = exc
            raise

    async def flush(self) -> None:
        """Wait until everything queued so far is durable, including a group the writer
        is writing right now: an empty commit queued behind it completes only after it."""
        await self.commit()

    # -- batched lookups ------------------------------------------------------------------

    async def lookup_answer(self, fingerprint: str) -> str | None:
        """The stored output (JSON text) for ``fingerprint``, or None."""
        return await self._lookup(self._lookups, fingerprint)

    async def lookup_tool_result(self, input_hash: str) -> str | None:
        return await self._lookup(self._tool_lookups, input_hash)

    async def _lookup(self, table: dict[str, list[asyncio.Future[str | None]]], key: str) -> str | None:
        self._raise_if_broken()
        fut: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        table.setdefault(key, []).append(fut)
        assert self._wake is not None
        self._wake.set()
        return await fut

    # -- the writer ---------------------------------------------------------------------------

    async def _loop(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            # Let a group form before writing: units woken by the last commit run
            # until they queue their next rows, so transactions are fewer and larger.
            # Yield only while more rows keep arriving, so a busy loop (many HTTP
            # responses) never delays a commit that has nothing more to wait for.
            until = loop.time() + self.gather_seconds
            for _ in range(self.gather_rounds):
                queued = len(self._writes)
                await asyncio.sleep(0)
                if len(self._writes) == queued or loop.time() >= until:
                    break
            self._wake.clear()
            lookups, self._lookups = self._lookups, {}
            tools, self._tool_lookups = self._tool_lookups, {}
            writes, self._writes = self._writes[: self.max_group], self._writes[self.max_group :]
            if self._writes:
                self._wake.set()
            if writes and self._progress is not None and loop.time() >= self._progress_due:
                self._progress_due = loop.time() + self._progress_every
                done: asyncio.Future[None] = loop.create_future()
                done.add_done_callback(_retrieve)
                writes.append(({"events": [self._progress()]}, done))
            if self._broken is not None:
                # Fail closed (S2): after one failed checkpoint nothing more is written.
                self._fail_all(lookups, tools, writes, self._broken)
                continue
            try:
                if self._inline and not self._calls and _rows(writes) <= self.inline_rows:
                    found, tool_found = self._do_io(list(lookups), list(tools), writes)
                else:
                    found, tool_found = await loop.run_in_executor(
                        self._pool, self._do_io, list(lookups), list(tools), writes
                    )
            except asyncio.CancelledError:
                self._fail_all(lookups, tools, writes, StoreError("the store writer was stopped"))
                raise
            except Exception as exc:  # noqa: BLE001 - every waiter must learn of it
                self._broken = exc if isinstance(exc, StoreError) else StoreError(str(exc))
                self._fail_all(lookups, tools, writes, self._broken)
                continue
            for fp, futs in lookups.items():
                for f in futs:
                    if not f.done():
                        f.set_result(found.get(fp))
            for h, futs in tools.items():
                for f in futs:
                    if not f.done():
                        f.set_result(tool_found.get(h))
            for _, done in writes:
                if not done.done():
                    done.set_result(None)

    def _do_io(
        self,
        lookups: list[str],
        tools: list[str],
        writes: list[tuple[dict[str, list[Any]], asyncio.Future[None]]],
    ) -> tuple[dict[str, str], dict[str, str]]:
        found = self.store.get_answers(lookups, tenant=self.tenant) if lookups else {}
        tool_found = self.store.get_tool_results(tools, tenant=self.tenant) if tools else {}
        if writes:
            merged: dict[str, list[Any]] = {
                "outcomes": [], "answers": [], "tool_results": [], "usage": [], "events": [],
                "batch_items": [], "fanouts": [], "item_results": [], "marks": [], "priced": [],
            }
            for parts, _ in writes:
                for name, rows in parts.items():
                    merged[name].extend(rows)
            for name in _TENANT_ROWS:
                for row in merged[name]:
                    row["tenant"] = self.tenant
            merged["answers"] = list({a["fingerprint"]: a for a in merged["answers"]}.values())
            merged["tool_results"] = list(
                {a["input_hash"]: a for a in merged["tool_results"]}.values()
            )
            merged["outcomes"] = list(
                {(o["action"], o["unit_key"]): o for o in merged["outcomes"]}.values()
            )
            if merged["marks"]:  # a later rewrite of a mark in the same group wins
                merged["marks"] = list(
                    {(m["action"], m["shard"]): m for m in merged["marks"]}.values())
            maybe_crash("before_checkpoint")
            self.store.checkpoint(
                lease=self.lease.as_tuple() if self.lease else None, **merged
            )
            self.commits += 1
            maybe_crash("after_checkpoint")
        return found, tool_found

    def _fail_all(self, lookups: Any, tools: Any, writes: Any, exc: BaseException) -> None:
        for futs in list(lookups.values()) + list(tools.values()):
            for f in futs:
                if not f.done():
                    f.set_exception(exc)
        for _, f in writes:
            if not f.done():
                f.set_exception(exc)

    def _raise_if_broken(self) -> None:
        if self._broken is not None:
            raise self._broken

    @property
    def fence(self) -> tuple[str, int, float] | None:
        """The lease every write of this run (or shard) is checked against (S3), for the
        store calls made outside group commits (effects, proposals)."""
        return self.lease.as_tuple() if self.lease is not None else None

    @property
    def broken(self) -> BaseException | None:
        return self._broken
