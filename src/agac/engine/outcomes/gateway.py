"""The engine's only door to the store while a run executes.

Every store call runs in ONE dedicated thread, so the event loop keeps rendering
and calling providers while SQLite or PostgreSQL writes. Progress is written by
group commit: units hand their outcome, answer, usage and events to
:meth:`StoreGateway.commit` and await it; a single writer task takes everything
queued, writes it in one fenced transaction (:meth:`Store.checkpoint`) and then
wakes them all. A unit keeps its concurrency slot until its answer is committed,
so a crash loses at most the calls in flight (S1).

Answer lookups are batched the same way: concurrent ``lookup_answer`` calls are
coalesced into one ``IN (...)`` query.

**Tenant.** A gateway serves one run (or one shard of it), so everything it reads and
writes is that run's tenant's (T2): answers and tool results are looked up in
the tenant only, and every group it commits is a :class:`~agac.store.rows.Checkpoint` of
that tenant: the store stamps the answer, tool result, usage and batch item rows (and the
prices it gives calls of unknown outcome) with it, in one place.

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

**Progress for other processes** (T6): given a ``progress`` source (an event row
built from the run's live counters), the writer adds a ``progress`` event to a group
commit at most once every ``progress_every`` seconds, and once more when it closes, so
``agac serve`` sees a run move without counting its outcomes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agac.engine.crashpoints import maybe_crash
from agac.errors import StoreError
from agac.store.repository import Store
from agac.store.rows import (
    AnswerRow,
    Checkpoint,
    EventRow,
    FanoutRow,
    ItemResult,
    MarkRow,
    OutcomeRow,
    PricedRow,
    StagedItem,
    ToolResultRow,
    UsageRow,
)

__all__ = ["Lease", "StoreGateway"]

T = TypeVar("T")


def _retrieve(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()


class _Group:
    """The rows queued for the next group commit, kind by kind, and how many."""

    __slots__ = (
        "answers",
        "batch_items",
        "events",
        "fanouts",
        "item_results",
        "marks",
        "outcomes",
        "priced",
        "rows",
        "tool_results",
        "usage",
    )

    def __init__(self) -> None:
        self.outcomes: list[OutcomeRow] = []
        self.answers: list[AnswerRow] = []
        self.tool_results: list[ToolResultRow] = []
        self.usage: list[UsageRow] = []
        self.events: list[EventRow] = []
        self.batch_items: list[StagedItem] = []
        self.fanouts: list[FanoutRow] = []
        self.item_results: list[ItemResult] = []
        self.marks: list[MarkRow] = []
        self.priced: list[PricedRow] = []
        self.rows = 0

    def checkpoint(self, tenant: str) -> Checkpoint:
        """The group as one checkpoint: an answer, tool result or unit's outcome queued
        twice is written once (the last one), as is a mark rewritten in the same group."""
        answers, tools, outcomes, marks = self.answers, self.tool_results, self.outcomes, self.marks
        if len(answers) > 1:
            answers = list({a.fingerprint: a for a in answers}.values())
        if len(tools) > 1:
            tools = list({r.input_hash: r for r in tools}.values())
        if len(outcomes) > 1:
            outcomes = list({(o.action, o.unit_key): o for o in outcomes}.values())
        if len(marks) > 1:
            marks = list({(m.action, m.shard): m for m in marks}.values())
        return Checkpoint(
            tenant=tenant,
            outcomes=outcomes,
            answers=answers,
            tool_results=tools,
            usage=self.usage,
            events=self.events,
            batch_items=self.batch_items,
            fanouts=self.fanouts,
            item_results=self.item_results,
            marks=marks,
            priced=self.priced,
        )


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
        self,
        store: Store,
        lease: Lease | None,
        *,
        tenant: str,
        gather_seconds: float = 0.002,
        gather_rounds: int = 16,
        progress: Callable[[], EventRow] | None = None,
        progress_every: float = 1.0,
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
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agac-store")
        self._inline = store.commits_inline
        self._calls = 0
        """Store calls out in the store thread: while one is, groups go there too (after
        it), so the loop never waits on SQLite's lock for a long transaction of its own."""
        self.inline_rows = inline_rows
        """The largest group (in rows) written from the loop's thread on such a store; a
        larger one (a batch's ingest, a staging walk) goes to the store thread, so the loop
        keeps reading and rendering while it is written."""
        self._group = _Group()
        self._waiters: list[asyncio.Future[None]] = []
        self._on_durable: list[Callable[[], None]] = []
        """What to call once the queued group is committed (slots to give back)."""
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

    def commit(
        self,
        *,
        outcomes: Sequence[OutcomeRow] = (),
        answers: Sequence[AnswerRow] = (),
        tool_results: Sequence[ToolResultRow] = (),
        usage: Sequence[UsageRow] = (),
        events: Sequence[EventRow] = (),
        batch_items: Sequence[StagedItem] = (),
        fanouts: Sequence[FanoutRow] = (),
        item_results: Sequence[ItemResult] = (),
        marks: Sequence[MarkRow] = (),
        priced: Sequence[PricedRow] = (),
        on_durable: Callable[[], None] | None = None,
    ) -> asyncio.Future[None]:
        """Queue rows for the next group commit: await it to wait until they are durable;
        see :meth:`commit_nowait` for ``on_durable``."""
        return self.commit_nowait(
            outcomes=outcomes,
            answers=answers,
            tool_results=tool_results,
            usage=usage,
            events=events,
            batch_items=batch_items,
            fanouts=fanouts,
            item_results=item_results,
            marks=marks,
            priced=priced,
            retrieved=False,
            on_durable=on_durable,
        )

    def commit_nowait(
        self,
        *,
        outcomes: Sequence[OutcomeRow] = (),
        answers: Sequence[AnswerRow] = (),
        tool_results: Sequence[ToolResultRow] = (),
        usage: Sequence[UsageRow] = (),
        events: Sequence[EventRow] = (),
        batch_items: Sequence[StagedItem] = (),
        fanouts: Sequence[FanoutRow] = (),
        item_results: Sequence[ItemResult] = (),
        marks: Sequence[MarkRow] = (),
        priced: Sequence[PricedRow] = (),
        retrieved: bool = True,
        on_durable: Callable[[], None] | None = None,
    ) -> asyncio.Future[None]:
        """Queue rows without waiting: the future of their group commit. A failure still
        breaks the gateway (S2) and surfaces at the next ``commit`` or ``flush``.

        ``on_durable`` is called by the writer right after the group holding the rows is
        committed, before any unit of the group is woken, in the order the rows were
        queued; never when the commit fails. It must not raise. A unit passes the release
        of its concurrency slot: the slots of a group go back in the order its units
        answered, and the units waiting for them send first, while the group's own units
        wait their turn to do their bookkeeping (S1 unchanged: a slot still goes back only
        once its unit's answer is durable)."""
        self._raise_if_broken()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if retrieved:
            fut.add_done_callback(_retrieve)
        g = self._group
        if outcomes:
            g.outcomes.extend(outcomes)
            g.rows += len(outcomes)
        if answers:
            g.answers.extend(answers)
            g.rows += len(answers)
        if usage:
            g.usage.extend(usage)
            g.rows += len(usage)
        if events:
            g.events.extend(events)
            g.rows += len(events)
        if tool_results or batch_items or fanouts or item_results or marks or priced:
            g.tool_results.extend(tool_results)
            g.batch_items.extend(batch_items)
            g.fanouts.extend(fanouts)
            g.item_results.extend(item_results)
            g.marks.extend(marks)
            g.priced.extend(priced)
            g.rows += (
                len(tool_results)
                + len(batch_items)
                + len(fanouts)
                + len(item_results)
                + len(marks)
                + len(priced)
            )
        self._waiters.append(fut)
        if on_durable is not None:
            self._on_durable.append(on_durable)
        assert self._wake is not None
        self._wake.set()
        return fut

    async def durable(self) -> None:
        """The durability acknowledgement: wait until everything committed so far is stored
        durably — at once on SQL stores, whose commit is durable; on a storage point, until
        the log holding it is shipped (docs/guarantees.md, Storage points). Call it after recording an intent and
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
        point taken over meanwhile raises :class:`LeaseTaken` (docs/guarantees.md, Storage points, O2)."""
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

    async def _lookup(
        self, table: dict[str, list[asyncio.Future[str | None]]], key: str
    ) -> str | None:
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
                queued = len(self._waiters)
                await asyncio.sleep(0)
                if len(self._waiters) == queued or loop.time() >= until:
                    break
            self._wake.clear()
            lookups, self._lookups = self._lookups, {}
            tools, self._tool_lookups = self._tool_lookups, {}
            group, self._group = self._group, _Group()
            writes, self._waiters = self._waiters, []
            released, self._on_durable = self._on_durable, []
            if writes and self._progress is not None and loop.time() >= self._progress_due:
                self._progress_due = loop.time() + self._progress_every
                group.events.append(self._progress())
                group.rows += 1
            if self._broken is not None:
                # Fail closed (S2): after one failed checkpoint nothing more is written.
                self._fail_all(lookups, tools, writes, self._broken)
                continue
            cp = group.checkpoint(self.tenant) if writes else None
            try:
                if self._inline and not self._calls and group.rows <= self.inline_rows:
                    found, tool_found = self._do_io(list(lookups), list(tools), cp)
                else:
                    found, tool_found = await loop.run_in_executor(
                        self._pool, self._do_io, list(lookups), list(tools), cp
                    )
            except asyncio.CancelledError:
                self._fail_all(lookups, tools, writes, StoreError("the store writer was stopped"))
                raise
            except Exception as exc:  # noqa: BLE001 - every waiter must learn of it
                self._broken = exc if isinstance(exc, StoreError) else StoreError(str(exc))
                self._fail_all(lookups, tools, writes, self._broken)
                continue
            for give_back in released:
                give_back()
            for fp, futs in lookups.items():
                for f in futs:
                    if not f.done():
                        f.set_result(found.get(fp))
            for h, futs in tools.items():
                for f in futs:
                    if not f.done():
                        f.set_result(tool_found.get(h))
            for done in writes:
                if not done.done():
                    done.set_result(None)

    def _do_io(
        self, lookups: list[str], tools: list[str], group: Checkpoint | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        found = self.store.get_answers(lookups, tenant=self.tenant) if lookups else {}
        tool_found = self.store.get_tool_results(tools, tenant=self.tenant) if tools else {}
        if group is not None:
            maybe_crash("before_checkpoint")
            self.store.checkpoint(group, lease=self.lease.as_tuple() if self.lease else None)
            self.commits += 1
            maybe_crash("after_checkpoint")
        return found, tool_found

    def _fail_all(
        self,
        lookups: dict[str, list[asyncio.Future[str | None]]],
        tools: dict[str, list[asyncio.Future[str | None]]],
        writes: list[asyncio.Future[None]],
        exc: BaseException,
    ) -> None:
        for futs in list(lookups.values()) + list(tools.values()):
            for f in futs:
                if not f.done():
                    f.set_exception(exc)
        for w in writes:
            if not w.done():
                w.set_exception(exc)

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
