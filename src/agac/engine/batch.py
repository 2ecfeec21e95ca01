"""The batch executor: provider batch APIs under the rules B0-B12 (DESIGN §6).

How a batch action runs inside a run (see also docs/architecture.md):

1. The online pass walks every record as usual. A unit of a batch action that needs a
   call is *staged* (a ``batch_items`` row under ``staged:<run>:<action>:<file>``) unless
   an open batch already holds its fingerprint (adoption, B0/B3); the record stops there.
2. :meth:`BatchCoordinator.step` then, per batch action in topological order:
   recovers intents left ``submitting``/``unknown`` by a crash (B2, ``find_batch``);
   submits every input file whose units are all settled, staged or out (B1), split only
   by the provider's limits, intent first (S1), paced (B12); and, once every file of the
   action is out or has nothing to send (B4), polls each open batch (B5, B8, B9, B11
   deadline) and reads the ended ones (B6) or fails the records of those that failed,
   expired or were cancelled (B7).
3. Whatever was read becomes answers (by fingerprint) and item results; the next online
   pass settles the units from them and stages retry items (B6). The run repeats passes
   until no step makes progress, then pauses (exit 75) while batches are out.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.engine.actions import is_batched
from agac.engine.crashpoints import maybe_crash
from agac.engine.fanout import expected_units
from agac.engine.ingest import ingest_batch
from agac.engine.limits import RateLimiter
from agac.errors import ProviderError, RetryableError, WaitError
from agac.providers.base import BatchHandle, Message, Request
from agac.store.batches import OPEN_BATCH_STATES, staged_key
from agac.store.repository import dumps, loads

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agac.engine.actions import ActionRuntime
    from agac.engine.executor import Executor

__all__ = ["BatchCoordinator", "StepReport", "request_from_json"]

_B7_REASON = {"failed": "batch_failed", "expired": "batch_expired", "cancelled": "batch_cancelled"}


def request_from_json(text: str, custom_id: str) -> Request:
    d = loads(text)
    return Request(
        provider=d["provider"], model=d["model"],
        messages=tuple(Message(m["role"], m["content"]) for m in d["messages"]),
        max_tokens=d["max_tokens"], temperature=d.get("temperature"), schema=d.get("schema"),
        seed=d.get("seed"), custom_id=custom_id,
    )


@dataclass
class StepReport:
    """``progressed``: something a unit can act on happened (results read, records failed),
    so the run makes another online pass; submitting or adopting a batch is not that."""

    progressed: bool = False
    waiting: list[str] = field(default_factory=list)
    poll_interval: float = 300.0


class BatchCoordinator:
    """Submits, adopts, polls and reads the batches of one run's batch actions."""

    def __init__(self, ex: Executor) -> None:
        self.ex = ex
        self.store = ex.store
        self.gateway = ex.gateway
        self.run_id = ex.run_id
        self.workflow = ex.workflow.name
        self.batch_rts = [rt for rt in ex.runtimes if is_batched(rt)]
        self._pacers: dict[str, RateLimiter] = {}
        self._unreachable: dict[str, str] = {}
        self.only_file: str | None = None
        """A worker's batch shard (action, file): submit, recover, poll and read only this
        file's batches; B4 still looks at every file of the action."""

    # -- the step -----------------------------------------------------------------------

    async def step(self) -> StepReport:
        report = StepReport()
        if self.ex.budget is not None:
            # Nothing is in flight between passes: what was spent and what is still out
            # are read again from the store (batches read since are settled).
            held = await self._call(self.open_reservations)
            await self._call(self.ex.budget.sync, self.store, self.ex.run_row, held)
        intervals = [rt.action.poll_interval or 300.0 for rt in self.batch_rts]
        report.poll_interval = min(intervals) if intervals else 300.0
        for rt in self.batch_rts:
            await self._recover_intents(rt, report)
            all_sent = await self._submit_ready_files(rt, report)
            if rt.name in self.ex.refused_actions:
                continue  # B2: the action fails; the batches of its other files stay out (B0)
            if not all_sent:
                report.waiting.append(f"{rt.name}: waiting until every input file can be sent (B4)")
                continue
            await self._cancel_unneeded(rt)
            await self._poll_and_collect(rt, report)
            await self._fail_if_every_file_unread(rt)
        return report

    async def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        return await self.gateway.call(fn, *args, **kw)

    async def _event(self, kind: str, action: str, **data: Any) -> None:
        await self.ex.event(kind, action, None, **data)

    # -- submission -----------------------------------------------------------------------

    async def _submit_ready_files(self, rt: ActionRuntime, report: StepReport) -> bool:
        """Submit each file whose units are all accounted for; True when every file is out
        or has nothing left to send (B4)."""
        prefix = f"staged:{self.run_id}:{rt.name}:"
        counts = await self._call(self.store.group_counts, self.workflow, rt.name, prefix)
        all_sent = True
        refused: list[str] = []
        for f in self.ex.files:
            name, lo, n = f["file"], int(f["start"]), int(f["count"])
            settled = await self._call(self.store.count_action_outcomes_between, self.run_id,
                                       rt.name, lo, lo + n)
            c = counts.get(name, {"staged": 0, "open": 0})
            fanout = self.ex.fanout
            if fanout is not None and fanout.per_item(rt.name):
                # Inside a fan-out a file holds one unit per item (DESIGN §11).
                totals = await self._call(self.store.fanout_totals, self.run_id, lo, lo + n)
                n = expected_units(fanout.regions, rt.name, n, totals)
            if settled + c["staged"] + c["open"] < n:
                all_sent = False  # some records have not reached this action yet
                continue
            if c["staged"] and self.only_file is not None and name != self.only_file:
                all_sent = False  # another shard's file, not out yet
                continue
            if c["staged"]:
                ok = await self._submit_file(rt, name, report)
                if ok is False:
                    refused.append(name)
                    report.progressed = True
        if refused:
            await self._call(self.store.set_action_state, self.run_id, rt.name, "failed",
                             f"batch refused for {', '.join(refused)}")
            self.ex.refused_actions.add(rt.name)
        return all_sent

    async def _submit_file(self, rt: ActionRuntime, file: str, report: StepReport) -> bool | None:
        """Create the intents of one file's staged items and submit them. False if refused."""
        staged = staged_key(self.run_id, rt.name, file)
        parts = await self._call(self._plan_parts, rt, staged, file)
        held: dict[str, Any] = {}
        if self.ex.budget is not None:
            parts, held = await self._reserve_parts(rt, staged, parts, report)
        await self._call(self.store.create_intents, staged, parts)
        await self.gateway.durable()  # S1: the intents are stored before anything is sent
        refused = False
        for row, _ in parts:
            if self.ex.budget is not None and row["key"] in held:
                self.ex.budget.hold(row["key"], held[row["key"]])
            outcome = await self._submit(rt, row["key"], report)
            refused = refused or outcome == "refused"
        return not refused

    async def _reserve_parts(self, rt: ActionRuntime, staged: str,
                             parts: list[tuple[dict[str, Any], list[str]]], report: StepReport,
                             ) -> tuple[list[tuple[dict[str, Any], list[str]]], dict[str, Any]]:
        """R5: reserve each part's worst case at the batch tier before it is submitted. A
        part that does not fit is not sent: its staged items are dropped and, the budget
        being exhausted, the next online pass skips their units ``budget_exhausted``."""
        budget = self.ex.budget
        assert budget is not None
        kept, held = [], {}
        for row, ids in parts:
            r = await self._call(self._part_reservation, rt, staged, ids)
            if budget.reserve(r):
                kept.append((row, ids))
                held[row["key"]] = r
            else:
                await self._call(self.store.drop_staged_items, staged, ids)
                await self._event("budget_exhausted", rt.name, file=row["file"], requests=len(ids),
                                  reserve_usd=round(r.usd, 6))
                report.progressed = True
        return kept, held

    def _part_reservation(self, rt: ActionRuntime, staged: str, ids: list[str]) -> Any:
        from agac.engine.budget import Reservation

        budget = self.ex.budget
        assert budget is not None
        wanted = set(ids)
        usd, tokens = 0.0, 0
        for item in self.store.staged_items(staged):
            if item.custom_id in wanted:
                r = budget.for_request_json(rt.action, loads(item.request), "batch")
                usd += r.usd
                tokens += r.tokens
        return Reservation(usd, tokens)

    def open_reservations(self, known: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Worst cases of the batches this run has out (R5), for the budget guard; those of
        ``known`` batches are taken from it instead of their items."""
        from agac.engine.budget import Reservation

        budget = self.ex.budget
        assert budget is not None
        by_name = {rt.name: rt for rt in self.batch_rts}
        out: dict[str, Any] = {}
        for b in self.store.list_batches(self.workflow, open_only=True):
            rt = by_name.get(b.action)
            if b.run_id != self.run_id or rt is None:
                continue
            if known is not None and b.key in known:
                out[b.key] = known[b.key]
                continue
            usd, tokens = 0.0, 0
            for item in self.store.iter_batch_items(b.key):
                if item.status == "pending":
                    r = budget.for_request_json(rt.action, loads(item.request), "batch")
                    usd += r.usd
                    tokens += r.tokens
            out[b.key] = Reservation(usd, tokens)
        return out

    def _plan_parts(self, rt: ActionRuntime, staged: str, file: str) -> list[tuple[dict[str, Any], list[str]]]:
        """Split a file's staged items only where the provider's limits require it (B1)."""
        provider = rt.provider
        max_n = int(getattr(provider, "batch_max_requests", 50_000))
        max_bytes = int(getattr(provider, "batch_max_bytes", 200 * 1024 * 1024)) * 9 // 10
        parts: list[list[str]] = [[]]
        size = 0
        for item in self.store.staged_items(staged):
            n = len(item.request) + 300
            if parts[-1] and (len(parts[-1]) >= max_n or size + n > max_bytes):
                parts.append([])
                size = 0
            parts[-1].append(item.custom_id)
            size += n
        now = time.time()
        out = []
        for i, ids in enumerate(p for p in parts if p):
            key = f"agac_{secrets.token_hex(12)}"
            out.append(({
                "key": key, "workflow": self.workflow, "action": rt.name, "file": file, "part": i,
                "provider": rt.action.provider, "provider_batch_id": None, "state": "submitting",
                "raw_status": None, "run_id": self.run_id, "collected_by": None,
                "request_count": len(ids), "meta": "{}", "error": None, "created_at": now,
                "submitted_at": None, "ended_at": None, "deadline_at": None, "updated_at": now,
            }, ids))
        return out

    async def _submit(self, rt: ActionRuntime, key: str, report: StepReport) -> str:
        """Send one intent; returns submitted | refused | unknown."""
        batch = await self._call(self.store.get_batch, key)
        pacer = self._pacer(rt)
        while True:
            if pacer is not None:
                await pacer.acquire(1)
            requests = (request_from_json(i.request, i.custom_id)
                        for i in self.store.iter_batch_items(key))
            maybe_crash("before_submit")
            await self.gateway.owned()  # still the run's owner, right before sending (S3)
            try:
                handle = await rt.provider.submit_batch(requests, key)
            except WaitError as exc:
                await self._event("waiting", rt.name, reason="provider_limit", batch=key,
                                  seconds=exc.retry_after)
                await asyncio.sleep(exc.retry_after or 1.0)
                continue
            except RetryableError as exc:
                await self._call(self.store.update_batch, key, state="unknown", error=str(exc))
                await self._event("batch_unknown", rt.name, batch=key, file=batch.file, error=str(exc))
                return await self._recover(rt, key, report)
            except ProviderError as exc:
                await self._refuse(rt, key, batch.file, str(exc))
                return "refused"
            maybe_crash("after_submit")  # accepted by the provider, not yet recorded here
            await self._submitted(rt, key, handle, batch.file, batch.request_count)
            return "submitted"  # no unit can move on until it is read: no new pass

    def _pacer(self, rt: ActionRuntime) -> RateLimiter | None:
        config = self.ex.provider_options.get(rt.action.provider or "")
        per_min = getattr(config, "batch_submissions_per_minute", None) if config else None
        if not per_min:
            return None
        name = rt.action.provider or ""
        if name not in self._pacers:
            self._pacers[name] = RateLimiter(rpm=float(per_min), tpm=None)
        return self._pacers[name]

    async def _submitted(self, rt: ActionRuntime, key: str, handle: BatchHandle, file: str, n: int) -> None:
        now = time.time()
        await self._call(self.store.update_batch, key, state="submitted", provider_batch_id=handle.id,
                         meta=dumps(handle.meta), submitted_at=now, error=None,
                         deadline_at=now + (rt.action.batch_deadline or 25 * 3600.0))
        await self._event("submitted", rt.name, batch=key, batch_id=handle.id, file=file, requests=n)
        await self._event("awaiting", rt.name, batch_id=handle.id, file=file,
                          poll_interval=rt.action.poll_interval)

    async def _refuse(self, rt: ActionRuntime, key: str, file: str, why: str) -> None:
        await self._call(self.store.update_batch, key, state="refused", error=why, collected_by=self.run_id)
        await self._call(self.store.fail_open_items, key, "failed", "batch_refused",
                         f"the provider refused the batch for {file}: {why}")
        await self._event("batch_refused", rt.name, batch=key, file=file, error=why)

    async def _cancel_unneeded(self, rt: ActionRuntime) -> None:
        """B0: batches out from earlier runs whose requests this run no longer needs (its
        prompt changed, or the answers exist) are cancelled at the provider. Only after an
        online pass of this invocation has recorded which batches its units adopted."""
        if not self.ex.walked:
            return
        for b in await self._call(self.store.list_batches, self.workflow, open_only=True, action=rt.name):
            if b.run_id == self.run_id or b.key in self.ex.adopted_batches:
                continue
            if b.state in ("submitting", "unknown") or not b.provider_batch_id:
                continue
            try:
                await rt.provider.cancel_batch(
                    BatchHandle(rt.action.provider or "", b.provider_batch_id, b.key, loads(b.meta) or {}))
            except ProviderError:
                pass  # gone already; nothing of it is read either way
            await self._call(self.store.fail_open_items, b.key, "failed", "batch_abandoned",
                             "no longer needed by the workflow (B0)")
            await self._call(self.store.update_batch, b.key, state="abandoned",
                             error="no longer needed (B0)")
            await self._event("batch_cancelled_unneeded", rt.name, batch_id=b.provider_batch_id,
                              file=b.file)

    # -- B2 recovery ----------------------------------------------------------------------

    async def _recover_intents(self, rt: ActionRuntime, report: StepReport) -> None:
        for b in await self._call(self.store.list_batches, self.workflow, open_only=True, action=rt.name):
            if b.state in ("submitting", "unknown") and self.only_file in (None, b.file):
                await self._recover(rt, b.key, report)

    async def _recover(self, rt: ActionRuntime, key: str, report: StepReport) -> str:
        """Ask the provider for a batch by our key before sending that shard again."""
        b = await self._call(self.store.get_batch, key)
        try:
            if hasattr(rt.provider, "batch_candidates"):
                # No metadata to match (Anthropic): batches created in the intent's window
                # with the same request count, minus those already known here. Exactly one
                # is adopted; its custom_ids are verified when it is read.
                found = await rt.provider.batch_candidates(
                    created_after=b.created_at - 5, created_before=time.time() + 5,
                    request_count=b.request_count)
                known = await self._call(self.store.known_provider_ids, rt.action.provider,
                                         [h.id for h in found])
                fresh = [h for h in found if h.id not in known]
                handle = fresh[0] if len(fresh) == 1 else None
                certain_absent = False
            else:
                handle = await rt.provider.find_batch(key)
                certain_absent = handle is None
        except ProviderError as exc:
            await self._call(self.store.update_batch, key, state="unknown", error=f"recovery: {exc}")
            report.waiting.append(
                f"{rt.name}: cannot ask the provider about the submission of {b.file} ({key}): "
                f"{exc}; run again later, or settle it with `agac batch resolve {key} "
                "--batch-id ID | --not-submitted`")
            return "unknown"
        if handle is not None:
            await self._submitted(rt, key, handle, b.file, b.request_count)
            await self._event("batch_adopted", rt.name, batch=key, batch_id=handle.id, file=b.file)
            return "submitted"
        if certain_absent:
            return await self._submit(rt, key, report)
        await self._call(self.store.update_batch, key, state="unknown")
        report.waiting.append(
            f"{rt.name}: the submission of {b.file} ({key}) is unknown; settle it with "
            f"`agac batch resolve {key} --batch-id ID | --not-submitted`")
        return "unknown"

    # -- polling and collection -------------------------------------------------------------

    async def _poll_and_collect(self, rt: ActionRuntime, report: StepReport) -> None:
        seen: list[str] = []
        try:
            await self._poll_each(rt, report, seen)
        finally:
            self.ex.progress.batches[rt.name] = (
                f"{len(seen)} batch{'es' if len(seen) != 1 else ''} out: {', '.join(seen)}" if seen else "")

    async def _poll_each(self, rt: ActionRuntime, report: StepReport, seen: list[str]) -> None:
        for b in await self._call(self.store.list_batches, self.workflow, open_only=True, action=rt.name):
            if b.state in ("submitting", "unknown") or self.only_file not in (None, b.file):
                continue
            handle = BatchHandle(rt.action.provider or "", b.provider_batch_id, b.key, loads(b.meta) or {})
            if b.key in self._unreachable:
                # B5: left for the next run, not asked again in this one.
                report.waiting.append(self._unreachable[b.key])
                continue
            try:
                status = await rt.provider.poll_batch(handle)
            except ProviderError as exc:
                self._unreach(b, report, f"{rt.name}: cannot reach the provider for {b.file} "
                                         f"({handle.id}): {exc} (B5)")
                continue
            await self._call(self.store.update_batch, b.key, raw_status=status.raw_status,
                             state="running" if status.state in ("running",) else b.state)
            await self._event("awaiting", rt.name, batch_id=handle.id, file=b.file,
                              status=status.raw_status, poll_interval=rt.action.poll_interval)
            seen.append(f"{b.file} {status.raw_status} {status.completed}/{status.request_count or b.request_count}")
            if status.state == "ended":
                if await self._collect(rt, b, handle, report):
                    report.progressed = True
            elif status.state in _B7_REASON:
                await self._end_unread(rt, b, status.state, f"the provider reports {status.raw_status}")
                report.progressed = True
            elif b.deadline_at and time.time() > b.deadline_at and status.state == "running":
                await self._deadline(rt, b, handle)
                report.progressed = True
            else:
                what = ("still cancelling (B8)" if status.state == "cancelling" else
                        f"in a status agac does not know: {status.raw_status!r} (B9)"
                        if not status.known else f"{status.raw_status}")
                report.waiting.append(f"{rt.name}: batch {handle.id} for {b.file} is {what}")

    async def _fail_if_every_file_unread(self, rt: ActionRuntime) -> None:
        """B7: when the batch of *every* file ended failed, expired or cancelled, the action
        fails as a whole, so the next run sends every file again (R1 d)."""
        batches = await self._call(self.store.list_batches, self.workflow, action=rt.name)
        mine = [b for b in batches if b.collected_by == self.run_id]
        if not mine or any(b.state in OPEN_BATCH_STATES for b in batches):
            return
        files = {b.file for b in mine}
        unread = {b.file for b in mine if b.state in _B7_REASON}
        if unread == files and all(b.state in _B7_REASON for b in mine):
            await self._call(self.store.set_action_state, self.run_id, rt.name, "failed",
                             f"every file's batch ended without results: {', '.join(sorted(files))}")

    def _unreach(self, b: Any, report: StepReport, line: str) -> None:
        self._unreachable[b.key] = line
        report.waiting.append(line)

    async def _end_unread(self, rt: ActionRuntime, b: Any, state: str, why: str) -> None:
        """B7: read nothing from it, fail its records."""
        reason = _B7_REASON[state]
        await self._call(self.store.fail_open_items, b.key, "failed", reason,
                         f"batch {b.provider_batch_id} for {b.file}: {why}")
        await self._call(self.store.update_batch, b.key, state=state, collected_by=self.run_id,
                         ended_at=time.time())
        await self._event("batch_ended_unread", rt.name, batch_id=b.provider_batch_id, file=b.file,
                          state=state, reason=reason)

    async def _deadline(self, rt: ActionRuntime, b: Any, handle: BatchHandle) -> None:
        """B11: at batch_deadline, cancel at the provider and fail the records."""
        try:
            await rt.provider.cancel_batch(handle)
        except ProviderError:
            pass  # it is failed here either way; the provider's copy is no longer read
        await self._call(self.store.fail_open_items, b.key, "failed", "batch_deadline",
                         f"batch {handle.id} for {b.file} passed its batch_deadline")
        await self._call(self.store.update_batch, b.key, state="cancelled", collected_by=self.run_id,
                         ended_at=time.time(), error="batch_deadline")
        await self._event("batch_deadline", rt.name, batch_id=handle.id, file=b.file)

    async def _collect(self, rt: ActionRuntime, b: Any, handle: BatchHandle, report: StepReport) -> bool:
        try:
            counts = await ingest_batch(self.ex, rt, b, handle)
        except ProviderError as exc:
            self._unreach(b, report, f"{rt.name}: cannot read the results of {handle.id} for "
                                     f"{b.file}: {exc} (B5)")
            return False
        await self._event("collected", rt.name, batch_id=handle.id, file=b.file, **counts)
        return True


