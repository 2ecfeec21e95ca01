"""Scale-out workers (``agac worker``): many stateless processes on one PostgreSQL.

A worker loops: it claims a ready shard of any open run (DESIGN §1: a range of at most
1,000 records of one input file for online work; (action, input file) for a batch
action), advances it with the same executor machinery ``agac run`` uses, and hands it
back. Nothing about the work lives in the worker: a shard's progress is its outcomes,
answers, batches and items in the store, so any worker can take it over.

- **Claims and fencing (S3).** A claim takes the shard's lease (``shard:<run>:<shard>``)
  with a new fencing token (store/claims.py); the shard's executor writes through its own
  gateway, fenced on that token, and renews the lease every ``ttl / 3``. A worker that
  lost its lease (paused longer than the TTL) has its next write refused and stops that
  shard; its calls in flight are asked again by the new owner (at most ``--concurrency``).
- **Concurrency.** ``--concurrency N`` bounds the model and tool calls in flight in this
  worker across all its shards (one semaphore over every action's slots); each action's
  ``max_concurrency`` still applies within the worker.
- **Batch shards.** The worker that holds (action, file) recovers that file's intents,
  submits its staged items, polls and reads its batches (engine/batch.py with
  ``only_file``), then hands the shard back until the next poll: exactly one worker polls
  a batch at a time, polling spreads over workers, and a takeover adopts what is out —
  the intents and batches are in the store, never only in the worker.
- **Shards wake each other.** An online shard that staged batch items or waits on a batch
  wakes its file's batch shards; a batch shard that read results wakes its file's online
  shards. Idle shards are looked at again every few minutes anyway.
- **Global rate limits.** ``rate_limit`` windows and ``batch_submissions_per_minute`` are
  one sliding window per key in the store (:class:`StoreRateLimiter`), not per process.
- **Finalization.** When a run's online shards are all done (or it is cancelling, or its
  deadline passed), a worker takes the run lease — which excludes shard claims and is
  refused while any shard lease is live — and ends the run exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.config.model import Workflow
from agac.engine.actions import is_batched
from agac.engine.approvals import ApprovalGate
from agac.engine.batch import BatchCoordinator
from agac.engine.budget import BudgetGuard, RunLedger
from agac.engine.closing import close_run
from agac.engine.executor import Executor, shard_ranges
from agac.engine.gateway import Lease, StoreGateway
from agac.engine.interrupts import StopSignal, install_interrupts
from agac.engine.limits import Slots
from agac.engine.marks import account_lost_calls
from agac.engine.runs import (
    _deadline_passed,
    _release,
    _time_out,
    finalize,
    finish_cancel,
    take_run_lease,
)
from agac.errors import AgacError, LeaseHeld, LeaseLost, StoreError, UsageError
from agac.providers.factory import open_providers
from agac.providers.pricing import PriceTable
from agac.store.claims import FINAL, IDLE, Claim
from agac.store.repository import dumps, loads

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = ["StoreRateLimiter", "Worker", "WorkerOptions", "WorkerReport", "shard_rows"]

SHARDS_PER_WORKER = 2
IDLE_SLICE = 0.5
"""Seconds an idle worker blocks in one wait for a NOTIFY (a signal is seen after it)."""
"""Shards a worker holds at once: one keeps the calls busy while the other starts or ends."""
RATE_WINDOW = float(os.environ.get("AGAC_RATE_WINDOW_SECONDS") or 60.0) + 1.0
"""The global window is a minute plus a second: requests admitted a minute apart can reach
the provider in a different order, and the provider's own window must never see more.
(``AGAC_RATE_WINDOW_SECONDS`` shortens the minute for tests against an emulator whose own
window is shortened the same way.)"""


@dataclass
class WorkerOptions:
    concurrency: int = 4
    lease_ttl: float = 30.0
    poll: float = 5.0
    """Seconds an idle worker waits for a NOTIFY before looking again by itself."""
    exit_when_done: bool = False
    """Exit once no run in the store is open (benchmarks, scripted fleets)."""
    handle_signals: bool = False
    log: Any = None
    """A callable taking one line for the operator (stderr in the CLI)."""


@dataclass
class WorkerReport:
    worker_id: str
    shards: int = 0
    claim_seconds: list[float] = field(default_factory=list)
    claim_db_seconds: list[float] = field(default_factory=list)
    lease_lost: list[str] = field(default_factory=list)
    finalized: list[str] = field(default_factory=list)
    stopped_by_signal: bool = False
    stopped_at_once: bool = False
    """A second signal stopped the worker at once (the CLI exits 130)."""

    def to_dict(self) -> dict[str, Any]:
        ms = sorted(s * 1000 for s in self.claim_seconds)
        db = sorted(s * 1000 for s in self.claim_db_seconds)
        return {
            "worker_id": self.worker_id, "shards": self.shards, "lease_lost": self.lease_lost,
            "finalized": self.finalized, "stopped_by_signal": self.stopped_by_signal,
            "stopped_at_once": self.stopped_at_once,
            "claim_ms": {"count": len(ms), "mean": round(sum(ms) / len(ms), 3) if ms else None,
                         "p50": round(ms[len(ms) // 2], 3) if ms else None,
                         "max": round(ms[-1], 3) if ms else None},
            "claim_db_ms": {"count": len(db), "mean": round(sum(db) / len(db), 3) if db else None,
                            "max": round(db[-1], 3) if db else None},
        }


def shard_rows(files: list[dict[str, Any]], config: dict[str, Any]) -> list[dict[str, Any]]:
    """A run's shards: online ranges of ≤1,000 records of a file, and (action, file) for
    every batch action."""
    rows: list[dict[str, Any]] = []
    by_start = {int(f["start"]): f for f in files}
    for lo, hi in shard_ranges(files):
        start = max(s for s in by_start if s <= lo)
        rows.append({"shard": f"o:{lo:010d}", "kind": "online", "file": by_start[start]["file"],
                     "lo": lo, "hi": hi})
    for action in config.get("actions", []):
        if action.get("kind", "llm") == "llm" and action.get("run_mode") == "batch":
            for f in files:
                start, count = int(f["start"]), int(f["count"])
                rows.append({"shard": f"b:{action['name']}:{f['file']}", "kind": "batch",
                             "action": action["name"], "file": f["file"], "lo": start,
                             "hi": start + count})
    return rows


class StoreRateLimiter:
    """The :class:`agac.engine.limits.RateLimiter` interface over a window in the store, so
    that every worker on the store shares one limit per key."""

    def __init__(self, store: Store, key: str, rpm: float | None, tpm: float | None) -> None:
        self.store = store
        self.key = key
        self.rpm = rpm
        self.tpm = tpm
        self.active = bool(rpm or tpm)

    async def acquire(self, tokens: int, stop: StopSignal | None = None) -> float | None:
        waited = 0.0
        while True:
            if stop is not None and stop.is_set:
                return None
            wait = await asyncio.to_thread(self.store.rate_take, self.key, window=RATE_WINDOW,
                                           rpm=self.rpm, tpm=self.tpm, tokens=tokens)
            if wait <= 0:
                return waited
            wait = min(wait, 2.0)  # others may have taken less than they asked: look again
            waited += wait
            if stop is None:
                await asyncio.sleep(wait)
            elif await stop.sleep(wait):
                return None

    def settle(self, estimated: int, actual: int) -> None:
        if self.tpm and actual != estimated:
            self.store.rate_adjust(self.key, actual - estimated)

    def loop_bound_elsewhere(self) -> bool:
        return False


class _SharedSpending:
    """The ledger read of an online shard's budget guard: what the run has spent (every
    worker's committed usage) and, about once a second, the batches it has out and
    whether a batch part was refused — another worker's batch shard may have submitted
    or refused one since this shard started."""

    BATCHES_EVERY = 1.0

    def __init__(self, guard: BudgetGuard, ledger: RunLedger, batches: Any, store: Store, run_id: str) -> None:
        self.guard = guard
        self.ledger = ledger
        self.batches = batches
        self.store = store
        self.run_id = run_id
        self.batches_at = time.monotonic()

    async def read(self) -> tuple[float, int]:
        spent = await asyncio.to_thread(self.ledger.read)
        if self.batches is not None and time.monotonic() - self.batches_at >= self.BATCHES_EVERY:
            self.batches_at = time.monotonic()
            held = await asyncio.to_thread(self.batches.open_reservations, self.guard.held)
            self.guard.replace_held(held)
            if await asyncio.to_thread(self.store.budget_refused, self.run_id):
                self.guard.exhausted = True
        return spent


class _Slots:
    """An action's own slots and the worker's, taken together (action first)."""

    def __init__(self, own: Slots, shared: Slots) -> None:
        self.own = own
        self.shared = shared

    async def __aenter__(self) -> None:
        await self.own.acquire()
        try:
            await self.shared.acquire()
        except BaseException:
            self.own.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.shared.release()
        self.own.release()


class _ShardBatches(BatchCoordinator):
    """A batch shard's coordinator: one action, one file, writes fenced on the shard lease,
    submissions paced by the store's window."""

    def __init__(self, ex: Executor, claim: Claim) -> None:
        super().__init__(ex)
        self.only_file = claim.file
        self.batch_rts = [rt for rt in self.batch_rts if rt.name == claim.action]
        self._claim = claim

    async def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        c = self._claim
        # Fence before every store call of the step: a worker that lost the shard stops here.
        await self.gateway.call(self.store.renew_lease, c.lease_name, c.token, c.ttl)
        return await self.gateway.call(fn, *args, **kw)

    def _pacer(self, rt: Any) -> Any:
        config = self.ex.provider_options.get(rt.action.provider or "")
        per_min = getattr(config, "batch_submissions_per_minute", None) if config else None
        if not per_min:
            return None
        return StoreRateLimiter(self.store, f"batch_submissions:{rt.action.provider}",
                                float(per_min), None)


