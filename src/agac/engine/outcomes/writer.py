"""Writing what units did: outcomes, answers, usage (the cost ledger), tool results,
events, staged batch items and fan-out counts — the rows of one run, handed to the
store gateway's group commit, and the live progress counters that follow them.

A unit never writes the store itself: it calls :class:`OutcomeWriter` (through the
:class:`agac.engine.ports.Outcomes` protocol). A unit that paid for something waits
until its rows are durable — the gateway's acknowledgement — and keeps its concurrency
slot until then (S1); rows that cost nothing to redo are queued without waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from agac.engine.checks import JUDGE_ORIGIN
from agac.engine.requests import Fail
from agac.engine.values import Settled
from agac.errors import ProviderError
from agac.jsontext import dumps, loads
from agac.providers.base import Usage
from agac.providers.registry import credential_env_names
from agac.redaction import Redactor
from agac.store.rows import EventRow, FanoutRow, OutcomeRow, PricedRow, StagedItem, UsageRow

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from agac.clock import Clock
    from agac.engine.actions import ActionRuntime
    from agac.engine.decision import Settle
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.values import UnitRecord
    from agac.jsontext import JSON, JSONObject
    from agac.providers.base import Request, Response
    from agac.providers.pricing import PriceTable
    from agac.store.rows import AnswerRow, ToolResultRow
    from agac.store.values import Origin, OutcomeStatus

__all__ = ["OutcomeWriter", "Progress"]


class Progress:
    """Live counters per action, for progress bars; the store stays the truth."""

    def __init__(
        self, actions: list[str], total: int, listeners: Iterable[Callable[[Progress], None]] = ()
    ) -> None:
        self.total = total
        self.actions = {a: {"answered": 0, "failed": 0, "skipped": 0, "cost": 0.0} for a in actions}
        self.batches: dict[str, str] = {}
        """Per batch action: its batches out, with provider status and request counts."""
        self.listeners: list[Callable[[Progress], None]] = list(listeners)
        self.totals = dict.fromkeys(actions, total)
        """Units per action: the record count, grown by fan-outs as parents fan out."""
        self._fanned: set[tuple[str, str]] = set()

    def fanned_out(self, fan: str, parent: str, actions: Iterable[str], items: int) -> None:
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

    def spent(self, action: str, cost: float) -> None:
        self.actions[action]["cost"] += cost

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

    def event_row(self, run_id: str, at: float) -> EventRow:
        """A ``progress`` event (T6): units and cost per action, as this run counts them."""
        actions = {
            a: {
                "records": max(self.totals[a], self.done(a)),
                "answered": r["answered"],
                "failed": r["failed"],
                "skipped": r["skipped"],
                "cost_usd": round(r["cost"], 6),
            }
            for a, r in self.actions.items()
        }
        cost = round(sum(r["cost"] for r in self.actions.values()), 6)
        return EventRow(
            run_id,
            "progress",
            None,
            None,
            dumps({"scope": "run", "actions": actions, "cost_usd": cost}),
            at,
        )


class OutcomeWriter:
    """The rows of one run (or one worker's shard of it), through one store gateway."""

    def __init__(
        self,
        run_id: str,
        gateway: StoreGateway,
        prices: PriceTable,
        progress: Progress,
        clock: Clock,
        unpriced: Iterable[str] = (),
    ) -> None:
        self.run_id = run_id
        self.gateway = gateway
        self.prices = prices
        self.progress = progress
        self.clock = clock
        self._unpriced: set[str] = set(unpriced)
        """Fingerprints of calls whose outcome is unknown, still at their worst case (§8):
        an answer to the same request gives them its real usage."""
        self._redactor: Redactor | None = None

    # -- outcomes ---------------------------------------------------------------------------

    async def settle(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        status: OutcomeStatus,
        reason: str | None = None,
        detail: str | None = None,
        *,
        output: JSON = None,
        origin: Origin = "call",
        fingerprint: str | None = None,
        attempts: int = 0,
        answers: Sequence[AnswerRow] = (),
        usage: Sequence[UsageRow] = (),
        tool_results: Sequence[ToolResultRow] = (),
        traceback_text: str | None = None,
        output_json: str | None = None,
        on_durable: Callable[[], None] | None = None,
        checks: str | None = None,
    ) -> Settled:
        """Commit a unit's outcome (with its answer, usage and events); ``on_durable`` is
        called by the store's writer once the outcome is committed, before the unit is
        woken (:meth:`StoreGateway.commit_nowait`): a call gives its slot back there.

        A unit that paid for something (a call, a tool invocation) waits until the
        outcome is durable, keeping its concurrency slot (S1). Outcomes that cost nothing
        to redo (skips, reuse, carried failures) are queued without waiting: group
        commits keep their order, so an upstream outcome is never durable after its
        downstream one, and a crash in between only redoes free work.
        """
        now = self.clock.time()
        if output_json is None and output is not None:
            output_json = dumps(output)
        outcome = OutcomeRow(
            self.run_id,
            rt.name,
            rec.key,
            rec.seq,
            status,
            reason,
            detail,
            origin,
            fingerprint,
            output_json,
            attempts,
            now,
            checks,
        )
        events: tuple[EventRow, ...] = ()
        if status == "failed":
            data: JSONObject = {"reason": reason, "detail": detail}
            if traceback_text:
                data["traceback"] = traceback_text
            events = (self.event_row("unit_failed", rt.name, rec.key, data, now),)
        priced = self._prices_unknown(usage) if usage and self._unpriced else ()
        if usage or answers or tool_results:
            await self.gateway.commit(
                outcomes=(outcome,),
                events=events,
                answers=answers,
                tool_results=tool_results,
                usage=usage,
                priced=priced,
                on_durable=on_durable,
            )
        else:
            self.gateway.commit_nowait(outcomes=(outcome,), events=events, on_durable=on_durable)
        cost = sum(u.cost_usd for u in usage) if usage else 0.0
        self.progress.bump(rt.name, status, cost)
        return Settled(status, reason, output, detail)

    def decided(
        self, rt: ActionRuntime, rec: UnitRecord, d: Settle
    ) -> Coroutine[object, None, Settled]:
        """Write the outcome a rule of engine/decision.py gave the unit (the writer's own
        coroutine: no frame of its own on the unit's path)."""
        return self.settle(
            rt,
            rec,
            d.status,
            d.reason,
            d.detail,
            output=loads(d.output_json) if d.output_json is not None else None,
            origin=d.origin,
            fingerprint=d.fingerprint,
            attempts=d.attempts,
            output_json=d.output_json,
            checks=d.checks,
        )

    def _prices_unknown(self, usage: Sequence[UsageRow]) -> list[PricedRow]:
        """§8: an answer to a request whose earlier call's outcome is unknown gives that
        call's usage row (``origin = 'unknown'``) its real tokens and cost."""
        out = []
        for u in usage:
            fp = u.fingerprint
            if u.kind == "llm" and u.status == "ok" and fp in self._unpriced:
                assert fp is not None
                self._unpriced.discard(fp)
                out.append(
                    PricedRow(
                        fp,
                        u.input_tokens,
                        u.cached_tokens,
                        u.cache_write_tokens,
                        u.output_tokens,
                        u.cost_usd,
                    )
                )
        return out

    def redact(self, text: str) -> str:
        """``text`` (a tool's exception, its traceback) with secrets taken out, before it
        is stored; the environment is read on the first use (tool errors are rare)."""
        if self._redactor is None:
            self._redactor = Redactor.from_environment(credential_env_names())
        return self._redactor(text)

    def carried(self, action: str, status: str) -> None:
        """A unit settled by an earlier invocation of this run: counted, nothing written."""
        self.progress.bump(action, status)

    # -- events -----------------------------------------------------------------------------

    def event_row(
        self,
        kind: str,
        action: str | None,
        key: str | None,
        data: JSONObject,
        now: float | None = None,
    ) -> EventRow:
        return EventRow(
            self.run_id, kind, action, key, dumps(data), self.clock.time() if now is None else now
        )

    async def event(
        self, kind: str, action: str | None = None, key: str | None = None, **data: JSON
    ) -> None:
        """Queue an event; it is durable with the next group commit."""
        self.gateway.commit_nowait(events=[self.event_row(kind, action, key, data)])

    # -- the ledger ---------------------------------------------------------------------------

    def _llm_row(
        self,
        run_id: str,
        action: str,
        unit_key: str,
        attempt: int,
        provider: str,
        model: str,
        tier: str,
        usage: Usage | None,
        cost: float,
        latency_ms: float,
        status: str,
        error: str | None,
        fp: str | None,
        request_id: str | None,
        served_by: str | None = None,
    ) -> UsageRow:
        """One model call in the ledger with every usage field it reported."""
        u = usage if usage is not None else _NO_USAGE
        tools = dumps(dict(u.server_tools)) if u.server_tools else None
        return UsageRow(
            run_id,
            action,
            unit_key,
            attempt,
            "llm",
            provider,
            model,
            tier,
            u.input_tokens,
            u.cached_tokens,
            u.cache_write_tokens,
            u.output_tokens,
            cost,
            latency_ms,
            status,
            error,
            fp,
            self.clock.time(),
            None,
            u.reasoning_tokens,
            tools,
            request_id,
            served_by,
        )

    def usage_row(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        request: Request,
        response: Response | None,
        error: BaseException | None,
        started: float,
        fp: str,
    ) -> UsageRow:
        """One live call in the cost ledger (docs/cli.md, agac cost): succeeded, failed or retried, with
        the provider's request id (of the answer, or of the error)."""
        action = rt.action
        usage = response.usage if response is not None else None
        tier = request.ledger_tier
        # Priced at the hour its answer came (a price calendar: DeepSeek's cheaper hours).
        now = self.clock.time()
        cost = (
            self.prices.cost(action.model or "", usage, tier, at=now) if usage is not None else 0.0
        )
        if response is not None and response.billed_usd is not None:
            cost = response.billed_usd  # what the provider billed (OpenRouter usage.cost)
        error_text = None
        if error is not None:
            error_text = f"{_reason_of(error) or type(error).__name__}: {error}"
        latency = (self.clock.monotonic() - started) * 1000
        if response is not None and response.legs:  # the earlier legs have rows of their own
            latency = max(0.0, latency - sum(leg.latency_ms for leg in response.legs))
        request_id = response.request_id if response is not None else _request_id_of(error)
        return self._llm_row(
            self.run_id,
            action.name,
            rec.key,
            attempt,
            request.provider,
            request.model,
            tier,
            usage,
            cost,
            latency,
            "ok" if error is None else "error",
            error_text,
            fp,
            request_id,
            response.served_by if response is not None else None,
        )

    def leg_rows(
        self,
        rt: ActionRuntime,
        run_id: str,
        unit_key: str,
        attempt: int,
        fp: str,
        response: Response,
        tier: str = "live",
    ) -> list[UsageRow]:
        """The earlier calls of a turn the provider paused and the adapter continued: one
        ledger row each (they were sent and billed), before the row of the last call."""
        action = rt.action
        return [
            self._llm_row(
                run_id,
                action.name,
                unit_key,
                attempt,
                action.provider or "",
                action.model_name or "",
                tier,
                leg.usage,
                self.prices.cost(action.model or "", leg.usage, tier),
                leg.latency_ms,
                "ok",
                f"{leg.raw_stop or 'paused'}: leg {n}, continued in the next call",
                fp,
                leg.request_id,
            )
            for n, leg in enumerate(response.legs, start=1)
        ]

    async def record_call(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        request: Request,
        response: Response | None,
        error: BaseException,
        started: float,
        fp: str,
    ) -> None:
        """Ledger a call that did not produce the unit's answer (it may still have cost money)."""
        row = self.usage_row(rt, rec, attempt, request, response, error, started, fp)
        legs = (
            self.leg_rows(rt, self.run_id, rec.key, attempt, fp, response, request.ledger_tier)
            if response is not None and response.legs
            else []
        )
        if response is not None:
            # Keep what the model said: the session shows why the attempt was rejected.
            row = row._replace(error=f"{row.error} | answer: {response.text[:500]}")
        self.progress.spent(rt.name, row.cost_usd + sum(r.cost_usd for r in legs))
        await self.gateway.commit(usage=(*legs, row))

    async def record_judge(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        request: Request,
        response: Response | None,
        error: BaseException | None,
        started: float,
        fp: str,
        answer: AnswerRow | None,
    ) -> None:
        """A judge's call in the ledger on the unit it grades, with the origin ``judge``,
        priced at the judge's model; its verdict stored by fingerprint in the same commit."""
        usage = response.usage if response is not None else None
        model = f"{request.provider}/{request.model}"
        error_text = None
        if error is not None:
            error_text = f"{_reason_of(error) or type(error).__name__}: {error}"
        row = self._llm_row(
            self.run_id,
            rt.name,
            rec.key,
            attempt,
            request.provider,
            request.model,
            "live",
            usage,
            self.prices.cost(model, usage, "live", at=self.clock.time())
            if usage is not None
            else 0.0,
            (self.clock.monotonic() - started) * 1000,
            "ok" if error is None else "error",
            error_text,
            fp,
            response.request_id if response is not None else _request_id_of(error),
        )._replace(origin=JUDGE_ORIGIN)
        self.progress.spent(rt.name, row.cost_usd)
        await self.gateway.commit(answers=(answer,) if answer else (), usage=(row,))

    async def keep_answer(
        self, rt: ActionRuntime, answers: Sequence[AnswerRow], usage: Sequence[UsageRow]
    ) -> None:
        """An answer and its usage made durable before the unit's outcome (an answer to be
        judged, engine/walk/calls.py): the outcome written later carries neither."""
        priced = self._prices_unknown(usage) if usage and self._unpriced else ()
        await self.gateway.commit(answers=answers, usage=usage, priced=priced)
        self.progress.spent(rt.name, sum(u.cost_usd for u in usage))

    def tool_usage_row(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        started: float,
        error: str | None,
        input_hash: str,
    ) -> UsageRow:
        return UsageRow(
            self.run_id,
            rt.name,
            rec.key,
            attempt,
            "tool",
            "tool",
            rt.action.function or "",
            "live",
            0,
            0,
            0,
            0,
            0.0,
            (self.clock.monotonic() - started) * 1000,
            "ok" if error is None else "error",
            error,
            input_hash,
            self.clock.time(),
        )

    async def record_tool(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        attempt: int,
        started: float,
        error: str,
        input_hash: str,
    ) -> None:
        await self.gateway.commit(
            usage=(self.tool_usage_row(rt, rec, attempt, started, error, input_hash),)
        )

    def batch_usage_row(
        self,
        rt: ActionRuntime,
        submitted_by: str,
        unit_key: str,
        attempt: int,
        fingerprint: str,
        usage: Usage,
        latency_ms: float,
        request_id: str | None = None,
        billed_usd: float | None = None,
        served_by: str | None = None,
    ) -> UsageRow:
        """One batch item's answer in the ledger, at the batch tier, attributed to the run
        that submitted the batch; at what the provider billed when it says (OpenRouter's
        ``usage.cost``), and with the provider that served it."""
        cost = self.prices.cost(rt.action.model or "", usage, "batch")
        row = self._llm_row(
            submitted_by,
            rt.ledger_action,
            unit_key,
            attempt,
            rt.action.provider or "",
            rt.action.model_name or "",
            "batch",
            usage,
            billed_usd if billed_usd is not None else cost,
            latency_ms,
            "ok",
            None,
            fingerprint,
            request_id,
        )
        if rt.origin is not None:  # a follow-up round's answer (a judge's: ``judge``)
            row = row._replace(origin=rt.origin)
        return row._replace(served_by=served_by) if served_by else row

    def continued_row(
        self,
        rt: ActionRuntime,
        run_id: str,
        unit_key: str,
        attempt: int,
        fingerprint: str,
        response: Response,
        latency_ms: float,
    ) -> UsageRow:
        """The last live call of a batch answer's paused turn, continued live."""
        action = rt.action
        return self._llm_row(
            run_id,
            action.name,
            unit_key,
            attempt,
            action.provider or "",
            action.model_name or "",
            "live",
            response.usage,
            self.prices.cost(action.model or "", response.usage, "live", at=self.clock.time()),
            latency_ms,
            "ok",
            None,
            fingerprint,
            response.request_id,
        )

    # -- batch items and fan-outs ---------------------------------------------------------------

    def stage(self, items: Sequence[StagedItem]) -> None:
        """Queue staged batch items (``staged:<run>:…``): they wait for the batch step."""
        self.gateway.commit_nowait(batch_items=items)

    def fanned_out(self, fan: str, parent: UnitRecord, items: int, actions: Iterable[str]) -> None:
        """A parent fanned out into ``items`` items: its count is stored before any of its
        items' outcomes (the same group commits, in order)."""
        self.gateway.commit_nowait(
            fanouts=(FanoutRow(self.run_id, fan, parent.key, parent.seq, items, self.clock.time()),)
        )
        self.progress.fanned_out(fan, parent.key, actions, items)


_NO_USAGE = Usage()


def _request_id_of(error: BaseException | None) -> str | None:
    """The provider's request id a failed call's error carries, if any."""
    return error.request_id if isinstance(error, ProviderError) else None


def _reason_of(error: BaseException) -> str | None:
    """The reason code a provider error or a refused answer carries, if any."""
    return error.reason if isinstance(error, (ProviderError, Fail)) else None
