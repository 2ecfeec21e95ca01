"""A unit of an llm action with ``tools:``: a loop of durable turns.

The model is asked; a turn that calls tools is stored (with its ledger row) before any
call runs; the calls run together (:func:`agac.tools.invoke.call_function`: isolated,
timed out, an error told to the model), each result stored as soon as it is back; the
next turn sends the conversation so far. The loop ends when the model answers (accepted,
checked and stored as any answer, under the unit's first request's fingerprint: reused as
any answer) or a bound is reached: ``max_turns`` model turns still calling tools fail the
unit ``max_turns_exceeded``, more calls than ``max_tool_calls`` fail it
``max_tool_calls_exceeded``; each names the call.

In a batch action the same loop runs in rounds: a turn read from a batch result is stored
by the batch's reading (engine/batch/ingest.py); the unit then runs its calls here
(:func:`next_round`) and stages the conversation for the next round's batch.

A call of a function tool marked ``effect:`` goes through the run's effects
(:meth:`agac.engine.ports.Effects.tool_call`, E1/E2): keyed by the record, the function and
its arguments, its stored receipt told instead of a second call; a call whose effect is
unknown stores nothing and the unit waits on a person (:class:`Stopped`).

A crash between steps redoes nothing that is stored (D17): the loop starts by reading the
unit's stored steps in this run, rebuilds the conversation from them, runs only the calls
of the last stored turn whose results are missing, and asks the model only for the turn
after. A turn the model was answering when the process died is asked again (it was in
flight, as any call is: S1).

Each model turn goes through :func:`agac.engine.walk.calls.call_with_retries` like any
call (slot, marks, budget, retries; a turn is not an attempt), which hands a turn that calls
tools to :meth:`ToolLoop.answer_calls`.

Where agac runs the web search (``rt.search``: an Ollama action's ``tools: [web_search]``),
a ``web_search`` call is one more call of the loop (engine/walk/searches.py): its result
stored like a function's, its hits kept with it; the final answer cites every hit of the
loop's searches (:meth:`ToolLoop.cited`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agac.engine.context import ToolContext
from agac.engine.crashpoints import maybe_crash
from agac.engine.requests import effect_id, effect_key, tool_input_hash
from agac.engine.values import Stopped
from agac.engine.walk.calls import call_with_retries
from agac.engine.walk.searches import search_call
from agac.jsontext import dumps, loads
from agac.providers.base import Message, Request, ToolCall, fingerprint_of
from agac.providers.servertools import (
    SEARCH_TOOL,
    SearchHit,
    distinct_citations,
    hit_citation,
)
from agac.store.rows import UsageRow
from agac.tools.invoke import LoadedTool, ToolOutcome, call_function

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import Turns, UnitContext
    from agac.engine.values import Settled, UnitRecord
    from agac.engine.walk.calls import Checker
    from agac.providers.base import Response
    from agac.store.rows import TurnRow

__all__ = ["ToolLoop", "call_with_tools", "carry_over", "first_fingerprints", "next_round"]


async def call_with_tools(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    request: Request,
    fp: str,
    request_json: str,
    checker: Checker | None = None,
) -> Settled:
    """The unit's loop, from its first step not stored to its outcome."""
    assert ctx.turns is not None, "a run with tools has a turn log"
    loop = ToolLoop(ctx, ctx.turns, rt, rec, request, fp)
    start = await loop.resume()
    if not isinstance(start, Request):
        return start
    return await call_with_retries(
        ctx, rt, rec, request, fp, request_json, checker, loop=loop, start=start
    )


async def next_round(
    ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, request: Request, fp: str
) -> Request | Settled:
    """A batch loop's next round for the unit: its stored turns read back (the last read
    from a batch), the calls of the last turn not yet answered run and stored, and the
    request of the next turn — the conversation so far — to stage; or the unit's outcome
    when a bound ends the loop."""
    assert ctx.turns is not None, "a run with tools has a turn log"
    return await ToolLoop(ctx, ctx.turns, rt, rec, request, fp).resume()