@dataclass
class _RunContext:
    run: Row
    workflow: Workflow
    providers: dict[str, Any]
    prices: PriceTable
    files: list[dict[str, Any]]
    prior: str | None
    prior_failed: frozenset[str]
    slots: dict[str, _Slots]
    limiters: dict[str, StoreRateLimiter]


class Worker:
    def __init__(self, project: Project, store: Store, options: WorkerOptions) -> None:
        if store.dialect != "postgresql":
            raise UsageError(
                "agac worker needs a PostgreSQL store: workers coordinate through its row "
                "locks, leases and LISTEN/NOTIFY, which a SQLite file cannot share across "
                "machines; set AGAC_STORE=postgresql://user@host:5432/db (or `store:` in "
                "agac.yml), or run the workflow on this machine with `agac run`")
        self.project = project
        self.store = store
        self.options = options
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.id = f"{self.host}-{self.pid}-{secrets.token_hex(3)}"
        self.report = WorkerReport(self.id)
        self.stopping = False
        self._calls: Slots | None = None
        self._runs: dict[str, _RunContext] = {}
        self._active: set[Executor] = set()
        self._wake: asyncio.Event | None = None
        self._finalizing: asyncio.Lock | None = None

    def _log(self, line: str) -> None:
        if self.options.log is not None:
            self.options.log(f"worker {self.id}: {line}")

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> WorkerReport:
        try:
            asyncio.run(self._main())
        except asyncio.CancelledError:  # a second signal: stopped at once
            self.report.stopped_at_once = True
        return self.report

    def stop(self) -> None:
        """Stop claiming; shards held finish what is in flight and are handed back."""
        if self.stopping:
            return
        self.stopping = True
        for ex in list(self._active):
            ex.stop()
        if self._wake is not None:
            self._wake.set()

    async def _main(self) -> None:
        opts = self.options
        self._calls = Slots(max(1, opts.concurrency))
        self._wake = asyncio.Event()
        await asyncio.to_thread(self.store.register_worker, self.id, host=self.host, pid=self.pid,
                                concurrency=opts.concurrency, ttl=opts.lease_ttl)
        listener = await asyncio.to_thread(self.store.work_listener)
        loop = asyncio.get_running_loop()
        restore: Callable[[], None] | None = None
        if opts.handle_signals:
            def on_term() -> None:
                self.report.stopped_by_signal = True
                self._log("stopping: finishing the calls in flight, handing shards back "
                          "(again to stop at once)")
                self.stop()
            restore = install_interrupts(on_term, (signal.SIGTERM, signal.SIGINT))
        beat = loop.create_task(self._heartbeat())
        tasks: set[asyncio.Task[None]] = set()
        self._log(f"started (concurrency {opts.concurrency}, lease TTL {opts.lease_ttl:g} s)")
        try:
            while not self.stopping:
                await asyncio.to_thread(self._shard_new_runs)
                while len(tasks) < SHARDS_PER_WORKER and not self.stopping:
                    claim = await asyncio.to_thread(
                        self.store.claim_shard, worker=self.id, host=self.host, pid=self.pid,
                        ttl=opts.lease_ttl)
                    if claim is None:
                        break
                    self.report.claim_seconds.append(claim.seconds)
                    self.report.claim_db_seconds.append(claim.db_seconds)
                    self.report.shards += 1
                    tasks.add(loop.create_task(self._work(claim)))
                if tasks:
                    waker = loop.create_task(self._wake.wait())
                    done, _ = await asyncio.wait(tasks | {waker}, timeout=opts.poll,
                                                 return_when=asyncio.FIRST_COMPLETED)
                    waker.cancel()
                    self._wake.clear()
                    for task in done & tasks:
                        tasks.discard(task)
                        task.result()
                    continue
                await self._sweep()
                if opts.exit_when_done and not await asyncio.to_thread(self._any_open_run):
                    break
                await self._idle(listener, opts.poll)
        finally:
            self.stop()
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                # A second signal: stop at once; calls in flight are abandoned (the
                # dispatch marks keep them counted) and their shards' leases lapse.
                self.report.stopped_at_once = True
                for task in tasks:
                    task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, StoreError):
                await beat
            for ctx in self._runs.values():
                await self._close_providers(ctx)
            self._runs.clear()
            listener.close()
            with contextlib.suppress(StoreError):
                self.store.end_worker(self.id)
            if restore is not None:
                restore()
            self._log(f"stopped after {self.report.shards} shard claims")

    async def _idle(self, listener: Any, seconds: float) -> None:
        """Wait for a NOTIFY up to ``seconds``, in slices of at most half a second so a
        signal is acted on at once (a thread blocked in the wait would hold the exit)."""
        until = time.monotonic() + seconds
        while not self.stopping:
            left = until - time.monotonic()
            if left <= 0 or await asyncio.to_thread(listener.wait, min(left, IDLE_SLICE)):
                return

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.options.lease_ttl / 3)
            await asyncio.to_thread(self.store.worker_heartbeat, self.id, ttl=self.options.lease_ttl,
                                    state="stopping" if self.stopping else "running")

    def _any_open_run(self) -> bool:
        return bool(self.store.list_open_runs())

    def _shard_new_runs(self) -> None:
        """Cut runs admitted without shards (``agac run``, ``agac submit`` on an older
        worker) into shards; idempotent, so several workers may do it at once."""
        for run in self.store.runs_without_shards():
            info = self.store.snapshot_info(run.snapshot_id)
            if info is None or not info.complete:
                continue
            self.store.ensure_shards(run.id, shard_rows(loads(info.files), loads(run.config)))

    async def _sweep(self) -> None:
        """Finish runs whose work is done but that nobody ended (a worker died between its
        last shard and finalization, a cancel, a deadline passed while idle)."""
        for run in await asyncio.to_thread(self.store.list_open_runs):
            if not await asyncio.to_thread(self.store.has_shards, run.id):
                continue
            await self._maybe_finalize(run.id)

    # -- one shard ------------------------------------------------------------------------

    async def _work(self, claim: Claim) -> None:
        try:
            ctx = await self._context(claim.run_id)
            if claim.kind == "online":
                await self._online(ctx, claim)
            else:
                await self._batch(ctx, claim)
        except StoreError as exc:
            self._log(f"shard {claim.shard} of run {claim.run_id} stopped: {exc.message}")
            await asyncio.to_thread(self._hand_back, claim, 0.0)
        except AgacError as exc:
            # e.g. a provider this worker has no key for: another worker may have it; this
            # one looks again later instead of taking the shard back at once.
            self._log(f"cannot work on shard {claim.shard} of run {claim.run_id}: {exc.message}")
            await asyncio.to_thread(self._hand_back, claim, time.time() + self.options.poll * 6)
            return
        await self._maybe_finalize(claim.run_id)

    def _hand_back(self, claim: Claim, ready_at: float) -> None:
        with contextlib.suppress(StoreError):
            if not self.store.release_shard(claim, state="todo", ready_at=ready_at):
                self._lost(claim)

    def _lost(self, claim: Claim) -> None:
        self.report.lease_lost.append(f"{claim.run_id}:{claim.shard}")
        self._log(f"lost the lease of shard {claim.shard} of run {claim.run_id} (taken over by "
                  "another worker); its write was refused and the shard stopped here")
        with contextlib.suppress(StoreError):
            self.store.checkpoint(lease=None, events=[{
                "run_id": claim.run_id, "kind": "shard_lease_lost", "action": claim.action,
                "unit_key": None, "created_at": time.time(),
                "data": dumps({"worker": self.id, "shard": claim.shard, "token": claim.token})}])

    async def _context(self, run_id: str) -> _RunContext:
        run = await asyncio.to_thread(self.store.get_run, run_id)
        assert run is not None
        ctx = self._runs.get(run_id)
        if ctx is not None:
            ctx.run = run
            return ctx
        workflow = Workflow.from_snapshot(loads(run.config))
        llm = {a.provider for a in workflow.actions if a.kind == "llm" and a.provider}
        providers = open_providers(llm, self.project.config)
        info = await asyncio.to_thread(self.store.snapshot_info, run.snapshot_id)
        assert info is not None
        prior = (loads(run.options) or {}).get("prior")
        states = await asyncio.to_thread(self.store.action_states, prior) if prior else {}
        assert self._calls is not None
        slots = {a.name: _Slots(Slots(max(1, a.max_concurrency)), self._calls)
                 for a in workflow.actions}
        limiters = {}
        for a in workflow.actions:
            rl = a.rate_limit
            if a.kind == "llm" and rl is not None and (rl.rpm or rl.tpm):
                key = f"{a.model or a.name}|rpm={rl.rpm}|tpm={rl.tpm}"
                limiters[a.name] = StoreRateLimiter(self.store, key, rl.rpm, rl.tpm)
        ctx = _RunContext(run, workflow, providers,
                          PriceTable(dict(self.project.config.prices) if self.project.config else {}),
                          loads(info.files), prior,
                          frozenset(a for a, (s, _) in states.items() if s == "failed"),
                          slots, limiters)
        self._runs[run_id] = ctx
        if run.state in ("queued", "waiting"):
            await asyncio.to_thread(self.store.update_run, run_id, state="running")
        return ctx

    async def _close_providers(self, ctx: _RunContext) -> None:
        for p in ctx.providers.values():
            with contextlib.suppress(Exception):
                await p.aclose()

    def _executor(self, ctx: _RunContext, claim: Claim, gateway: StoreGateway) -> Executor:
        run = ctx.run
        if claim.kind == "online":
            # S1/§8: calls a previous holder of this shard may have sent and never settled
            account_lost_calls(self.store, run, shards=[claim.shard],
                               lease=(claim.lease_name, claim.token, claim.ttl))
        ex = Executor(
            run_id=run.id, workflow=ctx.workflow, store=self.store, gateway=gateway,
            providers=ctx.providers, prices=ctx.prices, root=self.project.root,
            snapshot_files=ctx.files, fresh=bool(run.fresh), prior_run_id=ctx.prior,
            prior_failed_actions=ctx.prior_failed,
            provider_options=dict(self.project.config.providers) if self.project.config else {},
        )
        ex.snapshot_id = run.snapshot_id
        ex.run_row = run
        ex.unpriced = self.store.unpriced_unknown(ctx.workflow.name)
        opts = loads(run.options) or {}
        ex.deadline_at = opts.get("deadline_at")
        ex.heartbeat_seconds = claim.ttl / 3
        ex.ranges = [(claim.lo, claim.hi)] if claim.kind == "online" else []
        for rt in ex.runtimes:
            rt.slots = ctx.slots[rt.name]  # type: ignore[assignment]
            if rt.name in ctx.limiters:
                rt.limiter = ctx.limiters[rt.name]  # type: ignore[assignment]
        if any(is_batched(rt) for rt in ex.runtimes):
            ex.batch = _ShardBatches(ex, claim) if claim.kind == "batch" else BatchCoordinator(ex)
        if any(a.approval is not None for a in ctx.workflow.actions):
            ex.approvals = ApprovalGate(ex, self.project)  # A1 holds in every shard
            ex.approvals.begin_pass()
        if opts.get("budget"):
            ex.budget = BudgetGuard(opts["budget"].get("usd"), opts["budget"].get("tokens"), ex.prices)
            held = ex.batch.open_reservations() if ex.batch is not None else {}
            ex.budget.sync(self.store, run, held)
            # Exhausted in one shard is exhausted in all, as in one process: a batch part
            # refused elsewhere must not be staged again here, and again, for ever.
            ex.budget.exhausted = self.store.budget_refused(run.id)
            if claim.kind == "online":
                # other workers spend from the same budget: read the run's ledger (and the
                # batches out) before each reservation (R5; see docs/architecture.md)
                ex.budget.ledger = _SharedSpending(ex.budget, RunLedger(self.store, run), ex.batch,
                                                   self.store, run.id).read
        return ex

    async def _online(self, ctx: _RunContext, claim: Claim) -> None:
        gateway = StoreGateway(self.store, Lease(claim.lease_name, claim.token, claim.ttl))
        gateway.start()
        ex = await asyncio.to_thread(self._executor, ctx, claim, gateway)
        self._active.add(ex)
        if self.stopping:
            ex.stop()
        complete = False
        try:
            await ex.event("shard_claimed", worker=self.id, shard=claim.shard, pid=self.pid,
                           host=self.host)
            complete = await ex.execute(ctx.run.snapshot_id)
            for rt in ex.runtimes:
                if rt.stopped:
                    await gateway.call(self.store.set_action_state, ctx.run.id, rt.name, "failed",
                                       rt.stopped)
            await gateway.flush()
            # every call this shard sent has settled: what its marks still list was not sent
            await gateway.call(self.store.clear_marks, ctx.run.id, [claim.shard], gateway.fence)
        except StoreError as exc:
            ex.stop()
            complete = False
            if not isinstance(exc, LeaseLost) and not isinstance(gateway.broken, LeaseLost):
                self._log(f"shard {claim.shard} of run {claim.run_id}: {exc.message}")
        finally:
            self._active.discard(ex)
            await gateway.close()
        halt = ex.approvals.halt if ex.approvals is not None else None
        if complete and halt is None:
            if not await asyncio.to_thread(self.store.release_shard, claim, state="done", ready_at=0.0):
                await asyncio.to_thread(self._lost, claim)
            return
        if halt is not None:  # a decision ends the run (approval on_reject: fail_run, ...)
            await asyncio.to_thread(self._hand_back, claim, 0.0)
            await asyncio.to_thread(self._halt, claim.run_id, *halt)
            return
        if ex.stopping:
            await asyncio.to_thread(self._hand_back, claim, 0.0)
            return
        # Units wait on batches, a person or an effect: look again when woken.
        await asyncio.to_thread(self._hand_back, claim, time.time() + IDLE)
        if ex.batch is not None:
            await asyncio.to_thread(self.store.wake_shards, claim.run_id, kind="batch", file=claim.file)

    async def _batch(self, ctx: _RunContext, claim: Claim) -> None:
        gateway = StoreGateway(self.store, Lease(claim.lease_name, claim.token, claim.ttl))
        gateway.start()
        ex = await asyncio.to_thread(self._executor, ctx, claim, gateway)
        batches = ex.batch
        ready_at = time.time() + IDLE
        try:
            if not isinstance(batches, _ShardBatches) or not batches.batch_rts:
                await gateway.close()
                await asyncio.to_thread(self.store.release_shard, claim, state="done", ready_at=0.0)
                return
            await ex.event("shard_claimed", worker=self.id, shard=claim.shard, pid=self.pid,
                           host=self.host)
            beat = asyncio.get_running_loop().create_task(self._renew(claim, gateway))
            try:
                report = await batches.step()
            finally:
                beat.cancel()
                with contextlib.suppress(asyncio.CancelledError, StoreError):
                    await beat
            await gateway.flush()
            rt = batches.batch_rts[0]
            still_out = [b for b in await gateway.call(self.store.list_batches, ctx.workflow.name,
                                                       open_only=True, action=rt.name)
                         if b.file == claim.file]
            if still_out:
                ready_at = time.time() + report.poll_interval
            if report.progressed:
                await asyncio.to_thread(self.store.wake_shards, claim.run_id, kind="online",
                                        file=claim.file)
        except StoreError as exc:
            if isinstance(exc, LeaseLost) or isinstance(gateway.broken, LeaseLost):
                await gateway.close()
                await asyncio.to_thread(self._lost, claim)
                return
            raise
        finally:
            await gateway.close()
        await asyncio.to_thread(self._hand_back, claim, ready_at)

    async def _renew(self, claim: Claim, gateway: StoreGateway) -> None:
        while True:
            await asyncio.sleep(claim.ttl / 3)
            await gateway.call(self.store.renew_lease, claim.lease_name, claim.token, claim.ttl)

    # -- finalization -----------------------------------------------------------------------

    async def _maybe_finalize(self, run_id: str) -> None:
        run = await asyncio.to_thread(self.store.get_run, run_id)
        if run is None:
            return
        if run.state in FINAL:
            await self._forget(run_id)
            return
        left = await asyncio.to_thread(self.store.shards_left, run_id)
        if left and run.state != "cancelling" and not _deadline_passed(run):
            return
        if self._finalizing is None:
            self._finalizing = asyncio.Lock()
        async with self._finalizing:  # the run lease is per process: one finalizer at a time here
            ended = await asyncio.to_thread(self._finalize, run_id)
        if ended:
            self.report.finalized.append(run_id)
            self._log(f"run {run_id} ended {ended}")
            await self._forget(run_id)

    async def _forget(self, run_id: str) -> None:
        ctx = self._runs.pop(run_id, None)
        if ctx is not None:
            await self._close_providers(ctx)

    def _halt(self, run_id: str, state: str, why: str) -> None:
        """End the run ``state`` because a person's decision says so (as ``agac run`` does)."""
        try:
            lease = take_run_lease(self.store, run_id, wait=False)
        except LeaseHeld:
            return  # shards still held: the run ends when they are handed back and it is retried
        try:
            run = self.store.get_run(run_id)
            if run is not None and run.state not in FINAL:
                close_run(self.store, run, state, why, reason="run_ended")
                self.store.close_shards(run_id)
        finally:
            _release(self.store, lease)

    def _finalize(self, run_id: str) -> str | None:
        """End the run under its run lease (no shard lease may be live); the final state,
        or None when it is not ours to end now."""
        try:
            lease = take_run_lease(self.store, run_id, wait=False)
        except LeaseHeld:
            return None  # a shard is still held, or another process ends it
        try:
            run = self.store.get_run(run_id)
            if run is None or run.state in FINAL:
                return None
            if run.state == "cancelling":
                finish_cancel(self.project, self.store, run)
            elif _deadline_passed(run):
                _time_out(self.store, run)
            elif self.store.shards_left(run_id) == 0:
                finalize(self.store, run_id)
            run = self.store.get_run(run_id)
            if run is None or run.state not in FINAL:
                return None
            self.store.close_shards(run_id)
            return str(run.state)
        finally:
            _release(self.store, lease)


