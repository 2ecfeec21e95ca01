"""Reading an ended batch (B6): stream its results into answers, usage and item results.

Results are streamed from the provider and written in groups: the first of 1,000, each
next one twice the last up to 64,000 (fewer, larger commits: each commit rewrites the index
pages it touched, so small groups write the same pages again and again; a batch of 50,000
is six groups), each group's rows in the order of their keys (results come in the
provider's order, shuffled: sorted, a group's inserts walk each index once instead of
jumping about it); nothing holds a whole result file. Each item ends one of:

- ``succeeded``: its answer is stored by fingerprint (usage at the batch tier);
- ``turn``: the answer asked for tool calls (an action with ``tools:``): the model turn is
  stored in the unit's loop (table ``turns``) with its usage, in the same transaction as
  the item; the walk runs the calls and stages the conversation for the next round;
- ``retry``: left out of the results, errored retryably, truncated or schema-invalid
  while the action's attempts are not spent: the next walk sends it again in a retry
  batch;
- ``failed`` with a reason: ``batch_not_returned``, ``provider_error``, ``refusal``,
  ``content_filter``, ``unexpected_stop``, ``truncated``, ``schema_invalid``,
  ``batch_cancelled``, ``batch_expired``.

A turn the provider paused in the batch (Anthropic ``pause_turn``) of an action with
``tools:`` is a turn of its loop: stored with its paused content, which the next round
sends back as the assistant turn to continue it. Of any other action it is continued live
before it is read (each live leg ledgered at the live tier), or fails ``unexpected_stop``:
never answered with the paused text.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agac.engine.batch.hybrid import OVERLAP_ORIGIN
from agac.engine.crashpoints import maybe_crash
from agac.engine.decision import round_try
from agac.engine.requests import Fail, accept_response, response_dict
from agac.errors import FatalError, ProviderError, UnsupportedError
from agac.jsontext import dumps, loads
from agac.providers.base import SupportsContinue, fingerprint_of, stored_request
from agac.store.batches import SHARED_ITEM, sent_items
from agac.store.rows import AnswerRow, ItemResult, TurnRow

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.batch.context import BatchContext
    from agac.providers.base import BatchHandle, Response, Result
    from agac.store.rows import UsageRow
    from agac.store.values import BatchItem, BatchRecord

__all__ = ["ingest_batch"]

_GROUP = 1000
_GROUP_MAX = 64000
_RETRYABLE = ("truncated", "schema_invalid", "provider_error_retryable")


async def ingest_batch(
    ctx: BatchContext,
    rt: ActionRuntime,
    b: BatchRecord,
    handle: BatchHandle,
    *,
    given_up: bool = False,
) -> dict[str, int]:
    """Read batch ``b`` once; returns counts by item status. ``given_up``: an earlier run
    cancelled it to go live and answered every record live: no answer in it is used."""
    items = {
        i.custom_id: i for i in await ctx.call(lambda: list(ctx.store.iter_batch_items(b.key)))
    }
    # B13: a batch cancelled to go live may answer units answered live meanwhile
    answered = (
        {i.unit_key for i in items.values()}
        if given_up
        else await ctx.call(_settled_units, ctx, rt.name)
        if b.meta.get("hybrid")
        else set()
    )
    reading = _Reading(ctx, rt, b, answered)
    sharing = _sharing(list(items.values()), b.request_count)
    group = _GROUP
    if rt.tool_defs:  # the action's tools: a result calling them is a turn of its loop
        handle = replace(handle, tools=frozenset(t.name for t in rt.tool_defs))
    async for result in rt.batch_api.api.batch_results(handle):
        item = items.pop(result.custom_id, None)
        if item is None:
            continue  # not ours (a candidate adopted by matching is verified by its ids)
        if item.status != "pending":
            continue  # read before a crash mid-ingest: never ledgered twice
        before = len(reading.results)
        await reading.read(item, result)
        if len(reading.results) > before:  # the line's result, which identical requests share
            for other in sharing.get(item.custom_id, ()):
                if items.pop(other.custom_id, None) is not None and other.status == "pending":
                    reading.share(other, reading.results[before])
        if len(reading.results) >= group:
            await reading.flush()
            maybe_crash("mid_ingest")
            group = min(2 * group, _GROUP_MAX)
    for item in items.values():  # B6: left out of the results
        if item.status == "pending":
            reading.not_returned(item)
    await reading.flush()
    maybe_crash("before_collected")
    await ctx.call(
        ctx.store.update_batch,
        b.key,
        state="collected",
        collected_by=ctx.run_id,
        ended_at=ctx.control.clock.time(),
    )
    maybe_crash("after_collected")
    return reading.counts


def _paused_text(request_json: str) -> str:
    """The text of the paused turn a request continues (its last message, when it is
    one), which begins the turn's answer as a live continuation's does; else ""."""
    sent = loads(request_json)
    messages = sent.get("messages") if isinstance(sent, dict) else None
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, dict) and last.get("role") == "assistant" and last.get("paused"):
        return str(last.get("content") or "")
    return ""


def _sharing(items: list[BatchItem], sent: int) -> dict[str, list[BatchItem]]:
    """custom_id of each line the batch sent -> the items of identical requests that share
    its result (S5, marked ``SHARED_ITEM`` when the intent was recorded): of its file, or
    joined from another part or file. A batch that sent a line for every item shares
    nothing: each line is read, and billed, for itself."""
    if sent >= len(items):
        return {}
    lines = {i.fingerprint: i.custom_id for i in sent_items(items)}
    out: dict[str, list[BatchItem]] = {}
    for item in items:
        if item.reason == SHARED_ITEM and item.fingerprint in lines:
            out.setdefault(lines[item.fingerprint], []).append(item)
    return out


def _settled_units(ctx: BatchContext, action: str) -> set[str]:
    """The units of ``action`` with an outcome in this run; in the store thread."""
    return {o.unit_key for o in ctx.store.iter_action_outcomes(ctx.run_id, action)}


class _Reading:
    """The rows of one batch being read, written a group at a time. ``overlap``: units
    answered live already (B13), whose answers here are billed but not used."""

    def __init__(
        self, ctx: BatchContext, rt: ActionRuntime, b: BatchRecord, overlap: set[str]
    ) -> None:
        self.ctx = ctx
        self.rt = rt
        self.b = b
        self.overlap = overlap
        self.max_attempts = rt.action.retry.max_attempts
        self.counts = {"succeeded": 0, "retry": 0, "failed": 0, "not_returned": 0, "turns": 0}
        self.answers: list[AnswerRow] = []
        self.usage: list[UsageRow] = []
        self.results: list[ItemResult] = []
        self.turns: list[tuple[TurnRow, list[UsageRow], ItemResult]] = []
        """Model turns that called tools, each with its usage and its item read."""
        now = ctx.control.clock.time()
        self.latency_ms = (now - (b.submitted_at or now)) * 1000

    async def flush(self) -> None:
        """One transaction: the answers, their usage and what was read for each item, so
        an item is never ledgered twice nor marked read without its answer (a crash
        mid-ingest reads again only the items still pending)."""
        ctx = self.ctx
        if self.answers or self.usage or self.results:
            # in key order: each index is walked once (the provider's order is shuffled)
            self.answers.sort(key=lambda a: a.fingerprint)
            self.usage.sort(key=lambda u: u.unit_key)
            self.results.sort(key=lambda r: r.custom_id)
            await ctx.gateway.commit(
                answers=self.answers, usage=self.usage, item_results=self.results
            )
        turns = [u for _, used, _ in self.turns for u in used]
        if self.turns:
            rows = [row for row, _, _ in self.turns]
            results = [result for _, _, result in self.turns]
            await ctx.gateway.call(
                ctx.store.put_turns,
                ctx.tenant,
                rows,
                turns,
                item_results=results,
                lease=ctx.gateway.fence,
            )
        # the live progress counts what this run spent (a batch an earlier run sent is its)
        spent = sum(u.cost_usd for u in (*self.usage, *turns) if u.run_id == ctx.run_id)
        if spent:
            ctx.progress.spent(self.rt.ledger_action, spent)
        self.answers, self.usage, self.results, self.turns = [], [], [], []

    async def read(self, item: BatchItem, result: Result) -> None:
        if result.type == "succeeded" and result.response is not None:
            await self._answered(item, result)
        elif result.type == "errored":
            err = result.error
            fatal = isinstance(err, (FatalError, UnsupportedError)) or not isinstance(
                err, ProviderError
            )
            # A fatal error names its own reason when it has one (a prompt the provider's
            # content filter refused is ``content_filter``).
            own = err.reason if isinstance(err, ProviderError) else None
            reason = (own or "provider_error") if fatal else "provider_error_retryable"
            self.results.append(self._give_up(item, reason, f"errored in the batch: {err}"))
        elif result.type == "canceled":
            self.counts["failed"] += 1
            self.results.append(
                ItemResult(
                    self.b.key,
                    item.custom_id,
                    "failed",
                    "batch_cancelled",
                    "the batch was cancelled",
                )
            )
        else:
            self.counts["failed"] += 1
            self.results.append(
                ItemResult(
                    self.b.key, item.custom_id, "failed", "batch_expired", "the batch expired"
                )
            )

    async def _answered(self, item: BatchItem, result: Result) -> None:
        response = result.response
        assert response is not None
        rt = self.rt
        mark = len(self.usage)
        self.usage.append(
            self.ctx.out.batch_usage_row(
                rt,
                self.b.run_id,
                item.unit_key,
                item.attempt,
                item.fingerprint,
                response.usage,
                self.latency_ms,
                response.request_id,
                billed_usd=response.billed_usd,
                served_by=response.served_by,
            )
        )
        if item.unit_key in self.overlap:
            self.usage[-1] = self.usage[-1]._replace(
                origin=OVERLAP_ORIGIN,
                error=("answered live first (B13): this batch answer is billed, stored, not used"),
            )
        if response.stop_reason == "paused" and rt.tool_defs and response.paused:
            # a loop's turn: its paused content goes back in the next round (R6)
            self.usage[-1] = self.usage[-1]._replace(
                error=f"{response.raw_stop or 'paused'}: paused in the batch, the next round "
                "continues it"
            )
            self._turn(item, response, mark)
            return
        if response.stop_reason == "paused":
            self.usage[-1] = self.usage[-1]._replace(
                error=f"{response.raw_stop or 'paused'}: paused in the batch, continued live"
            )
            continued = await self._continue_live(item, response)
            if continued is None:
                return
            response = continued
        if response.stop_reason == "tool_use" and rt.tool_defs:
            self._turn(item, response, mark)
            return
        if rt.tool_defs:  # the end of a turn paused in the last round: the whole turn's text
            response = replace(response, text=_paused_text(item.request) + response.text)
        try:
            output = accept_response(rt, response)
        except Fail as fail:
            self.results.append(self._give_up(item, fail.reason, fail.detail))
            return
        self.answers.append(
            AnswerRow(
                item.fingerprint,
                rt.action.provider or "",
                rt.action.model_name or "",
                item.request,
                dumps(response_dict(response)),
                dumps(output),
                self.ctx.control.clock.time(),
            )
        )
        self.results.append(ItemResult(self.b.key, item.custom_id, "succeeded"))
        self.counts["succeeded"] += 1

    def _turn(self, item: BatchItem, response: Response, mark: int) -> None:
        """A model turn that asked for tool calls: kept for the unit's loop in this run, at
        the step after the conversation its request sent (each earlier model turn and tool
        result a step), with its usage row. A unit answered live first (B13) keeps its
        own loop: the turn is billed, not stored. ``mark``: where the item's usage rows
        start (a paused turn continued live has several)."""
        paused = response.stop_reason == "paused"
        result = ItemResult(
            self.b.key,
            item.custom_id,
            "turn",
            "paused" if paused else "tool_use",
            f"paused by the provider ({response.raw_stop}); the next round continues"
            if paused
            else f"asked for {len(response.tool_calls)} tool call(s); the next round continues",
        )
        self.counts["turns"] += 1
        if item.unit_key in self.overlap:
            self.results.append(result)
            return
        usage = self.usage[mark:]
        del self.usage[mark:]
        sent = loads(item.request)
        assert isinstance(sent, dict)
        messages = sent["messages"]
        assert isinstance(messages, list)
        step = sum(
            1 for m in messages if isinstance(m, dict) and m["role"] in ("assistant", "tool")
        )
        body = {
            "text": response.text,
            "tool_calls": [c.to_dict() for c in response.tool_calls],
            "fingerprint": fingerprint_of(item.request),
            "usage": response.usage.to_dict(),
            "batch": self.b.key,
        }
        if paused:
            body["paused"] = list(response.paused)
        row = TurnRow(
            self.ctx.run_id,
            self.rt.name,
            item.unit_key,
            step,
            "model",
            dumps(body),
            self.ctx.control.clock.time(),
        )
        self.turns.append((row, usage, result))

    async def _continue_live(self, item: BatchItem, paused: Response) -> Response | None:
        """A turn the provider paused inside the batch (Anthropic ``pause_turn``) cannot be
        continued there: it is continued live, each live leg in the ledger at the live
        tier. Without a provider that continues turns, or when the live call fails, the
        item fails (never answered with the paused, partial text); None then."""
        rt = self.rt
        provider = rt.provider
        if not isinstance(provider, SupportsContinue):
            self.results.append(
                self._give_up(
                    item,
                    "unexpected_stop",
                    paused.stop_detail
                    or (
                        f"the provider paused the turn ({paused.raw_stop}) in the batch and cannot "
                        "continue it"
                    ),
                )
            )
            return None
        request = replace(stored_request(item.request, cache=rt.cache), timeout=rt.action.timeout)
        clock = self.ctx.control.clock
        started = clock.monotonic()
        try:
            answer = await provider.continue_turn(request, paused)
        except ProviderError as exc:
            self.results.append(
                self._give_up(
                    item,
                    "unexpected_stop",
                    (
                        f"the provider paused the turn ({paused.raw_stop}) in the batch; continuing "
                        f"it live failed: {exc}"
                    ),
                )
            )
            return None
        latency = (clock.monotonic() - started) * 1000 - sum(x.latency_ms for x in answer.legs)
        out = self.ctx.out
        self.usage.extend(
            out.leg_rows(rt, self.b.run_id, item.unit_key, item.attempt, item.fingerprint, answer)
        )
        self.usage.append(
            out.continued_row(
                rt,
                self.b.run_id,
                item.unit_key,
                item.attempt,
                item.fingerprint,
                answer,
                max(0.0, latency),
            )
        )
        return answer

    def _give_up(self, item: BatchItem, reason: str, detail: str) -> ItemResult:
        if round_try(item.attempt) < self.max_attempts and reason in _RETRYABLE:
            self.counts["retry"] += 1
            return ItemResult(self.b.key, item.custom_id, "retry", reason, detail)
        self.counts["failed"] += 1
        final = "provider_error" if reason == "provider_error_retryable" else reason
        return ItemResult(self.b.key, item.custom_id, "failed", final, detail)

    def share(self, item: BatchItem, read: ItemResult) -> None:
        """``item`` was not sent: an identical request was, and ``read`` is what was read
        for its line. ``item`` takes that result (the answer is stored once, by
        fingerprint; the ledger bills the line once): succeeded as shared — its unit
        settles ``reused`` — or the same failure or retry, as units sharing a live call
        do."""
        if read.status == "succeeded":
            self.counts["succeeded"] += 1
            self.results.append(
                ItemResult(
                    self.b.key,
                    item.custom_id,
                    "succeeded",
                    SHARED_ITEM,
                    f"asked once: the answer of the identical request {read.custom_id}",
                )
            )
            return
        self.counts["retry" if read.status == "retry" else "failed"] += 1
        self.results.append(read._replace(custom_id=item.custom_id))

    def not_returned(self, item: BatchItem) -> None:
        self.counts["not_returned"] += 1
        if round_try(item.attempt) < self.max_attempts:
            self.results.append(
                ItemResult(
                    self.b.key,
                    item.custom_id,
                    "retry",
                    "batch_not_returned",
                    "missing from the batch results; sent again in a retry batch",
                )
            )
        else:
            self.results.append(
                ItemResult(
                    self.b.key,
                    item.custom_id,
                    "failed",
                    "batch_not_returned",
                    f"missing from the batch results after {item.attempt} attempts",
                )
            )
