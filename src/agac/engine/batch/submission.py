"""Getting a batch action's staged units to the provider, each exactly once (docs/guarantees.md, Batches).

For each input file whose units are all accounted for — settled, staged or out (B1, B4)
— the staged items are split only by the provider's request and byte limits, each part's
worst case is reserved against the budget (R5), the intents (state ``submitting``, every
item and fingerprint) are committed first (S1), and the parts are sent, paced per
provider (B12). Outcomes of a submission (B2): accepted; refused (the file's records fail
``batch_refused`` and the action fails, the other files are still tried); a wait hint
(slept, no attempt spent); or unknown (5xx, timeout, lost connection) — then recovery
asks the provider for the batch by our key before anything is sent again.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple

from agac.engine.batch.split import split_parts
from agac.engine.crashpoints import maybe_crash
from agac.engine.limits.budget import Reservation
from agac.engine.walk.steps import expected_units
from agac.errors import AttachmentError, ProviderError, RetryableError, WaitError
from agac.jsontext import dumps, loads
from agac.media import Attachment, base64_size, verify
from agac.providers.base import Message, StoredRequests
from agac.store.batches import sent_items, staged_key, staged_prefix
from agac.store.rows import BatchIntent

if TYPE_CHECKING:
    from agac.config.model import Action
    from agac.engine.actions import ActionRuntime
    from agac.engine.batch.context import BatchContext, StepReport
    from agac.engine.limits.budget import BudgetGuard
    from agac.providers.base import BatchHandle
    from agac.store.repository import Store
    from agac.store.values import BatchItem, BatchRecord

__all__ = ["Submitter", "open_reservations"]

_ATTACHMENTS = '"attachments":['
"""How a stored request that attaches files names them (``Request.canonical()``)."""

Parts = list[tuple[BatchIntent, list[str]]]
"""Each intent of a file with the custom_ids it takes."""


class Planned(NamedTuple):
    """A file's intents, and the staged items that share a line another batch sends."""

    parts: Parts
    shared: dict[str, list[str]]
    """Batch key (one of ``parts``, or another file's still out) -> custom_ids that join it
    as ``SHARED_ITEM``: an identical request is its line (S5)."""
    short: list[str]
    """The items whose line makes no batch the provider takes (with the items sharing
    those lines): sent live or held (:meth:`Submitter._below_minimum`)."""
    short_lines: int
    """How many distinct requests ``short`` holds."""


def open_reservations(
    store: Store,
    budget: BudgetGuard,
    run_id: str,
    workflow: str,
    actions: list[Action],
    known: Mapping[str, Reservation] | None = None,
    *,
    tenant: str,
) -> dict[str, Reservation]:
    """Worst cases of the batches run ``run_id`` has out for ``actions`` (R5), for the
    budget guard; those of ``known`` batches are taken from it instead of their items.
    In the store thread."""
    by_name = {a.name: a for a in actions}
    out: dict[str, Reservation] = {}
    for b in store.list_batches(workflow, tenants=(tenant,), open_only=True):
        action = by_name.get(b.action)
        if b.run_id != run_id or action is None:
            continue
        if known is not None and b.key in known:
            out[b.key] = known[b.key]
            continue
        usd, tokens = 0.0, 0
        for item in sent_items(store.iter_batch_items(b.key)):
            if item.status == "pending":
                r = budget.for_request_json(action, loads(item.request), "batch")
                usd += r.usd
                tokens += r.tokens
        out[b.key] = Reservation(usd, tokens)
    return out


