"""Scale-out workers (``agac worker``): many stateless processes on one PostgreSQL.

A worker loops: it claims a ready shard of any open run (docs/getting-started.md: a range of at most
1,000 records of one input file for online work; (action, input file) for a batch
action), advances it with the same assembly ``agac run`` uses (engine/workers/shards.py),
and hands it back. Nothing about the work lives in the worker: a shard's progress is its
outcomes, answers, batches and items in the store, so any worker can take it over.

- **Claims and fencing (S3).** A claim takes the shard's lease (``shard:<run>:<shard>``)
  with a new fencing token (store/claims.py); the shard's parts write through their own
  gateway, fenced on that token, and renew the lease every ``ttl / 3``. A worker that
  lost its lease (paused longer than the TTL) has its next write refused and stops that
  shard; its calls in flight are asked again by the new owner (at most ``--concurrency``).
- **Concurrency.** ``--concurrency N`` bounds the model and tool calls in flight in this
  worker across all its shards (one semaphore over every action's slots); each action's
  ``max_concurrency`` still applies within the worker.
- **Batch shards.** The worker that holds (action, file) recovers that file's intents,
  submits its staged items, polls and reads its batches, then hands the shard back until
  the next poll: exactly one worker polls a batch at a time, polling spreads over workers,
  and a takeover adopts what is out — the intents and batches are in the store, never
  only in the worker.
- **Shards wake each other.** An online shard that staged batch items or waits on a batch
  wakes its file's batch shards; a batch shard that read results wakes its file's online
  shards. Idle shards are looked at again every few minutes anyway.
- **Global rate limits.** ``rate_limit`` windows and ``batch_submissions_per_minute`` are
  one sliding window per key in the store (engine/workers/rates.py), not per process.
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
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agac.engine.graph import run_graph
from agac.engine.interrupts import install_interrupts
from agac.engine.lifecycle.assembly import prior_run, snapshot_files
from agac.engine.lifecycle.closing import close_run, run_event
from agac.engine.lifecycle.contextcaches import release_context_caches
from agac.engine.lifecycle.ending import finalize, finish_cancel, time_out
from agac.engine.lifecycle.leases import release_lease, take_run_lease
from agac.engine.limits.rates import Slots, batch_providers, connections_by_provider
from agac.engine.workers.fleet import shard_rows
from agac.engine.workers.rates import StoreRateLimiter, WorkerSlots
from agac.engine.workers.shards import RunContext, ShardOutcome, advance_batch, advance_online
from agac.errors import AgacError, LeaseHeld, StoreError, UsageError
from agac.jsontext import loads
from agac.providers.factory import open_providers
from agac.store.values import FINAL_STATES

if TYPE_CHECKING:
    from agac.config.project import Project
    from agac.engine.values import RunControl
    from agac.store.claims import Claim, WorkListener
    from agac.store.repository import Store

__all__ = ["Worker", "WorkerOptions", "WorkerReport", "print_line"]

SHARDS_PER_WORKER = 2
"""Shards a worker holds at once: one keeps the calls busy while the other starts or ends."""
IDLE_SLICE = 0.5
"""Seconds an idle worker blocks in one wait for a NOTIFY (a signal is seen after it)."""


@dataclass
class WorkerOptions:
    concurrency: int = 4
    lease_ttl: float = 30.0
    poll: float = 5.0
    """Seconds an idle worker waits for a NOTIFY before looking again by itself."""
    exit_when_done: bool = False
    """Exit once no run in the store is open (benchmarks, scripted fleets)."""
    handle_signals: bool = False
    log: Callable[[str], None] | None = None
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
            "worker_id": self.worker_id,
            "shards": self.shards,
            "lease_lost": self.lease_lost,
            "finalized": self.finalized,
            "stopped_by_signal": self.stopped_by_signal,
            "stopped_at_once": self.stopped_at_once,
            "claim_ms": {
                "count": len(ms),
                "mean": round(sum(ms) / len(ms), 3) if ms else None,
                "p50": round(ms[len(ms) // 2], 3) if ms else None,
                "max": round(ms[-1], 3) if ms else None,
            },
            "claim_db_ms": {
                "count": len(db),
                "mean": round(sum(db) / len(db), 3) if db else None,
                "max": round(db[-1], 3) if db else None,
            },
        }


class Worker:
    def __init__(self, project: Project, store: Store, options: WorkerOptions) -> None:
        if not store.shares_work:
            raise UsageError(
                "agac worker needs a PostgreSQL store: workers coordinate through its row "
                "locks, leases and LISTEN/NOTIFY, which a SQLite file cannot share across "
                "machines; set AGAC_STORE=postgresql://user@host:5432/db (or `store:` in "
                "agac.yml), or run the workflow on this machine with `agac run`"
            )
        self.project = project
        self.store = store
        self.options = options
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.id = f"{self.host}-{self.pid}-{secrets.token_hex(3)}"
        self.report = WorkerReport(self.id)
        self.stopping = False
        self._calls: Slots | None = None
        self._runs: dict[str, RunContext] = {}
        self._active: set[RunControl] = set()
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
        for control in list(self._active):
            control.stop()
        if self._wake is not None:
            self._wake.set()

    async def _main(self) -> None:
        opts = self.options
        self._calls = Slots(max(1, opts.concurrency))
        self._wake = asyncio.Event()
        await asyncio.to_thread(
            self.store.register_worker,
            self.id,
            host=self.host,
            pid=self.pid,
            concurrency=opts.concurrency,
            ttl=opts.lease_ttl,
        )
        listener = await asyncio.to_thread(self.store.work_listener)
        loop = asyncio.get_running_loop()
        restore: Callable[[], None] | None = None
        if opts.handle_signals:

            def on_term() -> None:
                self.report.stopped_by_signal = True
                self._log(
                    "stopping: finishing the calls in flight, handing shards back "
                    "(again to stop at once)"
                )
                self.stop()

            restore = install_interrupts(on_term, (signal.SIGTERM, signal.SIGINT))
        beat = loop.create_task(self._heartbeat())
        tasks: set[asyncio.Task[None]] = set()
        self._log(f"started (concurrency {opts.concurrency}, lease TTL {opts.lease_ttl:g} s)")
        try:
            await self._claim_loop(tasks, listener)
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

    async def _claim_loop(self, tasks: set[asyncio.Task[None]], listener: WorkListener) -> None:
        """Rounds of claiming until stopped (or, with ``exit_when_done``, no run is open)."""
        while not self.stopping:
            try:
                if not await self._round(tasks, listener):
                    return
            except StoreError as exc:
                # Looking for work writes no progress: a connection the server dropped (a
                # paused worker's, say) is tried again after the poll, not the worker's end.
                poll = self.options.poll
                self._log(f"cannot look for work: {exc.message}; looking again in {poll:g} s")
                await self.store.clock.sleep(poll)

    async def _round(self, tasks: set[asyncio.Task[None]], listener: WorkListener) -> bool:
        """Claim up to two shards and advance them; when there is nothing to claim, finish
        what nobody ended and wait for a NOTIFY (or ``--poll`` seconds). False: stop."""
        opts = self.options
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        await asyncio.to_thread(self._shard_new_runs)
        while len(tasks) < SHARDS_PER_WORKER and not self.stopping:
            claim = await asyncio.to_thread(
                self.store.claim_shard,
                worker=self.id,
                host=self.host,
                pid=self.pid,
                ttl=opts.lease_ttl,
            )
            if claim is None:
                break
            self.report.claim_seconds.append(claim.seconds)
            self.report.claim_db_seconds.append(claim.db_seconds)
            self.report.shards += 1
            tasks.add(loop.create_task(self._work(claim)))
        if tasks:
            waker = loop.create_task(self._wake.wait())
            done, _ = await asyncio.wait(
                tasks | {waker}, timeout=opts.poll, return_when=asyncio.FIRST_COMPLETED
            )
            waker.cancel()
            self._wake.clear()
            for task in done & tasks:
                tasks.discard(task)
                task.result()
            return True
        await self._sweep()
        if opts.exit_when_done and not await asyncio.to_thread(self._any_open_run):
            return False
        await self._idle(listener, opts.poll)
        return True

    async def _idle(self, listener: WorkListener, seconds: float) -> None:
        """Wait for a NOTIFY up to ``seconds``, in slices of at most half a second so a
        signal is acted on at once (a thread blocked in the wait would hold the exit)."""
        clock = self.store.clock
        until = clock.monotonic() + seconds
        while not self.stopping:
            left = until - clock.monotonic()
            if left <= 0 or await asyncio.to_thread(listener.wait, min(left, IDLE_SLICE)):
                return

    async def _heartbeat(self) -> None:
        while True:
            await self.store.clock.sleep(self.options.lease_ttl / 3)
            await asyncio.to_thread(
                self.store.worker_heartbeat,
                self.id,
                ttl=self.options.lease_ttl,
                state="stopping" if self.stopping else "running",
            )

    def _any_open_run(self) -> bool:
        return bool(self.store.list_open_runs())

    def _shard_new_runs(self) -> None:
        """Cut runs admitted without shards (``agac run``, ``agac submit`` on an older
        worker) into shards; idempotent, so several workers may do it at once."""
        for run in self.store.runs_without_shards():
            info = self.store.snapshot_info(run.snapshot_id)
            if info is None or not info.complete:
                continue
            self.store.ensure_shards(run.id, shard_rows(loads(info.files), run_graph(run)))

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
                outcome = await advance_online(
                    self.project,
                    self.store,
                    ctx,
                    claim,
                    worker=self.id,
                    started=self._started,
                    ended=self._active.discard,
                )
            else:
                outcome = await advance_batch(self.project, self.store, ctx, claim, worker=self.id)
            await asyncio.to_thread(self._settle_shard, claim, outcome)
        except StoreError as exc:
            self._log(f"shard {claim.shard} of run {claim.run_id} stopped: {exc.message}")
            await asyncio.to_thread(self._hand_back, claim, 0.0)
        except AgacError as exc:
            # e.g. a provider this worker has no key for: another worker may have it; this
            # one looks again later instead of taking the shard back at once.
            self._log(f"cannot work on shard {claim.shard} of run {claim.run_id}: {exc.message}")
            await asyncio.to_thread(
                self._hand_back, claim, self.store.clock.time() + self.options.poll * 6
            )
            return
        await self._maybe_finalize(claim.run_id)

    def _started(self, control: RunControl) -> None:
        self._active.add(control)
        if self.stopping:
            control.stop()

    def _settle_shard(self, claim: Claim, outcome: ShardOutcome) -> None:
        """Act on what advancing the shard came to (in a thread)."""
        for line in outcome.log:
            self._log(line)
        if outcome.kind == "lost":
            self._lost(claim)
            return
        if outcome.kind == "done":
            if not self.store.release_shard(claim, state="done", ready_at=0.0):
                self._lost(claim)
            return
        self._hand_back(claim, outcome.ready_at)
        if outcome.kind == "halt" and outcome.halt is not None:
            self._halt(claim.run_id, outcome.halt.state, outcome.halt.why)
        elif outcome.wake is not None:
            self.store.wake_shards(claim.run_id, kind=outcome.wake, file=claim.file)

    def _hand_back(self, claim: Claim, ready_at: float) -> None:
        with contextlib.suppress(StoreError):
            if not self.store.release_shard(claim, state="todo", ready_at=ready_at):
                self._lost(claim)

    def _lost(self, claim: Claim) -> None:
        self.report.lease_lost.append(f"{claim.run_id}:{claim.shard}")
        self._log(
            f"lost the lease of shard {claim.shard} of run {claim.run_id} (taken over by "
            "another worker); its write was refused and the shard stopped here"
        )
        with contextlib.suppress(StoreError):
            self.store.checkpoint(
                run_event(
                    claim.run_id,
                    "shard_lease_lost",
                    {"worker": self.id, "shard": claim.shard, "token": claim.token},
                    self.store.clock.time(),
                    action=claim.action,
                )
            )

    async def _context(self, run_id: str) -> RunContext:
        run = await asyncio.to_thread(self.store.get_run, run_id)
        assert run is not None
        ctx = self._runs.get(run_id)
        if ctx is not None:
            ctx = self._runs[run_id] = replace(ctx, run=run)
            return ctx
        workflow = run_graph(run).workflow
        llm = set(workflow.providers)
        providers = open_providers(
            llm,
            self.project.config,
            connections=connections_by_provider(workflow.actions),
            batch=batch_providers(workflow.actions),
        )
        files = await asyncio.to_thread(snapshot_files, self.store, run)
        prior = await asyncio.to_thread(prior_run, self.store, run)
        assert self._calls is not None
        slots = {
            a.name: WorkerSlots(Slots(max(1, a.max_concurrency)), self._calls)
            for a in workflow.actions
        }
        limiters = {}
        for a in workflow.actions:
            rl = a.rate_limit
            if a.kind == "llm" and rl is not None and (rl.rpm or rl.tpm):
                key = f"{a.model or a.name}|rpm={rl.rpm}|tpm={rl.tpm}"
                limiters[a.name] = StoreRateLimiter(self.store, key, rl.rpm, rl.tpm)
        ctx = RunContext(run, workflow, dict(providers), files, prior, slots, limiters)
        self._runs[run_id] = ctx
        if run.state in ("queued", "waiting"):
            await asyncio.to_thread(self.store.update_run, run_id, state="running")
        return ctx

    async def _close_providers(self, ctx: RunContext) -> None:
        for p in ctx.providers.values():
            with contextlib.suppress(Exception):
                await p.aclose()

    # -- finalization -----------------------------------------------------------------------

    async def _maybe_finalize(self, run_id: str) -> None:
        run = await asyncio.to_thread(self.store.get_run, run_id)
        if run is None:
            return
        if run.state in FINAL_STATES:
            await self._forget(run_id)
            return
        left = await asyncio.to_thread(self.store.shards_left, run_id)
        if left and run.state != "cancelling" and not run.deadline_passed(self.store.clock.time()):
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
            if run is not None and run.state not in FINAL_STATES:
                close_run(self.store, run, state, why, reason="run_ended")
                self.store.close_shards(run_id)
                release_context_caches(self.project, self.store, run_id)
        finally:
            release_lease(self.store, lease)

    def _finalize(self, run_id: str) -> str | None:
        """End the run under its run lease (no shard lease may be live); the final state,
        or None when it is not ours to end now."""
        try:
            lease = take_run_lease(self.store, run_id, wait=False)
        except LeaseHeld:
            return None  # a shard is still held, or another process ends it
        try:
            run = self.store.get_run(run_id)
            if run is None or run.state in FINAL_STATES:
                return None
            if run.state == "cancelling":
                finish_cancel(self.project, self.store, run)
            elif run.deadline_passed(self.store.clock.time()):
                time_out(self.store, run)
            elif self.store.shards_left(run_id) == 0:
                finalize(self.store, run_id)
            run = self.store.get_run(run_id)
            if run is None or run.state not in FINAL_STATES:
                return None
            self.store.close_shards(run_id)
            release_context_caches(self.project, self.store, run_id)
            return str(run.state)
        finally:
            release_lease(self.store, lease)


def print_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