def print_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- the library side of submit, workers and status -----------------------------------------


def submit_run(project: Project, store: Store, workflow: Workflow, options: Any, *,
               overrides: dict[str, Any], reload: Any) -> dict[str, Any]:
    """``agac submit``: the same admission as ``agac run`` (R1 continuation, ``--new``,
    the budget estimate, the input snapshot), then shards for workers and a NOTIFY; nothing
    is executed here."""
    from agac.engine.runs import open_or_admit

    run, notes = open_or_admit(project, store, workflow, options, overrides=overrides, reload=reload)
    info = store.snapshot_info(run.snapshot_id)
    assert info is not None
    created = store.ensure_shards(run.id, shard_rows(loads(info.files), loads(run.config)))
    store.notify_work()
    return {"run_id": run.id, "workflow": run.workflow, "state": run.state,
            "records": int(info.record_count), "shards": created, "notes": notes}


def list_workers(store: Store, *, include_stopped: bool = False) -> list[dict[str, Any]]:
    """Live workers (or every worker seen), what each holds and its last heartbeat."""
    out = []
    now = time.time()
    for w, held in store.list_workers(live_only=not include_stopped):
        out.append({"worker_id": w.id, "host": w.host, "pid": w.pid, "state": w.state,
                    "concurrency": w.concurrency, "started_at": w.started_at,
                    "heartbeat_at": w.heartbeat_at, "heartbeat_age_s": round(now - w.heartbeat_at, 3),
                    "live": w.expires_at > now,
                    "holds": [{"run_id": h.run_id, "shard": h.shard, "kind": h.kind,
                               "lease_expires_at": h.expires_at} for h in held]})
    return out


def shard_view(store: Store, run_id: str) -> list[dict[str, Any]]:
    """A run's shards for ``agac status``: state, owner (live lease) or last owner."""
    now = time.time()
    out = []
    for s in store.shard_owners(run_id):
        live = s.expires_at is not None and s.expires_at > now
        out.append({"shard": s.shard, "kind": s.kind, "action": s.action, "file": s.file,
                    "records": [s.lo, s.hi], "state": "held" if live else s.state,
                    "owner": s.owner if live else None, "last_owner": s.owner,
                    "owner_host": s.host if live else None, "owner_pid": s.pid if live else None,
                    "claims": s.claims})
    return out