async def carry_over(
    ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, request: Request
) -> list[TurnRow]:
    """The unit's stored steps in this run; without any, its loop of the latest earlier
    run that sent the same first request (a refused round's records, a batch adopted
    from that run) carried into this one, so no stored turn is asked again nor stored
    call run again in a later run (none under ``--fresh``)."""
    assert ctx.turns is not None, "a run with tools has a turn log"
    rows = await ctx.turns.load(rt.name, rec.key)
    if rows or ctx.fresh:
        return rows
    return await ctx.turns.adopt(ctx.workflow, rt.name, rec.key, first_fingerprints(rt, request))


@dataclass
class _Turn:
    """A model turn that called tools, at ``step``; its calls take the steps after it."""

    step: int
    text: str
    calls: tuple[ToolCall, ...]
    results: dict[int, str] = field(default_factory=dict)
    """Call index -> the result sent back (what is stored)."""
    paused: tuple[object, ...] = ()
    """A turn the provider paused in a batch (no calls): its content, sent back as is."""
    hits: dict[int, tuple[SearchHit, ...]] = field(default_factory=dict)
    """Call index -> the hits of a web search agac ran for it."""

    @property
    def message(self) -> Message:
        return Message("assistant", self.text, tool_calls=self.calls, paused=self.paused)

    def replies(self) -> list[Message]:
        return [
            Message("tool", self.results[n], tool_call_id=c.id, name=c.name)
            for n, c in enumerate(self.calls)
        ]

    @property
    def next_step(self) -> int:
        return self.step + len(self.calls) + 1