class Submitter:
    """Submits and recovers the intents of one run's batch actions."""

    def __init__(self, ctx: BatchContext) -> None:
        self.ctx = ctx
        self._refused: dict[tuple[str, str], str] = {}
        """(action, file) -> why the provider refused its batch, in this invocation."""
        self.unsent: dict[str, list[str]] = {}
        """action -> its input files that could not be sent at the last step (B4)."""

    async def submit_ready_files(self, rt: ActionRuntime, report: StepReport) -> bool:
        """Submit each file whose units are all accounted for; True when every file is out
        or has nothing left to send (B4)."""
        counts = await self.ctx.call(
            self.ctx.store.group_counts,
            self.ctx.workflow,
            rt.name,
            staged_prefix(self.ctx.run_id, rt.name),
            tenant=self.ctx.tenant,
        )
        all_sent = True
        refused: list[str] = []
        unsent = self.unsent[rt.name] = []
        for f in self.ctx.files:
            name, lo, n = f["file"], int(f["start"]), int(f["count"])
            c = counts.get(name, {"staged": 0, "open": 0})
            if rt.follows is not None:
                # A follow-up round (engine/batch/rounds.py) goes once the walk after a
                # read has staged it (B4 holds for the action it follows), a worker's
                # batch shard sending its own file's; a refusal fails its items, and so
                # the checks that asked for them.
                mine = self.ctx.only_file in (None, name)
                if mine and c["staged"] and await self._submit_file(rt, name, report) is False:
                    report.progressed = True
                continue
            settled = await self.ctx.call(
                self.ctx.store.count_action_outcomes_between, self.ctx.run_id, rt.name, lo, lo + n
            )
            plan = self.ctx.plan
            if plan.regions is not None and plan.per_item(rt.name):
                # Inside a fan-out a file holds one unit per item (docs/workflow-reference.md, Fan-out and join).
                totals = await self.ctx.call(
                    self.ctx.store.fanout_totals, self.ctx.run_id, lo, lo + n
                )
                n = expected_units(plan.regions, rt.name, n, totals)
            if settled + c["staged"] + c["open"] < n:
                all_sent = False  # some records have not reached this action yet
                unsent.append(name)
                continue
            if c["staged"] and self.ctx.only_file is not None and name != self.ctx.only_file:
                all_sent = False  # another shard's file, not out yet
                unsent.append(name)
                continue
            if c["staged"]:
                ok = await self._submit_file(rt, name, report)
                if ok is None:  # requests dropped before sending: their units render again
                    all_sent = False
                    unsent.append(name)
                elif ok is False:
                    refused.append(name)
                    report.progressed = True
        if refused:
            await self.ctx.call(
                self.ctx.store.set_action_state,
                self.ctx.run_id,
                rt.name,
                "failed",
                self._refusal(rt.name, refused),
            )
            self.ctx.refused_actions.add(rt.name)
        return all_sent

    async def _submit_file(self, rt: ActionRuntime, file: str, report: StepReport) -> bool | None:
        """Create the intents of one file's staged items and submit them. False if refused;
        None when requests whose files changed were dropped instead (nothing sent), or
        when some make no batch the provider takes (they go live or wait)."""
        staged = staged_key(self.ctx.run_id, rt.name, file)
        if rt.action.attachments and await self._drop_changed(rt, staged, file, report):
            return None  # those units render again first (the next pass stages the rest)
        planned = await self.ctx.call(self._plan_parts, rt, staged, file)
        parts, short = planned.parts, planned.short
        if short:
            await self._below_minimum(rt, staged, file, short, planned.short_lines, report)
            if not parts and not planned.shared:
                return None
        held: dict[str, Reservation] = {}
        shared = planned.shared
        if self.ctx.budget is not None:
            parts, held = await self._reserve_parts(rt, staged, parts, report)
            shared = await self._drop_unsent_shares(staged, planned, parts)
        held_back = short if rt.batch_api.below_minimum == "wait" else []
        await self.ctx.call(self.ctx.store.create_intents, staged, parts, shared, held_back)
        await self.ctx.gateway.durable()  # S1: the intents are stored before anything is sent
        refused = False
        for intent, _ in parts:
            if self.ctx.control.stopping:
                await self._not_sent(intent.key)  # Ctrl-C between two parts of a file
                continue
            if self.ctx.budget is not None and intent.key in held:
                self.ctx.budget.hold(intent.key, held[intent.key])
            outcome = await self._submit(rt, intent.key, report)
            refused = refused or outcome == "refused"
        if refused:
            return False
        return None if short else True  # the short requests go live or wait

    async def _below_minimum(
        self,
        rt: ActionRuntime,
        staged: str,
        file: str,
        ids: list[str],
        lines: int,
        report: StepReport,
    ) -> None:
        """Requests that make no batch the provider takes (Bedrock: 100 a job) — a file
        with fewer, a retry's few, or what is left of a larger file when its parts cannot
        spare enough within the provider's limits: with ``below_minimum: live`` their
        staged items (``ids``: ``lines`` distinct requests and the items sharing them) are
        dropped and their units sent live in this run (a rerun decides again); with
        ``wait`` they stay staged and the run waits, naming the file."""
        api = rt.batch_api
        provider = rt.action.provider or ""
        said = (
            f"{rt.name}: {file} has {lines} requests left to send, fewer than the "
            f"{api.min_requests} a {provider} batch takes"
            if lines < api.min_requests
            else f"{rt.name}: {lines} requests of {file} make no {provider} batch of "
            f"{api.min_requests} to {api.max_requests} requests within its size limit"
        )
        if api.below_minimum == "wait":
            report.waiting.append(
                f"{said}: they wait (providers: {provider}: below_minimum: wait; set it to "
                "`live` to send them as live calls)"
            )
            return
        units = await self.ctx.call(_staged_units, self.ctx.store, staged, set(ids))
        await self.ctx.call(self.ctx.store.drop_staged_items, staged, ids)
        self.ctx.control.go_live_units(rt.name, units)
        await self.ctx.event(
            "batch_below_minimum",
            rt.name,
            file=file,
            requests=lines,
            minimum=api.min_requests,
        )
        report.progressed = True

    async def _not_sent(self, key: str) -> None:
        """The run stopped before this intent was sent: the provider certainly does not
        have it, so its items go back to being sent by the next run (no B2 recovery)."""
        await self.ctx.call(
            self.ctx.store.fail_open_items,
            key,
            "not_submitted",
            "not_submitted",
            "the run stopped before it was sent",
        )
        await self.ctx.call(
            self.ctx.store.update_batch,
            key,
            state="not_submitted",
            ended_at=self.ctx.control.clock.time(),
            error="not submitted: the run stopped",
        )

    async def _reserve_parts(
        self, rt: ActionRuntime, staged: str, parts: Parts, report: StepReport
    ) -> tuple[Parts, dict[str, Reservation]]:
        """R5: reserve each part's worst case at the batch tier before it is submitted. A
        part that does not fit is not sent: its staged items are dropped and, the budget
        being exhausted, the next online pass skips their units ``budget_exhausted``."""
        budget = self.ctx.budget
        assert budget is not None
        kept: Parts = []
        held: dict[str, Reservation] = {}
        for intent, ids in parts:
            r = await self.ctx.call(self._part_reservation, rt, staged, ids)
            if budget.reserve(r):
                kept.append((intent, ids))
                held[intent.key] = r
            else:
                await self.ctx.call(self.ctx.store.drop_staged_items, staged, ids)
                await self.ctx.event(
                    "budget_exhausted",
                    rt.name,
                    file=intent.file,
                    requests=len(ids),
                    reserve_usd=round(r.usd, 6),
                )
                report.progressed = True
        return kept, held

    async def _drop_unsent_shares(
        self, staged: str, planned: Planned, kept: Parts
    ) -> dict[str, list[str]]:
        """The shares of ``planned`` whose batch is still sent; those of a part the budget
        left out are dropped with it (their units are skipped the same way)."""
        dropped = {intent.key for intent, _ in planned.parts} - {intent.key for intent, _ in kept}
        gone = [i for key in dropped for i in planned.shared.get(key, ())]
        if gone:
            await self.ctx.call(self.ctx.store.drop_staged_items, staged, gone)
        return {k: ids for k, ids in planned.shared.items() if k not in dropped}

    def _part_reservation(self, rt: ActionRuntime, staged: str, ids: list[str]) -> Reservation:
        budget = self.ctx.budget
        assert budget is not None
        wanted = set(ids)
        usd, tokens = 0.0, 0
        items = (i for i in self.ctx.store.staged_items(staged) if i.custom_id in wanted)
        for item in sent_items(items):  # identical requests are one line (S5)
            r = budget.for_request_json(rt.action, loads(item.request), "batch")
            usd += r.usd
            tokens += r.tokens
        return Reservation(usd, tokens)

    async def _drop_changed(
        self, rt: ActionRuntime, staged: str, file: str, report: StepReport
    ) -> bool:
        """Before a file with attachments is sent, each staged request's files are read
        again and checked against its hashes (in a worker thread). The items whose files
        changed or vanished are dropped unsent: their units render again, and fail
        ``attachment_changed`` / ``attachment_not_found`` (or, for a file the snapshot
        does not name, become a new request). True when any was dropped."""
        attached = await self.ctx.call(_staged_attachments, self.ctx.store, staged)
        if not attached:
            return False
        bad = await asyncio.to_thread(_unsendable, attached)
        if not bad:
            return False
        await self.ctx.call(self.ctx.store.drop_staged_items, staged, sorted(bad))
        for custom_id, why in sorted(bad.items()):
            await self.ctx.event(
                "attachment_unsent", rt.name, file=file, custom_id=custom_id, error=why
            )
        report.progressed = True
        return True

    def _plan_parts(self, rt: ActionRuntime, staged: str, file: str) -> Planned:
        """Split a file's staged items only where the provider's limits require it (B1):
        their count, and their bytes — a request's attachments counted as the base64 its
        line will carry (with a provider that takes a batch in memory, at most
        ``attachment_max_bytes`` of it a part) — with no part below the provider's
        minimum (:func:`split_parts`). Identical requests (one fingerprint) are one line
        (S5, :func:`sent_items`), counted once: in the part that holds the first of them,
        or in a batch of another file still out when this process submits every file
        (not a worker's one file); the others join that batch and send nothing. An action
        with tools shares none: each record's loop has turns of its own."""
        limits = rt.batch_api
        max_bytes = limits.max_bytes * 9 // 10
        sizes = self.ctx.store.staged_sizes(staged)
        if rt.action.attachments:
            max_bytes = min(max_bytes, limits.attachment_max_bytes * 9 // 10)
            sizes = _line_sizes(self.ctx.store.staged_items(staged), limits.attachment_line_bytes)
        shares = not rt.tool_defs  # a loop's turns are its own: a tool action shares none
        out = (
            self.ctx.store.open_lines(self.ctx.run_id, rt.name, staged)
            if shares and self.ctx.only_file is None
            else {}
        )
        fps: dict[str, str] = {}
        lines: list[tuple[str, int]] = []  # the first item of each request: its line
        followers: dict[str, list[str]] = {fp: [] for fp in out}
        for custom_id, length, request_fp in sizes:
            fp = request_fp if shares else custom_id
            fps[custom_id] = fp
            if fp in followers:
                followers[fp].append(custom_id)  # an identical request: no line of its own
                continue
            followers[fp] = []
            lines.append((custom_id, length))
        split = split_parts(
            lines, most=limits.max_requests, max_bytes=max_bytes, least=limits.min_requests
        )
        short = [*split.short, *(f for c in split.short for f in followers[fps[c]])]
        planned = self._intents(rt, file, split.parts, fps, out, followers)
        return planned._replace(short=short, short_lines=len(split.short))

    def _intents(
        self,
        rt: ActionRuntime,
        file: str,
        parts: list[list[str]],
        fps: Mapping[str, str],
        out: Mapping[str, str],
        followers: Mapping[str, list[str]],
    ) -> Planned:
        """The intents of a file's parts, each sending its lines; ``shared``: batch key ->
        the items whose identical request another item's line sends (one of these parts,
        or ``out``: fingerprint -> a batch of another file still out)."""
        keys = [f"agac_{secrets.token_hex(12)}" for _ in parts]
        shared: dict[str, list[str]] = {}
        for fp, key in out.items():
            if followers[fp]:
                shared.setdefault(key, []).extend(followers[fp])
        for key, ids in zip(keys, parts, strict=True):
            for custom_id in ids:
                if followers[fps[custom_id]]:
                    shared.setdefault(key, []).extend(followers[fps[custom_id]])
        now = self.ctx.control.clock.time()
        intents = [
            (
                BatchIntent(
                    key,
                    self.ctx.workflow,
                    rt.name,
                    file,
                    i,
                    rt.action.provider or "",
                    self.ctx.run_id,
                    len({fps[c] for c in ids}),
                    now,
                    self.ctx.tenant,
                ),
                ids,
            )
            for i, (key, ids) in enumerate(zip(keys, parts, strict=True))
        ]
        return Planned(intents, shared, [], 0)

    async def _submit(self, rt: ActionRuntime, key: str, report: StepReport) -> str:
        """Send one intent; returns submitted | refused | unknown | stopped."""
        batch = await self._batch(key)
        pacer = self.ctx.pacer(rt.action.provider or "")
        stop = self.ctx.control.stop_signal
        while True:
            if pacer is not None and await pacer.acquire(1, stop=stop) is None:
                await self._not_sent(key)
                return "stopped"
            maybe_crash("before_submit")
            await self.ctx.gateway.owned()  # still the run's owner, right before sending (S3)
            try:
                handle = await self._send(rt, key)
            except WaitError as exc:
                await self.ctx.event(
                    "waiting", rt.name, reason="provider_limit", batch=key, seconds=exc.retry_after
                )
                if await self.ctx.control.sleep(exc.retry_after or 1.0):
                    await self._not_sent(key)  # Ctrl-C while the provider asked us to wait
                    return "stopped"
                continue
            except AttachmentError as exc:
                # A file changed while its line was written: nothing was sent. The next
                # pass checks the files again and drops that request before sending.
                await self._not_sent(key)
                await self.ctx.event(
                    "attachment_unsent", rt.name, batch=key, file=batch.file, error=str(exc)
                )
                report.progressed = True
                return "unsent"
            except RetryableError as exc:
                await self.ctx.call(
                    self.ctx.store.update_batch, key, state="unknown", error=str(exc)
                )
                await self.ctx.event(
                    "batch_unknown", rt.name, batch=key, file=batch.file, error=str(exc)
                )
                return await self._recover(rt, key, report)
            except ProviderError as exc:
                await self._refuse(rt, key, batch.file, str(exc))
                return "refused"
            maybe_crash("after_submit")  # accepted by the provider, not yet recorded here
            await self._submitted(rt, key, handle, batch.file, batch.request_count)
            return "submitted"  # no unit can move on until it is read: no new pass

    async def _batch(self, key: str) -> BatchRecord:
        """An intent of this run, as the store has it now."""
        batch = await self.ctx.call(self.ctx.store.get_batch, key)
        assert batch is not None, key
        return batch

    async def _send(self, rt: ActionRuntime, key: str) -> BatchHandle:
        """Submit the intent's items as stored; an adapter that writes its lines from the
        stored canonical requests skips decoding them (:class:`StoredRequests`). The
        action's explicit context cache, when it has one, is made ready first: every line
        names it."""
        if self.ctx.caches is not None:
            await self.ctx.caches.ready(rt)
        lines = self.ctx.store.sent_requests(key)  # identical requests once (S5)
        return await rt.batch_api.api.submit_batch(StoredRequests(lines, rt.cache), key)

    async def _submitted(
        self, rt: ActionRuntime, key: str, handle: BatchHandle, file: str, n: int
    ) -> None:
        now = self.ctx.control.clock.time()
        await self.ctx.call(
            self.ctx.store.update_batch,
            key,
            state="submitted",
            provider_batch_id=handle.id,
            meta=dumps(handle.meta),
            submitted_at=now,
            error=None,
            deadline_at=now + (rt.action.batch_deadline or 25 * 3600.0),
        )
        await self.ctx.event(
            "submitted", rt.name, batch=key, batch_id=handle.id, file=file, requests=n
        )
        await self.ctx.event(
            "awaiting",
            rt.name,
            batch_id=handle.id,
            file=file,
            poll_interval=rt.action.poll_interval,
        )

    def _refusal(self, action: str, files: list[str]) -> str:
        """What a person reads (the run's error, its summary): which files the provider
        refused and why, and the command that works after fixing it (B2)."""
        said = "; ".join(f"{f}: {self._refused.get((action, f), 'refused')}" for f in files)
        return (
            f"the provider refused the batch of {action} for {said} — fix what it "
            f"names, then `agac run {self.ctx.workflow}`: a new run sends "
            f"{'that file' if len(files) == 1 else 'those files'} again and adopts the "
            "batches still out for the others (B0)"
        )

    async def _refuse(self, rt: ActionRuntime, key: str, file: str, why: str) -> None:
        self._refused[(rt.name, file)] = why
        await self.ctx.call(
            self.ctx.store.update_batch,
            key,
            state="refused",
            error=why,
            collected_by=self.ctx.run_id,
        )
        await self.ctx.call(
            self.ctx.store.fail_open_items,
            key,
            "failed",
            "batch_refused",
            f"the provider refused the batch for {file}: {why}",
        )
        await self.ctx.event("batch_refused", rt.name, batch=key, file=file, error=why)

    # -- B2 recovery ----------------------------------------------------------------------

    async def recover_intents(self, rt: ActionRuntime, report: StepReport) -> None:
        for b in await self.ctx.call(
            self.ctx.store.list_batches,
            self.ctx.workflow,
            tenants=self.ctx.tenants,
            open_only=True,
            action=rt.name,
        ):
            if b.state in ("submitting", "unknown") and self.ctx.only_file in (None, b.file):
                await self._recover(rt, b.key, report)

    async def _recover(self, rt: ActionRuntime, key: str, report: StepReport) -> str:
        """Ask the provider for a batch by our key before sending that shard again."""
        b = await self._batch(key)
        try:
            batch = rt.batch_api
            if batch.candidates is not None:
                # No metadata to match (Anthropic): batches created in the intent's window
                # with the same request count, minus those already known here. Exactly one
                # is adopted; its custom_ids are verified when it is read.
                found = await batch.candidates.batch_candidates(
                    created_after=b.created_at - 5,
                    created_before=self.ctx.control.clock.time() + 5,
                    request_count=b.request_count,
                )
                known = await self.ctx.call(
                    self.ctx.store.known_provider_ids, rt.action.provider, [h.id for h in found]
                )
                fresh = [h for h in found if h.id not in known]
                handle = fresh[0] if len(fresh) == 1 else None
                certain_absent = False
            else:
                handle = await batch.api.find_batch(key)
                certain_absent = handle is None
        except ProviderError as exc:
            await self.ctx.call(
                self.ctx.store.update_batch, key, state="unknown", error=f"recovery: {exc}"
            )
            report.waiting.append(
                f"{rt.name}: cannot ask the provider about the submission of {b.file} ({key}): "
                f"{exc}; run again later, or settle it with `agac batch resolve {key} "
                "--batch-id ID | --not-submitted`"
            )
            return "unknown"
        if handle is not None:
            await self._submitted(rt, key, handle, b.file, b.request_count)
            await self.ctx.event(
                "batch_adopted", rt.name, batch=key, batch_id=handle.id, file=b.file
            )
            return "submitted"
        if certain_absent:
            return await self._submit(rt, key, report)
        await self.ctx.call(self.ctx.store.update_batch, key, state="unknown")
        report.waiting.append(
            f"{rt.name}: the submission of {b.file} ({key}) is unknown; settle it with "
            f"`agac batch resolve {key} --batch-id ID | --not-submitted`"
        )
        return "unknown"


def _staged_attachments(store: Store, staged: str) -> list[tuple[str, list[Attachment]]]:
    """(custom_id, its attachments) of the staged requests that attach files."""
    out = []
    for item in store.staged_items(staged):
        if _ATTACHMENTS in item.request:
            atts = [
                a
                for m in loads(item.request)["messages"]
                for a in (Message.from_dict(m).attachments)
            ]
            out.append((item.custom_id, atts))
    return out


def _unsendable(attached: list[tuple[str, list[Attachment]]]) -> dict[str, str]:
    """custom_id -> why, for the requests whose files are not the bytes they name."""
    bad: dict[str, str] = {}
    for custom_id, atts in attached:
        for att in atts:
            try:
                verify(att)  # a chunk at a time: a 2 GB file is not held in memory
            except AttachmentError as exc:
                bad[custom_id] = str(exc)
                break
    return bad


def _line_sizes(
    items: Iterable[BatchItem],
    line_bytes: Callable[[tuple[Attachment, ...], int], int] | None = None,
) -> Iterator[tuple[str, int, str]]:
    """(custom_id, bytes of its batch line, fingerprint) with each attachment as its base64, or as
    ``line_bytes`` (the provider's) counts what a request's attachments add to its line."""
    for item in items:
        n = len(item.request)
        if _ATTACHMENTS in item.request:
            messages = [Message.from_dict(m) for m in loads(item.request)["messages"]]
            atts = tuple(a for m in messages for a in m.attachments)
            if line_bytes is None:
                n += sum(base64_size(a.size) for a in atts)
            else:
                n += line_bytes(atts, sum(len(m.content.encode()) for m in messages))
        yield item.custom_id, n, item.fingerprint


def _staged_units(store: Store, staged: str, ids: set[str]) -> set[str]:
    """The units of these staged items (in the store thread)."""
    return {i.unit_key for i in store.staged_items(staged) if i.custom_id in ids}
