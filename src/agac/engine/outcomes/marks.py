"""Dispatch marks (S1, §8): what may have been sent is in the store before it is sent.

Online calls have no intent row each; a call's usage is committed with its outcome. A
process killed (or stopped by a failed checkpoint) while calls are in flight loses their
outcomes, and the provider may bill them. So before a unit sends, its key is listed in
its (run, action, shard) *mark* row, written inside a group commit that is durable first.
To keep sends from waiting on the store, a rewrite lists the units holding the action's
slots and the next ``2 × max_concurrency`` units waiting for one (they are next, in FIFO
order), and is queued again when fewer than ``max_concurrency`` of those are covered — so
a mark row is written about once per ``max_concurrency`` calls, and a unit normally finds
its key durable when its slot comes.

Whoever next opens the run (:func:`account_lost_calls`) writes a usage row with
``origin = 'unknown'`` at its worst case for every listed unit that has no outcome, and
clears the marks. The ledger then counts at least every call the provider received, and
at most that plus the marks' width: per action, its ``max_concurrency`` units in flight
that may not have been sent yet plus the ``2 × max_concurrency`` units covered ahead.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agac.clock import SYSTEM
from agac.engine.graph import run_graph
from agac.engine.limits.rates import estimate_tokens
from agac.jsontext import dumps
from agac.providers.base import Usage
from agac.providers.pricing import FREE_PROVIDERS
from agac.store.marks import UNKNOWN_ORIGIN, decode_units
from agac.store.rows import MarkRow, UsageRow

if TYPE_CHECKING:
    from agac.clock import Clock
    from agac.engine.outcomes.dispatch import Dispatch
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.providers.base import Request
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["DispatchMarks", "ShardIndex", "account_lost_calls", "shard_name"]


def _retrieve(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()


def shard_name(lo: int) -> str:
    """An online shard's name, as worker shards are named (``o:<first seq>``)."""
    return f"o:{lo:010d}"


class ShardIndex:
    """Which online shard a record's seq belongs to."""

    def __init__(self, ranges: Sequence[tuple[int, int]]) -> None:
        self._ranges = sorted(ranges) or [(0, 0)]
        self._starts = [lo for lo, _ in self._ranges]

    def __call__(self, seq: int) -> str:
        return self.range_of(seq)[2]

    def range_of(self, seq: int) -> tuple[int, int, str]:
        """(first seq, end, name) of the shard holding ``seq``."""
        i = max(bisect.bisect_right(self._starts, seq) - 1, 0)
        lo, hi = self._ranges[i]
        return lo, hi, shard_name(lo)


class _Action:
    """One action's units: waiting for a slot (FIFO), holding one, and covered."""

    __slots__ = (
        "ahead",
        "covered",
        "covered_ahead",
        "live",
        "model",
        "pending",
        "provider",
        "width",
        "written",
    )

    def __init__(self, width: int, provider: str, model: str) -> None:
        self.width = width
        self.provider = provider
        self.model = model
        self.ahead: dict[str, Dispatch] = {}
        self.live: dict[str, Dispatch] = {}
        self.covered: set[str] = set()
        """Keys listed in a durable mark row (and not released since)."""
        self.pending: dict[str, asyncio.Future[None]] = {}
        """Keys listed in a queued mark row, with the group commit that makes it durable."""
        self.written: dict[str, tuple[frozenset[str], asyncio.Future[None]]] = {}
        """Per shard, the keys of the mark row queued last and its group commit."""
        self.covered_ahead = 0
        """How many units of ``ahead`` are covered or pending (rows list the first ones)."""


