"""The online executor: runs a run's units shard by shard until every unit is settled,
the run is told to stop, or the store fails.

Shards (DESIGN §1) are ranges of at most 1,000 records of one input file. A small
window of shards is in flight at once so that concurrency slots stay busy across
shard boundaries. Inside a shard every record walks the actions in topological
order, so a downstream action starts on a record as soon as that record's
dependencies are settled; ``max_concurrency`` bounds each action's calls in flight.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agac.engine.actions import ActionRuntime, build_runtime
from agac.engine.effects import run_effect
from agac.engine.fanout import FanOutPlan, has_fan_out
from agac.engine.gateway import StoreGateway
from agac.engine.units import Settled, Stopped, build_request, run_unit
from agac.errors import LeaseLost, StoreError
from agac.providers.base import Request, Response, fingerprint_of
from agac.store.batches import OPEN_BATCH_STATES, staged_key
from agac.store.repository import dumps, loads

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.engine.budget import BudgetGuard
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store

__all__ = ["Executor", "Progress", "shard_ranges"]

SHARD_SIZE = 1000
SHARDS_IN_FLIGHT = 3
HEARTBEAT_SECONDS = 10.0


def shard_ranges(files: list[dict[str, Any]], size: int = SHARD_SIZE) -> list[tuple[int, int]]:
    """[lo, hi) seq ranges of at most ``size`` records, never crossing a file."""
    out: list[tuple[int, int]] = []
    for f in files:
        start, count = int(f["start"]), int(f["count"])
        for lo in range(start, start + count, size):
            out.append((lo, min(lo + size, start + count)))
    return out


class Progress:
    """Live counters per action, for progress bars; the store stays the truth."""

    def __init__(self, actions: list[str], total: int) -> None:
        self.total = total
        self.actions = {a: {"answered": 0, "failed": 0, "skipped": 0, "cost": 0.0} for a in actions}
        self.batches: dict[str, str] = {}
        """Per batch action: its batches out, with provider status and request counts."""
        self.listeners: list[Callable[[Progress], None]] = []
        self.totals = dict.fromkeys(actions, total)
        """Units per action: the record count, grown by fan-outs as parents fan out."""
        self._fanned: set[tuple[str, str]] = set()

    def fanned_out(self, fan: str, parent: str, actions: Any, items: int) -> None:
        """A parent made ``items`` units of each of ``actions`` in place of one."""
        if (fan, parent) not in self._fanned:
            self._fanned.add((fan, parent))
            for a in actions:
                self.totals[a] += items - 1

    def bump(self, action: str, status: str, cost: float = 0.0) -> None:
        row = self.actions[action]
        row[status] += 1
        row["cost"] += cost
        for fn in self.listeners:
            fn(self)

    def done(self, action: str) -> int:
        r = self.actions[action]
        return int(r["answered"] + r["failed"] + r["skipped"])

    def add_cost(self, action: str, usd: float) -> None:
        """Count what earlier invocations of the run spent on ``action``."""
        if action in self.actions:
            self.actions[action]["cost"] += usd

    def add(self, action: str, status: str, n: int) -> None:
        """Count ``n`` units settled before this process looked (a shard already complete)."""
        if action in self.actions:
            self.actions[action][status] += n

    def event_row(self, run_id: str) -> dict[str, Any]:
        """A ``progress`` event (T6): units and cost per action, as this run counts them."""
        actions = {a: {"records": max(self.totals[a], self.done(a)), "answered": r["answered"],
                       "failed": r["failed"], "skipped": r["skipped"],
                       "cost_usd": round(r["cost"], 6)}
                   for a, r in self.actions.items()}
        cost = round(sum(r["cost"] for r in self.actions.values()), 6)
        return {"run_id": run_id, "kind": "progress", "action": None, "unit_key": None,
                "data": dumps({"scope": "run", "actions": actions, "cost_usd": cost}),
                "created_at": time.time()}


class Executor:
    def __init__(
        self,
        *,
        run_id: str,
        workflow: Workflow,
        store: Store,
        gateway: StoreGateway,
        providers: dict[str, Any],
        prices: PriceTable,
        root: Any,
        snapshot_files: list[dict[str, Any]],
        fresh: bool = False,
        prior_run_id: str | None = None,
        prior_failed_actions: frozenset[str] = frozenset(),
        progress: Progress | None = None,
        provider_options: dict[str, Any] | None = None,
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.store = store
        self.gateway = gateway
        self.prices = prices
        self.fresh = fresh
        self.prior_run_id = prior_run_id
        self.prior_failed_actions = prior_failed_actions
        self.files = snapshot_files
        self.snapshot_id = ""
        self.runtimes: list[ActionRuntime] = [
            build_runtime(a, providers.get(a.provider or "") if a.kind == "llm" else None, root)
            for a in workflow.actions
        ]
        self.fanout = FanOutPlan(self.runtimes) if has_fan_out(workflow) else None
        """The record's steps when the workflow fans out (engine/fanout.py), else None."""
        total = sum(int(f["count"]) for f in snapshot_files)
        self.progress = progress or Progress([a.name for a in workflow.actions], total)
        self.inflight: dict[str, asyncio.Future[Any]] = {}
        self.prefetched: dict[tuple[str, str], tuple[Any, str, str, str | None]] = {}
        self.provider_options = provider_options or {}
        self.batch: Any = None
        """The run's BatchCoordinator when it has batch actions (set by the run)."""
        self.batch_items: dict[tuple[str, str], list[Any]] = {}
        self.batch_answers: dict[str, str] = {}
        self.refused_actions: set[str] = set()
        self.adopted_batches: set[str] = set()
        self.walked = False
        """True once a full online pass ran in this invocation (adoption is then known)."""
        self.waiting: list[str] = []
        self.stopping = False
        self.run_row: Any = None
        self.deadline_at: float | None = None
        """When the run times out (R4), or None."""
        self.effects_waiting: list[str] = []
        """Units whose non-idempotent effect is unknown: they wait on a person (E2)."""
        self.cancel_requested = False
        """Set when ``agac cancel`` marked the run ``cancelling`` (seen at a heartbeat)."""
        self.budget: BudgetGuard | None = None
        """The run's budget guard (R5), or None: a run without a budget does no budget work."""
        self.approvals: Any = None
        """The run's ApprovalGate (engine/approvals.py) when an action has ``approval:``."""
        self._carried: dict[tuple[str, str], tuple[str, str | None, str | None]] = {}
        self.ranges: list[tuple[int, int]] | None = None
        """The shards to process (a worker's claimed shard); None: every shard of the run."""
        self.heartbeat_seconds = HEARTBEAT_SECONDS

    # -- driving ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop sending; what is in flight settles and is committed."""
        self.stopping = True

    async def execute(self, snapshot_id: str) -> bool:
        """Process every shard; True when every unit got an outcome."""
        self.snapshot_id = snapshot_id
        self.effects_waiting = []
        window = asyncio.Semaphore(SHARDS_IN_FLIGHT)
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat())
        complete = True

        # The other shards load once the first one's units are under way: loaded all at
        # once, their reads queue in the store thread ahead of the first group commit,
        # and the first wave of calls holds its slots 30-70 ms longer.
        first_started = asyncio.Event()

        async def one(i: int, lo: int, hi: int) -> bool:
            if i:
                await first_started.wait()
            try:
                async with window:
                    if self.stopping:
                        return False
                    return await self._shard(lo, hi, first_started if not i else None)
            finally:
                first_started.set()

        try:
            ranges = self.ranges if self.ranges is not None else shard_ranges(self.files)
            results = await asyncio.gather(*(one(i, lo, hi) for i, (lo, hi) in enumerate(ranges)))
            complete = all(results)
            self.walked = self.walked or not self.stopping
        finally:
            heartbeat.cancel()
            try:
                await heartbeat
            except (asyncio.CancelledError, LeaseLost, StoreError):
                pass
            await self.gateway.flush()
        return complete and not self.stopping

    def deadline_passed(self) -> bool:
        return self.deadline_at is not None and time.time() >= self.deadline_at

    async def _heartbeat(self) -> None:
        lease = self.gateway.lease
        if lease is None:
            return
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await self.gateway.call(self.store.renew_lease, lease.name, lease.token, lease.ttl)
            except LeaseLost:
                self.stop()
                raise
            run = await self.gateway.call(self.store.get_run, self.run_id)
            if run is not None and run.state == "cancelling":
                self.cancel_requested = True  # agac cancel: stop sending; the run ends cancelled
                self.stop()

    async def _shard(self, lo: int, hi: int, started: asyncio.Event | None = None) -> bool:
        """Run one shard's records; ``started`` is set once its units are under way."""
        have = await self.gateway.call(self.store.count_outcomes_between, self.run_id, lo, hi)
        if have == (hi - lo) * len(self.runtimes) and self.fanout is None:
            # every unit of this shard already has its outcome: count them, send nothing
            for row in await self.gateway.call(self.store.status_counts_between, self.run_id, lo, hi):
                self.progress.add(row.action, row.status, int(row.n))
            return True
        records, existing, prior = await self.gateway.call(self._load_shard, lo, hi)
        self._carried.update(prior)
        for (action, _), settled in existing.items():
            self.progress.bump(action, settled.status)
        await self._prefetch_batch_items(records)
        await self._prefetch_roots(records, existing)
        tasks = await self._start_records(records, existing)
        if started is not None:
            started.set()
        done = await asyncio.gather(*tasks)
        for key in prior:
            self._carried.pop(key, None)
        for rt in self.runtimes:
            for r in records:
                self.prefetched.pop((rt.name, r.key), None)
                self.batch_items.pop((rt.name, r.key), None)
        if self.fanout is not None and self.batch_items:
            under = tuple(r.key + "/" for r in records)
            for k in [k for k in self.batch_items if k[1].startswith(under)]:
                del self.batch_items[k]
        return all(done)

    async def _start_records(self, records: list[Any], existing: dict[tuple[str, str], Settled]
                             ) -> list[asyncio.Task[bool]]:
        """One task per record, started 64 at a time: each runs until it waits for a slot,
        and a shard's 1,000 first steps in one go would hold answers that came back
        meanwhile (and the slots they free) for tens of milliseconds."""
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[bool]] = []
        try:
            for i, rec in enumerate(records):
                tasks.append(loop.create_task(self._record(rec, existing)))
                if i % 64 == 63:
                    await asyncio.sleep(0)
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        return tasks

    async def _prefetch_batch_items(self, records: list[Any]) -> None:
        if self.batch is None:
            return
        keys = [r.key for r in records]
        for rt in self.batch.batch_rts:
            rows = await self.gateway.call(self.store.unit_items, self.workflow.name, rt.name, keys,
                                           items=self.fanout is not None and self.fanout.per_item(rt.name))
            for row in rows:
                self.batch_items.setdefault((rt.name, row.unit_key), []).append(row)
        fps = [i.fingerprint for items in self.batch_items.values() for i in items
               if i.status == "succeeded" and i.collected_by == self.run_id]
        if fps:
            self.batch_answers.update(await self.gateway.call(self.store.get_answers, fps))

    # -- batch units ------------------------------------------------------------------------

    def _items(self, rt: ActionRuntime, key: str, fp: str) -> list[Any]:
        return sorted((i for i in self.batch_items.get((rt.name, key), []) if i.fingerprint == fp),
                      key=lambda i: i.attempt)

    def own_batch_item(self, rt: ActionRuntime, key: str) -> Any:
        """The latest batch item this run staged or sent for the unit, if any."""
        staged_here = f"staged:{self.run_id}:"
        own = [i for i in self.batch_items.get((rt.name, key), [])
               if i.batch_run == self.run_id or i.batch_key.startswith(staged_here)]
        return max(own, key=lambda i: i.attempt) if own else None

    def own_item_decides(self, item: Any) -> bool:
        """Whether this run's own item settles the unit without rendering: it waits (staged
        here or pending in an open batch) or it was read by this run. Anything else (a
        retry, a batch resolved not submitted) goes the normal way."""
        if item.status == "pending":
            return item.batch_state is None or item.batch_state in OPEN_BATCH_STATES
        return item.status in ("succeeded", "failed") and item.collected_by == self.run_id

    async def settle_from_own_item(self, rt: ActionRuntime, rec: Any, item: Any) -> Settled | None:
        """Pending while the item waits; answered or failed once this run read it."""
        if item.status == "pending":
            return None
        attempts = sum(1 for i in self.batch_items.get((rt.name, rec.key), [])
                       if i.batch_run == self.run_id)
        if item.status == "failed":
            return await self.settle(rt, rec, "failed", item.reason, item.detail, origin="call",
                                     fingerprint=item.fingerprint, attempts=attempts)
        stored = self.batch_answers.pop(item.fingerprint, None)
        if stored is None:
            stored = await self.gateway.lookup_answer(item.fingerprint)
        if stored is None:
            return None  # not readable here; the unit is asked again through the normal path
        return await self.settle(rt, rec, "answered", output=json.loads(stored), origin="call",
                                 fingerprint=item.fingerprint, output_json=stored, attempts=attempts)

    def batch_answer_is_ours(self, rt: ActionRuntime, rec: Any, fp: str) -> bool:
        return any(i.status == "succeeded" and i.collected_by == self.run_id
                   for i in self._items(rt, rec.key, fp))

    def batch_origin(self, rt: ActionRuntime, rec: Any, fp: str) -> tuple[str, int]:
        """('call', attempts) when this run paid for the batch answer, else ('reused', 0)."""
        mine = [i for i in self._items(rt, rec.key, fp) if i.batch_run == self.run_id]
        if any(i.status == "succeeded" for i in mine):
            return "call", len(mine)
        return "reused", 0

    async def batch_unit(self, rt: ActionRuntime, rec: Any, request_json: str, fp: str) -> Settled | None:
        """A batch action's unit that has no answer: settle it from its items read in this
        run, or leave it pending in a batch that is out (adopted, B0), or stage it."""
        items = self._items(rt, rec.key, fp)
        staged_here = f"staged:{self.run_id}:"
        if any(i.batch_key.startswith(staged_here) for i in items):
            return None
        out = [i for i in items if i.batch_state in OPEN_BATCH_STATES and i.status == "pending"]
        if out:
            self.adopted_batches.update(i.batch_key for i in out)  # B0: still needed
            return None
        read_here = [i for i in items if i.collected_by == self.run_id]
        if read_here:
            last = read_here[-1]
            if last.status == "failed":
                return await self.settle(rt, rec, "failed", last.reason, last.detail, origin="call",
                                         fingerprint=fp, attempts=len(read_here))
        if self.deadline_passed():
            return await self.settle(rt, rec, "skipped", "deadline",
                                     "never sent: the run's deadline passed")
        if self.budget is not None and self.budget.exhausted:
            return await self.settle(rt, rec, "skipped", "budget_exhausted",
                                     "never sent: the budget has no room for its worst case")
        attempt = len(read_here) + 1
        self.gateway.commit_nowait(batch_items=[{
            "batch_key": staged_key(self.run_id, rt.name, rec.file),
            "custom_id": f"{getattr(rec, 'custom', None) or f'r{rec.seq}'}a{attempt}",
            "workflow": self.workflow.name,
            "action": rt.name, "unit_key": rec.key, "file": rec.file, "fingerprint": fp,
            "attempt": attempt, "request": request_json, "status": "pending", "reason": None,
            "detail": None,
        }])
        return None

    async def _prefetch_roots(self, records: list[Any], existing: dict[tuple[str, str], Settled]) -> None:
        """Render the requests of actions that read only the record (no dependencies) for a
        whole shard and look their answers up in one query instead of one per unit."""
        if self.fresh:
            return
        pending: list[tuple[str, str, Any, str, str]] = []
        for rt in self.runtimes:
            if rt.action.kind != "llm" or rt.action.dependencies or (
                    self.fanout is not None and self.fanout.per_item(rt.name)):
                continue
            for rec in records:
                if rec.reason or (rt.name, rec.key) in existing or rec.payload is None:
                    continue
                if self.batch is not None and self.own_batch_item(rt, rec.key) is not None:
                    continue  # waits on (or is settled from) this run's own batch item
                try:
                    request = build_request(rt, rt.view.build(loads(rec.payload), {}))
                except Exception:  # noqa: BLE001 - the unit renders again and reports it
                    continue
                request_json = request.canonical()
                pending.append((rt.name, rec.key, request, request_json, fingerprint_of(request_json)))
                if len(pending) % 16 == 0:
                    # Rendering a shard takes a while: let answers that came back meanwhile
                    # be committed and their slots passed on instead of waiting for it.
                    await asyncio.sleep(0)
        if not pending:
            return
        found = await self.gateway.call(self.store.get_answers, [p[4] for p in pending])
        for name, key, request, request_json, fp in pending:
            self.prefetched[(name, key)] = (request, request_json, fp, found.get(fp))

    def _load_shard(self, lo: int, hi: int) -> tuple[list[Any], dict[tuple[str, str], Settled], dict[Any, Any]]:
        records = list(self.store.iter_records(self.snapshot_id, lo, hi))
        existing = {
            (o.action, o.unit_key): Settled(o.status, o.reason, loads(o.output))
            for o in self.store.outcomes_between(self.run_id, lo, hi)
        }
        prior: dict[tuple[str, str], tuple[str, str | None, str | None]] = {}
        if self.prior_run_id and not self.fresh:
            for o in self.store.outcomes_between(self.prior_run_id, lo, hi):
                if o.status == "failed" and o.fingerprint and o.action not in self.prior_failed_actions:
                    prior[(o.action, o.unit_key)] = (o.reason, o.detail, o.fingerprint)
        return records, existing, prior

    async def _record(self, rec: Any, existing: dict[tuple[str, str], Settled]) -> bool:
        payload = loads(rec.payload) if rec.payload is not None else None
        if self.fanout is not None:
            return await self.fanout.walk_record(self, rec, payload, existing)
        results: dict[str, Settled] = {}
        for rt in self.runtimes:
            got = existing.get((rt.name, rec.key))
            if got is None:
                try:
                    got = await run_unit(self, rt, rec, payload, results)
                except Stopped:
                    got = None
                if got is None:
                    return False
            results[rt.name] = got
        return True

    # -- used by units ---------------------------------------------------------------------

    async def effect_unit(self, rt: ActionRuntime, rec: Any, inputs_json: str, input_hash: str,
                          key: str) -> Settled | None:
        return await run_effect(self, rt, rec, inputs_json, input_hash, key)

    def carried_failure(self, action: str, key: str, fingerprint: str) -> tuple[str, str | None] | None:
        prior = self._carried.get((action, key))
        if prior is None or prior[2] != fingerprint:
            return None
        return prior[0], prior[1]

    async def settle(
        self,
        rt: ActionRuntime,
        rec: Any,
        status: str,
        reason: str | None = None,
        detail: str | None = None,
        *,
        output: Any = None,
        origin: str = "call",
        fingerprint: str | None = None,
        attempts: int = 0,
        answers: list[dict[str, Any]] | None = None,
        usage: list[dict[str, Any]] | None = None,
        tool_results: list[dict[str, Any]] | None = None,
        traceback_text: str | None = None,
        output_json: str | None = None,
    ) -> Settled:
        """Commit a unit's outcome (with its answer, usage and events).

        A unit that paid for something (a call, a tool invocation) waits until the
        outcome is durable, keeping its concurrency slot (S1). Outcomes that cost nothing
        to redo (skips, reuse, carried failures) are queued without waiting: group
        commits keep their order, so an upstream outcome is never durable after its
        downstream one, and a crash in between only redoes free work.
        """
        now = time.time()
        if output_json is None and output is not None:
            output_json = dumps(output)
        outcome = {
            "run_id": self.run_id, "action": rt.name, "unit_key": rec.key, "seq": rec.seq,
            "status": status, "reason": reason, "detail": detail, "origin": origin,
            "fingerprint": fingerprint, "output": output_json,
            "attempts": attempts, "updated_at": now,
        }
        events = []
        if status == "failed":
            data: dict[str, Any] = {"reason": reason, "detail": detail}
            if traceback_text:
                data["traceback"] = traceback_text
            events.append(self._event_row("unit_failed", rt.name, rec.key, data, now))
        parts = {"outcomes": [outcome], "answers": answers or [], "usage": usage or [],
                 "tool_results": tool_results or [], "events": events}
        if usage or answers or tool_results:
            await self.gateway.commit(**parts)
        else:
            self.gateway.commit_nowait(**parts)
        cost = sum(u["cost_usd"] for u in usage or [])
        self.progress.bump(rt.name, status, cost)
        return Settled(status, reason, output)

    def _event_row(self, kind: str, action: str | None, key: str | None, data: dict[str, Any], now: float) -> dict[str, Any]:
        return {"run_id": self.run_id, "kind": kind, "action": action, "unit_key": key,
                "data": dumps(data), "created_at": now}

    async def event(self, kind: str, action: str | None = None, key: str | None = None, **data: Any) -> None:
        self.gateway.commit_nowait(events=[self._event_row(kind, action, key, data, time.time())])

    def usage_row(
        self, rt: ActionRuntime, rec: Any, attempt: int, request: Request,
        response: Response | None, error: BaseException | None, started: float, fp: str,
    ) -> dict[str, Any]:
        action = rt.action
        usage = response.usage if response is not None else None
        cost = self.prices.cost(action.model or "", usage, "live") if usage is not None else 0.0
        return {
            "run_id": self.run_id, "action": action.name, "unit_key": rec.key, "attempt": attempt,
            "kind": "llm", "provider": request.provider, "model": request.model, "tier": "live",
            "input_tokens": usage.input_tokens if usage else 0,
            "cached_tokens": usage.cached_tokens if usage else 0,
            "cache_write_tokens": usage.cache_write_tokens if usage else 0,
            "output_tokens": usage.output_tokens if usage else 0,
            "cost_usd": cost, "latency_ms": (time.monotonic() - started) * 1000,
            "status": "ok" if error is None else "error",
            "error": None if error is None else f"{getattr(error, 'reason', None) or type(error).__name__}: {error}",
            "fingerprint": fp, "created_at": time.time(),
        }

    async def record_call(
        self, rt: ActionRuntime, rec: Any, attempt: int, request: Request,
        response: Response | None, error: BaseException, started: float, fp: str,
    ) -> None:
        """Ledger a call that did not produce the unit's answer (it may still have cost money)."""
        row = self.usage_row(rt, rec, attempt, request, response, error, started, fp)
        if response is not None:
            # Keep what the model said: the session shows why the attempt was rejected.
            row["error"] = f"{row['error']} | answer: {response.text[:500]}"
        self.progress.actions[rt.name]["cost"] += row["cost_usd"]
        await self.gateway.commit(usage=[row])

    def tool_usage_row(
        self, rt: ActionRuntime, rec: Any, attempt: int, started: float, error: str | None, input_hash: str
    ) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "action": rt.name, "unit_key": rec.key, "attempt": attempt,
            "kind": "tool", "provider": "tool", "model": rt.action.function or "", "tier": "live",
            "input_tokens": 0, "cached_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0,
            "cost_usd": 0.0, "latency_ms": (time.monotonic() - started) * 1000,
            "status": "ok" if error is None else "error", "error": error,
            "fingerprint": input_hash, "created_at": time.time(),
        }

    async def record_tool(
        self, rt: ActionRuntime, rec: Any, attempt: int, started: float, error: str, input_hash: str
    ) -> None:
        await self.gateway.commit(usage=[self.tool_usage_row(rt, rec, attempt, started, error, input_hash)])


