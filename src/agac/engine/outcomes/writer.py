"""Writing what units did: outcomes, answers, usage (the cost ledger), tool results,
events, staged batch items and fan-out counts — the rows of one run, handed to the
store gateway's group commit, and the live progress counters that follow them.

A unit never writes the store itself: it calls :class:`OutcomeWriter` (through the
:class:`agac.engine.ports.Outcomes` protocol). A unit that paid for something waits
until its rows are durable — the gateway's acknowledgement — and keeps its concurrency
slot until then (S1); rows that cost nothing to redo are queued without waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from agac.engine.values import Settled
from agac.jsontext import dumps
from agac.providers.registry import credential_env_names
from agac.redaction import Redactor

if TYPE_CHECKING:
    from agac.clock import Clock
    from agac.engine.actions import ActionRuntime
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.values import UnitRecord
    from agac.providers.base import Request, Response, Usage
    from agac.providers.pricing import PriceTable
    from agac.store.values import Origin, OutcomeStatus

__all__ = ["OutcomeWriter", "Progress"]


class Progress:
    """Live counters per action, for progress bars; the store stays the truth."""

    def __init__(self, actions: list[str], total: int,
                 listeners: Iterable[Callable[[Progress], None]] = ()) -> None:
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

    def event_row(self, run_id: str, at: float) -> dict[str, Any]:
        """A ``progress`` event (T6): units and cost per action, as this run counts them."""
        actions = {a: {"records": max(self.totals[a], self.done(a)), "answered": r["answered"],
                       "failed": r["failed"], "skipped": r["skipped"],
                       "cost_usd": round(r["cost"], 6)}
                   for a, r in self.actions.items()}
        cost = round(sum(r["cost"] for r in self.actions.values()), 6)
        return {"run_id": run_id, "kind": "progress", "action": None, "unit_key": None,
                "data": dumps({"scope": "run", "actions": actions, "cost_usd": cost}),
                "created_at": at}


class OutcomeWriter:
    """The rows of one run (or one worker's shard of it), through one store gateway."""

    def __init__(self, run_id: str, gateway: StoreGateway, prices: PriceTable, progress: Progress,
                 clock: Clock) -> None:
        self.run_id = run_id
        self.gateway = gateway
        self.prices = prices
        self.progress = progress
        self.clock = clock
        self.unpriced: set[str] = set()
        """Fingerprints of calls whose outcome is unknown, still at their worst case (§8):
        an answer to the same request gives them its real usage."""
        self._redactor: Redactor | None = None

    # -- outcomes ---------------------------------------------------------------------------

    async def settle(
        self, rt: ActionRuntime, rec: UnitRecord, status: OutcomeStatus, reason: str | None = None,
        detail: str | None = None, *, output: Any = None, origin: Origin = "call",
        fingerprint: str | None = None, attempts: int = 0,
        answers: list[dict[str, Any]] | None = None, usage: list[dict[str, Any]] | None = None,
        tool_results: list[dict[str, Any]] | None = None, traceback_text: str | None = None,
        output_json: str | None = None,
    ) -> Settled:
        """Commit a unit's outcome (with its answer, usage and events).

        A unit that paid for something (a call, a tool invocation) waits until the
        outcome is durable, keeping its concurrency slot (S1). Outcomes that cost nothing
        to redo (skips, reuse, carried failures) are queued without waiting: group
        commits keep their order, so an upstream outcome is never durable after its
        downstream one, and a crash in between only redoes free work.
        """
        now = self.clock.time()
        if output_json is None and output is not None:
            output_json = dumps(output)
        outcome = {
            "run_id": self.run_id, "action": rt.name, "unit_key": rec.key, "seq": rec.seq,
            "status": status, "reason": reason, "detail": detail, "origin": origin,
            "fingerprint": fingerprint, "output": output_json,
            "attempts": attempts, "updated_at": now,
        }
        parts: dict[str, list[dict[str, Any]]] = {"outcomes": [outcome]}
        if status == "failed":
            data: dict[str, Any] = {"reason": reason, "detail": detail}
            if traceback_text:
                data["traceback"] = traceback_text
            parts["events"] = [self.event_row("unit_failed", rt.name, rec.key, data, now)]
        if answers:
            parts["answers"] = answers
        if tool_results:
            parts["tool_results"] = tool_results
        if usage:
            parts["usage"] = usage
            if self.unpriced:
                parts["priced"] = self._prices_unknown(usage)
        if usage or answers or tool_results:
            await self.gateway.commit(**parts)
        else:
            self.gateway.commit_nowait(**parts)
        cost = sum(u["cost_usd"] for u in usage or [])
        self.progress.bump(rt.name, status, cost)
        return Settled(status, reason, output, detail)

    def _prices_unknown(self, usage: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """§8: an answer to a request whose earlier call's outcome is unknown gives that
        call's usage row (``origin = 'unknown'``) its real tokens and cost."""
        out = []
        for u in usage:
            fp = u.get("fingerprint")
            if u["kind"] == "llm" and u["status"] == "ok" and fp in self.unpriced:
                self.unpriced.discard(fp)
                out.append({k: u[k] for k in ("fingerprint", "input_tokens", "cached_tokens",
                                              "cache_write_tokens", "output_tokens", "cost_usd")})
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

    def event_row(self, kind: str, action: str | None, key: str | None, data: dict[str, Any],
                  now: float | None = None) -> dict[str, Any]:
        return {"run_id": self.run_id, "kind": kind, "action": action, "unit_key": key,
                "data": dumps(data), "created_at": self.clock.time() if now is None else now}

    async def event(self, kind: str, action: str | None = None, key: str | None = None,
                    **data: Any) -> None:
        """Queue an event; it is durable with the next group commit."""
        self.gateway.commit_nowait(events=[self.event_row(kind, action, key, data)])

    # -- the ledger ---------------------------------------------------------------------------

    def usage_row(
        self, rt: ActionRuntime, rec: UnitRecord, attempt: int, request: Request,
        response: Response | None, error: BaseException | None, started: float, fp: str,
    ) -> dict[str, Any]:
        """One live call in the cost ledger (DESIGN §8): succeeded, failed or retried."""
        action = rt.action
        usage = response.usage if response is not None else None
        cost = self.prices.cost(action.model or "", usage, "live") if usage is not None else 0.0
        error_text = None
        if error is not None:
            error_text = f"{getattr(error, 'reason', None) or type(error).__name__}: {error}"
        return {
            "run_id": self.run_id, "action": action.name, "unit_key": rec.key, "attempt": attempt,
            "kind": "llm", "provider": request.provider, "model": request.model, "tier": "live",
            "input_tokens": usage.input_tokens if usage else 0,
            "cached_tokens": usage.cached_tokens if usage else 0,
            "cache_write_tokens": usage.cache_write_tokens if usage else 0,
            "output_tokens": usage.output_tokens if usage else 0,
            "cost_usd": cost, "latency_ms": (self.clock.monotonic() - started) * 1000,
            "status": "ok" if error is None else "error", "error": error_text,
            "fingerprint": fp, "created_at": self.clock.time(), "origin": None,
        }

    async def record_call(
        self, rt: ActionRuntime, rec: UnitRecord, attempt: int, request: Request,
        response: Response | None, error: BaseException, started: float, fp: str,
    ) -> None:
        """Ledger a call that did not produce the unit's answer (it may still have cost money)."""
        row = self.usage_row(rt, rec, attempt, request, response, error, started, fp)
        if response is not None:
            # Keep what the model said: the session shows why the attempt was rejected.
            row["error"] = f"{row['error']} | answer: {response.text[:500]}"
        self.progress.spent(rt.name, row["cost_usd"])
        await self.gateway.commit(usage=[row])

    def tool_usage_row(self, rt: ActionRuntime, rec: UnitRecord, attempt: int, started: float,
                       error: str | None, input_hash: str) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "action": rt.name, "unit_key": rec.key, "attempt": attempt,
            "kind": "tool", "provider": "tool", "model": rt.action.function or "", "tier": "live",
            "input_tokens": 0, "cached_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0,
            "cost_usd": 0.0, "latency_ms": (self.clock.monotonic() - started) * 1000,
            "status": "ok" if error is None else "error", "error": error,
            "fingerprint": input_hash, "created_at": self.clock.time(), "origin": None,
        }

    async def record_tool(self, rt: ActionRuntime, rec: UnitRecord, attempt: int, started: float,
                          error: str, input_hash: str) -> None:
        await self.gateway.commit(usage=[self.tool_usage_row(rt, rec, attempt, started, error,
                                                             input_hash)])

    def batch_usage_row(self, rt: ActionRuntime, submitted_by: str, unit_key: str, attempt: int,
                        fingerprint: str, usage: Usage, latency_ms: float) -> dict[str, Any]:
        """One batch item's answer in the ledger, at the batch tier, attributed to the run
        that submitted the batch."""
        return {
            "run_id": submitted_by, "action": rt.name, "unit_key": unit_key, "attempt": attempt,
            "kind": "llm", "provider": rt.action.provider, "model": rt.action.model_name,
            "tier": "batch", "input_tokens": usage.input_tokens,
            "cached_tokens": usage.cached_tokens, "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": self.prices.cost(rt.action.model or "", usage, "batch"),
            "latency_ms": latency_ms, "status": "ok", "error": None, "fingerprint": fingerprint,
            "created_at": self.clock.time(), "origin": None,
        }

    # -- batch items and fan-outs ---------------------------------------------------------------

    def stage(self, items: list[dict[str, Any]]) -> None:
        """Queue staged batch items (``staged:<run>:…``): they wait for the batch step."""
        self.gateway.commit_nowait(batch_items=items)

    def fanned_out(self, fan: str, parent: UnitRecord, items: int, actions: Iterable[str]) -> None:
        """A parent fanned out into ``items`` items: its count is stored before any of its
        items' outcomes (the same group commits, in order)."""
        self.gateway.commit_nowait(fanouts=[{
            "run_id": self.run_id, "action": fan, "parent_key": parent.key, "seq": parent.seq,
            "items": items, "created_at": self.clock.time()}])
        self.progress.fanned_out(fan, parent.key, actions, items)