class DispatchMarks:
    """The executor's marks: ``expect`` before waiting for a slot, ``send`` holding the
    slot just before the call, ``release`` after the slot is given back — each given the
    unit's one :class:`~agac.engine.outcomes.dispatch.Dispatch`, which the queues hold
    as it is."""

    def __init__(
        self,
        run_id: str,
        gateway: StoreGateway,
        prices: PriceTable,
        shard_of: ShardIndex,
        clock: Clock = SYSTEM,
    ) -> None:
        self.run_id = run_id
        self.clock = clock
        self.gateway = gateway
        self.prices = prices
        self.shard_of = shard_of
        self._last_shard: tuple[int, int, str] = (0, 0, "")
        self.writes = 0
        """Mark rewrites queued (each one row per shard that changed)."""
        self.waits = 0
        """Sends that waited for a mark to become durable."""
        self._actions: dict[str, _Action] = {}

    def expect(self, entry: Dispatch) -> None:
        act = self._actions.get(entry.action)
        request = entry.request
        if act is None:
            act = self._actions[entry.action] = _Action(
                2 * max(1, entry.width), request.provider, request.model
            )
        seq = entry.seq
        shard = self._last_shard
        if not (shard[0] <= seq < shard[1]):
            shard = self._last_shard = self.shard_of.range_of(seq)
        entry.shard = shard[2]
        if entry.listed_for is not request:  # a retry of the same request: encoded already
            entry.listed = self._listed(act, entry.key, entry.fp, request)
            entry.listed_for = request
        act.ahead[entry.key] = entry
        entry.expected = True

    async def send(self, entry: Dispatch) -> None:
        """Return once ``entry`` is in a durable mark row (normally at once)."""
        act = self._actions[entry.action]
        key = entry.key
        if act.ahead.pop(key, None) is not None:
            if key in act.covered or key in act.pending:
                act.covered_ahead -= 1
        else:
            assert key in act.live, key
        if entry.listed_for is not entry.request:  # a reprompt's request goes out now
            entry.listed = self._listed(act, key, entry.fp, entry.request)
            entry.listed_for = entry.request
        act.live[key] = entry
        if key not in act.covered:
            if key not in act.pending:
                self._write(act, entry.action)
            fut = act.pending.get(key)
            if fut is not None:
                if fut.done():  # durable, and its callback has not run yet
                    fut.result()  # a StoreError here stops the run (S2)
                else:
                    self.waits += 1
                    await asyncio.shield(fut)
        if self._low(act):
            self._write(act, entry.action)

    def release(self, entry: Dispatch) -> None:
        entry.expected = False
        act = self._actions.get(entry.action)
        if act is None:
            return
        key = entry.key
        if act.ahead.pop(key, None) is not None and (key in act.covered or key in act.pending):
            act.covered_ahead -= 1
        act.live.pop(key, None)
        act.covered.discard(key)
        act.pending.pop(key, None)

    # -- writing a mark -----------------------------------------------------------------

    @staticmethod
    def _low(act: _Action) -> bool:
        """Fewer than half the window of the next units is covered, and one is not (rows
        list a prefix of the FIFO of waiting units, so a count says it)."""
        return act.covered_ahead < act.width // 2 and len(act.ahead) > act.covered_ahead

    def _write(self, act: _Action, action: str) -> None:
        """Queue a rewrite of the action's mark rows that must list more: the units
        holding slots and the next ``width`` waiting. Every listed key is then pending on
        the group commit of the row that lists it (or covered, if that one is durable)."""
        listed: dict[str, list[Dispatch]] = {}
        for unit in act.live.values():
            listed.setdefault(unit.shard, []).append(unit)
        for i, unit in enumerate(act.ahead.values()):
            if i >= act.width:
                break
            listed.setdefault(unit.shard, []).append(unit)
        rows: list[MarkRow] = []
        rewritten: list[tuple[str, frozenset[str]]] = []
        now = self.clock.time()
        for shard, units in listed.items():
            keys = frozenset(u.key for u in units)
            before = act.written.get(shard)
            if before is not None and keys <= before[0]:
                self._cover(act, keys, before[1])  # the row queued last lists them all
                continue
            rows.append(
                MarkRow(
                    self.run_id, action, shard, "[" + ",".join([u.listed for u in units]) + "]", now
                )
            )
            rewritten.append((shard, keys))
        if not rows:
            return
        fut = self._stored(rows)
        self.writes += 1
        for shard, keys in rewritten:
            act.written[shard] = (keys, fut)
            self._cover(act, keys, fut)

    def _stored(self, rows: list[MarkRow]) -> asyncio.Future[None]:
        """Queue mark rows: a future answered when their group is stored durably — by the
        store's writer itself, right after the commit on SQL stores, so that the units
        whose slots that same commit gives back find their keys durable and send at once
        (a done-callback would run only after them); on a storage point, once the log
        holding it is shipped too (O5: the marks keep the ledger whole there as well)."""
        store = getattr(self.gateway, "store", None)
        if store is None:
            return self.gateway.commit_nowait(marks=rows)
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[None] = loop.create_future()

        def shipped(ticket: concurrent.futures.Future[None]) -> None:
            if stored.done():
                return
            exc = ticket.exception()
            if exc is not None:
                stored.set_exception(exc)
            else:
                stored.set_result(None)

        def after_commit() -> None:
            ticket = store.durability_ticket()  # taken after the commit: it covers it
            if ticket is None:
                stored.set_result(None)
            else:
                ticket.add_done_callback(lambda t: loop.call_soon_threadsafe(shipped, t))

        def failed(f: asyncio.Future[None]) -> None:
            if not stored.done() and (f.cancelled() or f.exception() is not None):
                stored.set_exception(f.exception() or asyncio.CancelledError())

        self.gateway.commit_nowait(marks=rows, on_durable=after_commit).add_done_callback(failed)
        stored.add_done_callback(_retrieve)
        return stored

    @staticmethod
    def _cover(act: _Action, keys: frozenset[str], fut: asyncio.Future[None]) -> None:
        new = [k for k in keys if k not in act.covered and k not in act.pending]
        if not new:
            return
        if fut.done() and (fut.cancelled() or fut.exception() is not None):
            return  # the gateway is broken: nothing more is sent (S2)
        act.covered_ahead += sum(1 for k in new if k in act.ahead)
        if fut.done():
            act.covered.update(new)
            return
        for key in new:
            act.pending[key] = fut

        def durable(f: asyncio.Future[None]) -> None:
            if f.cancelled() or f.exception() is not None:
                return  # the gateway is broken: nothing more is sent (S2)
            for key in new:
                if act.pending.get(key) is f:
                    del act.pending[key]
                    act.covered.add(key)

        fut.add_done_callback(durable)

    def _listed(self, act: _Action, key: str, fp: str, req: Request) -> str:
        """A unit's entry in a mark row: key, fingerprint, its worst case in tokens and
        dollars."""
        tokens_in = estimate_tokens(sum(len(m.content) for m in req.messages))
        usd = (
            self.prices.cost(
                f"{act.provider}/{act.model}", Usage(tokens_in, req.max_tokens), req.ledger_tier
            )
            if act.provider not in FREE_PROVIDERS
            else 0.0
        )
        return dumps([key, fp, tokens_in, req.max_tokens, round(usd, 8)])