class ToolLoop:
    """One unit's loop: its conversation so far and its bounds."""

    def __init__(
        self,
        ctx: UnitContext,
        turns: Turns,
        rt: ActionRuntime,
        rec: UnitRecord,
        request: Request,
        fp: str,
    ) -> None:
        self.ctx, self.log, self.rt, self.rec = ctx, turns, rt, rec
        self.request, self.fp = request, fp
        self.turns: list[_Turn] = []
        self.tools = {t.definition.name: t for t in rt.tools}

    # -- where the loop stands ---------------------------------------------------------------

    def next_request(self) -> Request:
        """The request of the next model turn: the unit's, then the conversation so far."""
        messages = list(self.request.messages)
        for turn in self.turns:
            messages.append(turn.message)
            messages.extend(turn.replies())
        return replace(self.request, messages=tuple(messages))

    @property
    def calls_made(self) -> int:
        return sum(len(t.calls) for t in self.turns)

    async def resume(self) -> Request | Settled:
        """Rebuild the conversation from the stored steps; finish the last stored turn's
        calls. The request of the next turn, or the unit's outcome when a bound ends it."""
        for row in await carry_over(self.ctx, self.rt, self.rec, self.request):
            self._replay(row)
        if self.turns and len(self.turns[-1].results) < len(self.turns[-1].calls):
            return await self._continue(self.turns[-1])
        bound = self.rt.action.max_turns
        if self.turns and self.turns[-1].paused and len(self.turns) >= bound:
            return await self._fail(
                reason="max_turns_exceeded",
                detail=f"the provider still paused the turn after {len(self.turns)} turns "
                f"(max_turns: {bound})",
            )
        return self.next_request()

    def _replay(self, row: TurnRow) -> None:
        body = loads(row.body)
        assert isinstance(body, dict)
        if row.kind == "model":
            calls = tuple(ToolCall.from_dict(c) for c in body["tool_calls"])  # type: ignore[union-attr, arg-type]
            paused = tuple(body.get("paused") or ())  # type: ignore[arg-type]
            self.turns.append(_Turn(row.step, str(body.get("text") or ""), calls, paused=paused))
        else:
            turn = self.turns[-1]
            n = row.step - turn.step - 1
            turn.results[n] = str(body["content"])
            hits = body.get("hits")
            if isinstance(hits, list):
                turn.hits[n] = tuple(SearchHit.from_dict(h) for h in hits)  # type: ignore[arg-type]

    def cited(self, response: Response) -> Response:
        """The final answer with the hits of the loop's searches as its citations (after
        any it carries), in the order searched, each once."""
        hits = [h for t in self.turns for n in sorted(t.hits) for h in t.hits[n]]
        if not hits:
            return response
        found = distinct_citations([*response.citations, *map(hit_citation, hits)])
        return replace(response, citations=found)

    def _search_ordinal(self, turn: _Turn, n: int) -> int:
        """Which of the loop's searches call ``n`` of ``turn`` is (1-based), in the order
        the model asked: what ``max_uses`` bounds, the same after a crash."""
        before = sum(
            c.name == SEARCH_TOOL for t in self.turns if t.step < turn.step for c in t.calls
        )
        return before + sum(c.name == SEARCH_TOOL for c in turn.calls[: n + 1])

    # -- one turn -----------------------------------------------------------------------------

    async def answer_calls(
        self, current: Request, response: Response, usage: UsageRow
    ) -> Request | Settled:
        """Store the turn (with its ledger row), then run its calls."""
        step = self.turns[-1].next_step if self.turns else 0
        turn = _Turn(step, response.text, response.tool_calls)
        body = {
            "text": response.text,
            "tool_calls": [c.to_dict() for c in turn.calls],
            "fingerprint": current.fingerprint(),
            "usage": response.usage.to_dict(),
        }
        await self.log.write(self.rt.name, self.rec.key, step, "model", dumps(body), [usage])
        self.turns.append(turn)
        maybe_crash("turn_stored")
        return await self._continue(turn)

    async def _continue(self, turn: _Turn) -> Request | Settled:
        """The bounds, then the turn's calls not yet answered, together."""
        action = self.rt.action
        if len(self.turns) >= action.max_turns:
            last = turn.calls[-1]
            return await self._fail(
                reason="max_turns_exceeded",
                detail=f"the model still called tools after {len(self.turns)} turns "
                f"(max_turns: {action.max_turns}); its last call: {_named(last)}",
            )
        bound = action.max_tool_calls
        if bound is not None and self.calls_made > bound:
            over = turn.calls[bound - (self.calls_made - len(turn.calls))]
            return await self._fail(
                reason="max_tool_calls_exceeded",
                detail=f"the model asked for {self.calls_made} tool calls (max_tool_calls: "
                f"{bound}); the call over the bound: {_named(over)}",
            )
        missing = [n for n in range(len(turn.calls)) if n not in turn.results]
        stored = await asyncio.gather(*(self._call(turn, n) for n in missing))
        if not all(stored):
            raise Stopped()  # an effect is unknown: the unit waits on a person (E2)
        return self.next_request()

    async def _call(self, turn: _Turn, n: int) -> bool:
        """Run one call and store its result (with its ledger row) before it counts;
        False: the call's effect is unknown and nothing is stored (the unit waits)."""
        call = turn.calls[n]
        if call.name == SEARCH_TOOL and self.rt.search is not None:
            await self._search(turn, n)
            return True
        tool = self.tools.get(call.name)
        clock = self.ctx.control.clock
        started = clock.monotonic()
        effect: dict[str, str] | None = None
        if tool is None:  # a name the request did not offer cannot come as tool_use
            outcome = ToolOutcome(None, f"there is no tool {call.name!r}")
        elif tool.spec.effect is not None:
            context = self._context(tool, call)
            key = context.idempotency_key
            done = await self.ctx.effects.tool_call(
                self.rt, self.rec, tool, call.arguments, key, context
            )
            if done.outcome is None:
                return False
            outcome, effect = done.outcome, {"id": effect_id(key), "state": done.state}
        else:
            outcome = await call_function(tool, call.arguments, self._context(tool, call))
        maybe_crash("tool_called")
        error = self.ctx.out.redact(outcome.error) if outcome.error is not None else None
        content = ToolOutcome(outcome.output, error).content
        latency = (clock.monotonic() - started) * 1000
        body: dict[str, object] = {
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "content": content,
            "error": error,
            "latency_ms": round(latency, 3),
        }
        if effect is not None:
            body["effect"] = effect
        usage = self._tool_row(tool, call, latency, error)
        step = turn.step + 1 + n
        await self.log.write(self.rt.name, self.rec.key, step, "tool", dumps(body), [usage])
        turn.results[n] = content
        maybe_crash("tool_stored")
        return True

    async def _search(self, turn: _Turn, n: int) -> None:
        """Run one ``web_search`` call and store its result, with its hits and its
        ledger row, before it counts."""
        call = turn.calls[n]
        done = await search_call(
            self.ctx,
            self.rt,
            self.rec,
            self.request,
            call,
            self._search_ordinal(turn, n),
            len(self.turns),
            tool_input_hash(call.name, _canonical_arguments(call.arguments)),
        )
        maybe_crash("tool_called")
        body: dict[str, object] = {
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "content": done.content,
            "error": done.error,
            "latency_ms": round(done.row.latency_ms, 3),
            "hits": [h.to_dict() for h in done.hits],
        }
        if done.code is not None:
            body["code"] = done.code
        step = turn.step + 1 + n
        await self.log.write(self.rt.name, self.rec.key, step, "tool", dumps(body), [done.row])
        turn.results[n], turn.hits[n] = done.content, done.hits
        maybe_crash("tool_stored")

    def _context(self, tool: LoadedTool, call: ToolCall) -> ToolContext:
        ctx, rec = self.ctx, self.rec
        key = effect_key(
            ctx.tenant,
            ctx.workflow,
            self.rt.name,
            rec.key,
            tool_input_hash(tool.spec.function, _canonical_arguments(call.arguments)),
        )
        return ToolContext(
            ctx.run_id,
            ctx.workflow,
            self.rt.name,
            rec.record_key,
            rec.item_key,
            len(self.turns),
            key,
            tenant=ctx.tenant,
        )

    def _tool_row(
        self, tool: LoadedTool | None, call: ToolCall, latency: float, error: str | None
    ) -> UsageRow:
        """The call in the ledger: a tool invocation (no tokens, no cost)."""
        return UsageRow(
            self.ctx.run_id,
            self.rt.name,
            self.rec.key,
            len(self.turns),
            "tool",
            "tool",
            tool.spec.function if tool is not None else call.name,
            "live",
            0,
            0,
            0,
            0,
            0.0,
            latency,
            "ok" if error is None else "error",
            error,
            tool_input_hash(call.name, _canonical_arguments(call.arguments)),
            self.ctx.control.clock.time(),
        )

    async def _fail(self, *, reason: str, detail: str) -> Settled:
        return await self.ctx.out.settle(
            self.rt,
            self.rec,
            "failed",
            reason,
            detail,
            origin="call",
            fingerprint=self.fp,
            attempts=1,
        )


def first_fingerprints(rt: ActionRuntime, request: Request) -> frozenset[str]:
    """What a loop's first turn stored as the fingerprint of ``request`` it sent: the
    request's own (online) or that of the action's canonical form of it (a batch line)."""
    return frozenset({request.fingerprint(), fingerprint_of(rt.identify(request)[0])})


def _named(call: ToolCall) -> str:
    """A call as a person reads it: ``lookup({"q": "x"})``."""
    args = call.arguments if len(call.arguments) <= 200 else call.arguments[:200] + "…"
    return f"{call.name}({args})"


def _canonical_arguments(arguments: str) -> str:
    """The arguments as canonical JSON (the text as written when it is not JSON)."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments
