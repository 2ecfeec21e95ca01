"""The record walk over a run's shards: every record walks its steps until each unit is
settled, the run is told to stop, or the store fails.

Shards (docs/getting-started.md) are ranges of at most 1,000 records of one input file. A small
window of shards is in flight at once so that concurrency slots stay busy across
shard boundaries. For a shard, its records, the outcomes this run already has and the
failures the previous run may carry (R1 c) are loaded in one store call; the requests of
actions that read only the record are rendered ahead and their stored answers looked up
in one query; then every record walks (engine/walk/walker.py), so a downstream action
starts on a record as soon as that record's dependencies are settled. Records start in
the order they were read, or by prompt on a provider that caches the prefixes it has just
seen (engine/walk/ordering.py).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agac.engine.decision import own_item
from agac.engine.ports import CarriedFailure, Prefetched
from agac.engine.requests import build_request
from agac.engine.values import RecordUnit, Settled
from agac.engine.walk.ordering import prompt_ordered
from agac.engine.walk.steps import Region
from agac.jsontext import JSONObject, loads
from agac.keys import ESCAPED_KEYS

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.outcomes.writer import OutcomeWriter
    from agac.engine.ports import BatchUnits, ShardMemory
    from agac.engine.values import RunControl
    from agac.engine.walk.steps import StepPlan
    from agac.engine.walk.walker import Walker
    from agac.providers.base import Request
    from agac.store.repository import Store

__all__ = ["SHARDS_IN_FLIGHT", "SHARD_SIZE", "PriorRun", "RecordWalk", "shard_ranges"]

SHARD_SIZE = 1000
SHARDS_IN_FLIGHT = 3


def shard_ranges(files: list[dict[str, Any]], size: int = SHARD_SIZE) -> list[tuple[int, int]]:
    """[lo, hi) seq ranges of at most ``size`` records, never crossing a file."""
    out: list[tuple[int, int]] = []
    for f in files:
        start, count = int(f["start"]), int(f["count"])
        for lo in range(start, start + count, size):
            out.append((lo, min(lo + size, start + count)))
    return out


class PriorRun:
    """The previous final run whose per-unit failures this run carries when their
    fingerprint is unchanged (R1 c), minus the actions that failed as a whole (R1 d)."""

    def __init__(self, run_id: str | None, failed_actions: frozenset[str]) -> None:
        self.run_id = run_id
        self.failed_actions = failed_actions


class RecordWalk:
    """Walks a run's shards (or the ranges a worker claimed) through a :class:`Walker`."""

    def __init__(
        self,
        *,
        run_id: str,
        snapshot_id: str,
        ranges: list[tuple[int, int]],
        store: Store,
        gateway: StoreGateway,
        out: OutcomeWriter,
        plan: StepPlan,
        walker: Walker,
        memory: ShardMemory,
        control: RunControl,
        fresh: bool,
        prior: PriorRun,
        batch: BatchUnits | None,
    ) -> None:
        self.run_id = run_id
        self.snapshot_id = snapshot_id
        self.ranges = ranges
        self.store = store
        self.gateway = gateway
        self.out = out
        self.plan = plan
        self.walker = walker
        self.memory = memory
        self.control = control
        self.fresh = fresh
        self.prior = prior
        self.batch = batch
        self.walked = False
        """True once a full walk ran in this invocation (adoption of batches is known)."""
        self._counted: set[tuple[int, int]] = set()
        """Shards whose earlier outcomes the progress has counted: a later walk of the
        same invocation sees them again, and the outcomes its own walks wrote, which were
        counted when written."""

    async def walk(self) -> bool:
        """Walk every shard; True when every unit got an outcome."""
        window = asyncio.Semaphore(SHARDS_IN_FLIGHT)
        # The other shards load once the first one's units are under way: loaded all at
        # once, their reads queue in the store thread ahead of the first group commit,
        # and the first wave of calls holds its slots 30-70 ms longer.
        first_started = asyncio.Event()

        async def one(i: int, lo: int, hi: int) -> bool:
            if i:
                await first_started.wait()
            try:
                async with window:
                    if self.control.stopping:
                        return False
                    return await self._shard(lo, hi, first_started if not i else None)
            finally:
                first_started.set()

        try:
            results = await asyncio.gather(
                *(one(i, lo, hi) for i, (lo, hi) in enumerate(self.ranges))
            )
            self.walked = self.walked or not self.control.stopping
        finally:
            await self.gateway.flush()
        return all(results) and not self.control.stopping

    async def _shard(self, lo: int, hi: int, started: asyncio.Event | None = None) -> bool:
        """Walk one shard's records; ``started`` is set once its units are under way."""
        counted = (lo, hi) in self._counted
        self._counted.add((lo, hi))
        have = await self.gateway.call(self.store.count_outcomes_between, self.run_id, lo, hi)
        if have == (hi - lo) * len(self.plan.order) and self.plan.regions is None:
            # every unit of this shard already has its outcome: count them, send nothing
            if not counted:
                for row in await self.gateway.call(
                    self.store.status_counts_between, self.run_id, lo, hi
                ):
                    self.out.progress.add(row.action, row.status, int(row.n))
            return True
        records, existing, prior = await self.gateway.call(self._load_shard, lo, hi)
        self.memory.carried.update(prior)
        if not counted:
            for (action, _), settled in existing.items():
                self.out.carried(action, settled.status)
        keys = [r.key for r in records]
        payloads = [loads(r.payload) if r.payload is not None else None for r in records]
        if self.batch is not None:
            await self.batch.prefetch(keys)
        await self._prefetch_roots(records, payloads, existing)
        waiting: set[str] = set()
        first = self.plan.steps[0] if self.plan.steps else None
        if self.batch is not None and first is not None and not isinstance(first, Region):
            waiting = await self.batch.settle_ahead(first, records, existing, self.memory)
        rows = [(r, p) for r, p in zip(records, payloads, strict=True) if r.key not in waiting]
        tasks = await self._start_records(
            prompt_ordered(rows, self._roots(), self.memory.prefetched), existing
        )
        if started is not None:
            started.set()
        done = await asyncio.gather(*tasks)
        for key in prior:
            self.memory.carried.pop(key, None)
        for name in self.plan.order:
            for k in keys:
                self.memory.prefetched.pop((name, k), None)
        if self.batch is not None:
            self.batch.forget(keys)
        return all(done) and not waiting

    async def _start_records(
        self,
        records: list[tuple[RecordUnit, JSONObject | None]],
        existing: dict[tuple[str, str], Settled],
    ) -> list[asyncio.Task[bool]]:
        """One task per record, started 64 at a time: each runs until it waits for a slot,
        and a shard's 1,000 first steps in one go would hold answers that came back
        meanwhile (and the slots they free) for tens of milliseconds."""
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[bool]] = []
        walk = self.walker.walk_record
        try:
            for i, (rec, payload) in enumerate(records):
                tasks.append(loop.create_task(walk(rec, payload, existing)))
                if i % 64 == 63:
                    await asyncio.sleep(0)
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        return tasks

    def _roots(self) -> list[ActionRuntime]:
        """Llm actions that read only the record, outside any fan-out."""
        return [
            rt
            for rt in self.plan.by_name.values()
            if rt.action.kind == "llm"
            and not rt.action.dependencies
            and not self.plan.per_item(rt.name)
        ]

    async def _prefetch_roots(
        self,
        records: list[RecordUnit],
        payloads: list[JSONObject | None],
        existing: dict[tuple[str, str], Settled],
    ) -> None:
        """Render the requests of actions that read only the record (no dependencies) for a
        whole shard and look their answers up in one query instead of one per unit."""
        if self.fresh:
            return
        pending: list[tuple[str, str, Request, str, str]] = []
        for rt in self._roots():
            for rec, payload in zip(records, payloads, strict=True):
                if rec.reason or (rt.name, rec.key) in existing or rec.payload is None:
                    continue
                if (
                    self.batch is not None
                    and own_item(self.batch.items_of(rt, rec.key), self.run_id) is not None
                ):
                    continue  # waits on (or is settled from) this run's own batch item
                try:
                    request = build_request(rt, rt.view.build(payload, {}))
                except Exception:  # noqa: BLE001, S112 - the unit renders again and reports it
                    continue
                pending.append((rt.name, rec.key, request, *rt.identify(request, rec.key)))
                if len(pending) % 16 == 0:
                    # Rendering a shard takes a while: let answers that came back meanwhile
                    # be committed and their slots passed on instead of waiting for it.
                    await asyncio.sleep(0)
        if not pending:
            return
        found = await self.gateway.call(
            self.store.get_answers, [p[4] for p in pending], tenant=self.gateway.tenant
        )
        for name, key, request, request_json, fp in pending:
            self.memory.prefetched[(name, key)] = Prefetched(
                request, request_json, fp, found.get(fp)
            )

    def _load_shard(
        self, lo: int, hi: int
    ) -> tuple[
        list[RecordUnit], dict[tuple[str, str], Settled], dict[tuple[str, str], CarriedFailure]
    ]:
        """(records, this run's outcomes, failures of the prior run to carry) — in the
        store thread."""
        records = RecordUnit.from_rows(list(self.store.iter_records(self.snapshot_id, lo, hi)))
        existing = {
            (o.action, o.unit_key): Settled(o.status, o.reason, loads(o.output))
            for o in self.store.outcomes_between(self.run_id, lo, hi)
        }
        prior: dict[tuple[str, str], CarriedFailure] = {}
        if self.prior.run_id and not self.fresh:
            uncarried = self.store.failures_not_carried(self.prior.run_id)
            older = self._older_keys(self.prior.run_id, records)
            for o in self.store.outcomes_between(self.prior.run_id, lo, hi):
                if (
                    o.status == "failed"
                    and o.fingerprint
                    and o.reason
                    and o.action not in self.prior.failed_actions
                    and o.reason not in uncarried
                ):
                    key = older.get((o.seq, o.unit_key), o.unit_key) if older else o.unit_key
                    prior[(o.action, key)] = CarriedFailure(o.reason, o.detail, o.fingerprint)
        return records, existing, prior

    def _older_keys(self, prior_id: str, records: list[RecordUnit]) -> dict[tuple[int, str], str]:
        """A prior run admitted before unit keys were escaped wrote a record holding ``/``
        or ``%`` under its raw key: (seq, that key) -> its unit key now, for the records
        of this shard that need it (their failures still carry over, R1 c)."""
        escaped = [r for r in records if r.raw_key is not None]
        if not escaped:
            return {}
        prior = self.store.get_run(prior_id)
        if prior is None or prior.settings.unit_keys == ESCAPED_KEYS:
            return {}
        out: dict[tuple[int, str], str] = {}
        for r in escaped:
            raw = r.record_key
            out[(r.seq, raw)] = r.key
            for o in self.store.unit_outcomes_under(prior_id, raw):
                if o.seq == r.seq and o.unit_key.startswith(raw + "/"):
                    out[(r.seq, o.unit_key)] = r.key + o.unit_key[len(raw) :]
        return out