# -- whoever next opens the run -------------------------------------------------------------


def account_lost_calls(
    store: Store,
    run: RunRecord,
    *,
    shards: Sequence[str] | None = None,
    lease: tuple[str, int, float] | None = None,
) -> int:
    """S1/§8: a usage row ``origin = 'unknown'`` for every unit under a dispatch mark of
    ``run`` (of ``shards`` only, when given) that has no outcome, at its worst case — or
    at the real usage of an earlier answer to the same request; then the marks go.
    Returns the number of rows written."""
    marks = store.dispatch_marks(run.id, shards)
    if not marks:
        return 0
    listed = [(m.action, *u) for m in marks for u in decode_units(m.units)]
    settled = store.settled_units(run.id, [(a, k) for a, k, *_ in listed])
    lost = [entry for entry in listed if (entry[0], entry[1]) not in settled]
    twins = store.twin_usage([fp for _, _, fp, *_ in lost], tenant=run.tenant) if lost else {}
    models = _models(run)
    now = store.clock.time()
    rows = []
    for action, key, fp, tokens_in, tokens_out, usd in {(e[0], e[1]): e for e in lost}.values():
        provider, model = models.get(action, ("", ""))
        twin = twins.get(fp)
        cost = float(twin.cost_usd) if twin else usd
        why = "sent or about to be sent when the process stopped; its outcome is unknown"
        if not math.isfinite(cost):
            # A worst case stored when a price was not a finite number (an older agac took
            # `.inf`): counted at $0 with its tokens, so the run can still be closed.
            cost, why = 0.0, why + f"; its worst-case cost was not a number ({cost}), so $0"
        rows.append(
            UsageRow(
                run.id,
                action,
                key,
                0,
                "llm",
                provider,
                model,
                "live",
                int(twin.input_tokens) if twin else tokens_in,
                int(twin.cached_tokens) if twin else 0,
                int(twin.cache_write_tokens) if twin else 0,
                int(twin.output_tokens) if twin else tokens_out,
                cost,
                0.0,
                "priced" if twin else UNKNOWN_ORIGIN,
                why,
                fp,
                now,
                UNKNOWN_ORIGIN,
            )
        )
    store.account_lost_calls(
        run.id, rows, run.tenant, [m.shard for m in marks] if shards else None, lease
    )
    return len(rows)


def _models(run: RunRecord) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for a in run_graph(run).actions:
        provider, _, name = str(a.model or "").partition("/")
        out[a.name] = (str(a.provider or provider), str(a.model_name or name))
    return out
