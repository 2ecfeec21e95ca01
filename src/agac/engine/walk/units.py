"""What happens to one unit (record x action) in a run: the one decision
(engine/decision.py) applied.

The unit gathers the facts the decision asks for — the view and its guard, the rendered
request and its fingerprint (taken as rendered ahead by the walk when it was), the answer
stored under it — and does what the decision says: settles the outcome, stages the unit
for a batch or adopts a batch out (engine/batch/units.py), asks the approval gate, hands
a tool with ``effect:`` to the effects room, or sends (an llm call with retries,
single-flight: engine/walk/calls.py; a tool: engine/walk/tools.py).

A unit reports only through its :class:`agac.engine.ports.UnitContext`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agac.engine.actions import is_batched
from agac.engine.checks import verdicts_of
from agac.engine.crashpoints import maybe_crash
from agac.engine.decision import (
    NOT_YET,
    Adopt,
    Need,
    Pending,
    Settle,
    Stage,
    UnitFacts,
    decide,
    own_item,
)
from agac.engine.judges import grade
from agac.engine.ports import Act
from agac.engine.requests import build_request, effect_key, tool_input_hash, tool_reuse_key
from agac.engine.walk.calls import call_with_retries
from agac.engine.walk.judging import Judging, judge_answer
from agac.engine.walk.toolloop import call_with_tools, carry_over, next_round
from agac.engine.walk.tools import call_tool
from agac.jsontext import JSON, JSONObject, dumps
from agac.media import AttachmentError
from agac.prompt.render import RenderError
from agac.providers.base import Request, canonical_json

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from agac.config.model import CheckSpec
    from agac.engine.actions import ActionRuntime
    from agac.engine.checks import Verdict
    from agac.engine.decision import Decision
    from agac.engine.ports import BatchUnits, UnitContext
    from agac.engine.values import Settled, UnitRecord

__all__ = ["run_unit", "settle"]


def run_unit(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    payload: JSONObject | None,
    results: dict[str, Settled],
    extra: JSONObject | None = None,
) -> Coroutine[object, None, Settled | None]:
    """The unit's outcome, or None when it stays pending (it waits on a batch, a person,
    an effect, or the run is stopping). ``extra`` are roots the unit sees besides
    ``source`` and its ancestors' outputs: a fan-out's item, a join's
    ``fulfilled``/``rejected``/``skipped`` (engine/walk/walker.py). A dependency missing
    from ``results`` is a join's per-item input, judged there."""
    return _Unit(ctx, rt, rec, payload, results, extra).run()


def settle(
    ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, d: Settle
) -> Coroutine[object, None, Settled]:
    """Write the outcome a decision gave the unit."""
    return ctx.out.decided(rt, rec, d)


class _Unit(UnitFacts):
    """One unit being decided: its facts (it is the :class:`UnitFacts` that
    :func:`decide` reads, not a holder of one), and what gathering them produced (the
    view, the request and its canonical JSON, a tool's inputs)."""

    __slots__ = (
        "args_hash",
        "batch_units",
        "ctx",
        "extra",
        "given",
        "payload",
        "rec",
        "request",
        "request_json",
        "results",
        "rt",
        "sharing",
        "view",
    )

    def __init__(
        self,
        ctx: UnitContext,
        rt: ActionRuntime,
        rec: UnitRecord,
        payload: JSONObject | None,
        results: dict[str, Settled],
        extra: JSONObject | None,
    ) -> None:
        self.ctx, self.rt, self.rec = ctx, rt, rec
        self.payload, self.results, self.extra = payload, results, extra
        action = rt.action
        batch = ctx.batch if ctx.batch is not None and is_batched(rt) else None
        self.batch_units: BatchUnits | None = batch
        control = ctx.control
        UnitFacts.__init__(
            self,
            ctx.run_id,
            kind=action.kind,
            reads_records=not action.dependencies,
            record_reason=rec.reason,
            record_error=rec.error,
            upstream=[(d, results.get(d)) for d in action.dependencies],
            stopping=control.stopping,
            guard=NOT_YET if rt.guard is not None else None,
            guard_text=action.when,
            action_failed=control.action_failed(rt.name),
            action_paused=control.action_paused(rt.name),
            gated=action.approval is not None and ctx.approvals is not None,
            effect=action.effect is not None,
            cache=action.cache,
            fresh=ctx.fresh,
            batch=batch is not None,
            items=batch.items_of(rt, rec.key) if batch else (),
            carried=ctx.memory.carried.get((rt.name, rec.key)) if ctx.memory.carried else None,
            live=batch is not None and control.is_live(rt.name, rec.key),
            held=control.held(rt.name) is not None,
        )
        if batch is not None or action.kind == "tool":
            self.deadline_passed = control.deadline_passed()
            self.budget_exhausted = ctx.budget is not None and ctx.budget.exhausted
        self.view: JSONObject | None = None
        self.given: Request | None = None
        """An approved proposal's request: sent as approved, not as rendered."""
        self.request: Request | None = None
        self.request_json = ""
        self.args_hash = ""
        """A tool's arguments hash: what its idempotency key is made of."""
        self.sharing: asyncio.Future[Settled] | None = None
        """Its call's result for identical requests that came while it was in flight (S5)."""

    async def run(self) -> Settled | None:
        while True:
            d = decide(self)
            if type(d) is Need:
                try:
                    await self._learn(d)
                except RenderError as exc:
                    self.render_error, self.render_reason = str(exc), exc.reason
                except AttachmentError as exc:
                    self.attachment_error = (exc.reason or "unsupported_attachment", str(exc))
                continue
            return await self._apply(d)

    # -- gathering facts ----------------------------------------------------------------------

    def _view(self) -> JSONObject:
        if self.view is None:
            action, results = self.rt.action, self.results
            outputs = {
                a: r.output
                for a in action.ancestors
                if (r := results.get(a)) is not None and r.status == "answered"
            }
            view = self.rt.view.build(self.payload, outputs)
            if self.extra:
                view.update(self.extra)
            self.view = view
        return self.view

    async def _learn(self, need: Need) -> None:
        f, ctx, rt = self, self.ctx, self.rt
        if need.fact == "view":
            f.guard = _guard(rt, self._view())
        elif need.fact == "request":
            self._render()
        elif need.fact == "answer":
            fp = f.fingerprint
            assert fp is not NOT_YET
            if rt.action.kind == "tool":
                f.stored = await ctx.lookups.lookup_tool_result(fp)
            else:
                f.stored = await ctx.lookups.lookup_answer(fp)
        else:  # the answer of this run's own batch item
            own = own_item(f.items, ctx.run_id)
            assert self.batch_units is not None and own is not None
            f.own_answer = await self.batch_units.own_answer(own.fingerprint)

    def _render(self) -> None:
        """The request (an approved one as given, else as rendered ahead by the walk, else
        rendered now) with its canonical JSON and fingerprint; a tool's inputs and hash."""
        f, rt = self, self.rt
        if rt.action.kind == "tool":
            try:
                self.request_json = canonical_json(self._view())
            except (TypeError, ValueError) as exc:  # pragma: no cover - views are JSON data
                f.inputs_error = f"inputs are not JSON: {exc}"
                return
            self.args_hash = tool_input_hash(rt.action.function, self.request_json)
            f.fingerprint = (
                self.args_hash
                if rt.action.effect is not None
                else tool_reuse_key(rt, self.ctx.workflow, self.rec.key, self.request_json)
            )
            return
        ahead = self.ctx.memory.take_prefetched(rt.name, self.rec.key)
        if ahead is not None and self.given is None:  # rendered ahead, its answer looked up
            self.request, self.request_json, f.fingerprint, f.stored = ahead
            return
        request = self.given if self.given is not None else build_request(rt, self._view())
        self.request = request
        self.request_json, f.fingerprint = rt.identify(request, self.rec.key)

    # -- acting on the decision ----------------------------------------------------------------

    async def _apply(self, d: Decision) -> Settled | None:
        ctx, rt, rec = self.ctx, self.rt, self.rec
        if isinstance(d, Settle):
            if rt.action.checks and d.status == "answered" and d.output_json is not None:
                checked = await self._checked(d)
                if not isinstance(checked, Settle):
                    return checked  # waits on a batch round, or a live repair settled it
                d = checked
            return await settle(ctx, rt, rec, d)
        if isinstance(d, Pending):
            return None
        if isinstance(d, Stage):
            fp = self.fingerprint
            assert self.batch_units is not None and fp is not NOT_YET
            request_json = self.request_json
            if d.continues or rt.tool_defs:  # a batch tool loop: its calls, then the next turn
                assert self.request is not None
                turn = await next_round(ctx, rt, rec, self.request, fp)
                if not isinstance(turn, Request):
                    return turn
                request_json = rt.identify(turn)[0]
            self.batch_units.stage(rt, rec, request_json, fp, d.attempt)
            return None
        if isinstance(d, Adopt):
            assert self.batch_units is not None
            if rt.tool_defs and self.request is not None:  # its loop so far, for its counts
                await carry_over(ctx, rt, rec, self.request)
            self.batch_units.adopt(d.batches)  # B0: still needed
            return None
        assert not isinstance(d, Need)
        if d.what == "gate":
            return await self._gate()
        fp = self.fingerprint
        assert fp is not NOT_YET
        if d.what == "effect":
            key = effect_key(ctx.tenant, ctx.workflow, rt.name, rec.key, fp)
            return await ctx.effects.run(ctx, rt, rec, self.request_json, fp, key)
        if rt.action.kind == "tool":
            key = effect_key(ctx.tenant, ctx.workflow, rt.name, rec.key, self.args_hash)
            return await call_tool(ctx, rt, rec, self._view(), self.request_json, fp, key)
        return await self._call(fp)

    async def _call(self, fp: str) -> Settled | None:
        """The unit's llm call (its tool loop, its checks), asked once in this run (S5)."""
        ctx, rt, rec = self.ctx, self.rt, self.rec
        assert self.request is not None
        inflight = ctx.memory.inflight
        leader = inflight.get(fp)
        if leader is not None:
            got = await asyncio.shield(leader.shared())
            return await self._share(got, fp)
        inflight[fp] = self  # S5: an identical request in flight in this run is asked once
        try:
            checker = self._checker if rt.action.checks else None
            ask = call_with_tools if rt.loops else call_with_retries
            settled = await ask(ctx, rt, rec, self.request, fp, self.request_json, checker)
        except BaseException as exc:
            if self.sharing is not None:
                self.sharing.set_exception(exc)
                self.sharing.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            inflight.pop(fp, None)
        if self.sharing is not None:
            self.sharing.set_result(settled)
        if self.live:
            maybe_crash("hybrid_live")  # B13: a live answer is durable, the next not yet sent
        return settled

    def shared(self) -> asyncio.Future[Settled]:
        """S5: this unit's result, for an identical request that came while its call was
        in flight (made on the first ask)."""
        if self.sharing is None:
            self.sharing = asyncio.get_running_loop().create_future()
        return self.sharing

    async def _share(self, got: Settled, fp: str) -> Settled | None:
        """S5: the result of an identical request in flight, as this unit's (answered
        units as ``reused``). With checks, the shared answer is judged for this unit, as
        any answer it did not ask (its own record may judge it otherwise)."""
        ctx, rt, rec = self.ctx, self.rt, self.rec
        answer = got.status == "answered" or got.reason == "check_failed"
        if rt.action.checks and answer and got.output is not None:
            d = Settle("answered", origin="reused", fingerprint=fp, output_json=dumps(got.output))
            checked = await self._checked(d)
            return await settle(ctx, rt, rec, checked) if isinstance(checked, Settle) else checked
        return await ctx.out.settle(
            rt,
            rec,
            got.status,
            got.reason,
            got.detail,
            output=got.output,
            origin="reused" if got.status == "answered" else "call",
            fingerprint=fp,
        )

    async def _checker(self, answer: JSON, attempt: int) -> tuple[Verdict, ...]:
        """The checks' verdicts on ``answer``; a judge is asked live (engine/judges.py)."""
        ctx, rt, rec = self.ctx, self.rt, self.rec

        async def grader(check: CheckSpec, scope: dict[str, Any]) -> Verdict:
            return await grade(ctx, rt, rec, check, scope, attempt)

        return await verdicts_of(rt.action.checks, self._view(), answer, grader)

    async def _checked(self, d: Settle) -> Settle | Settled | None:
        """An answer this run did not ask (reused, or read from a batch) judged by the
        action's checks and repaired (engine/walk/judging.py): the outcome to write, the
        one a live repair wrote, or None while a judge or a repair waits on a batch round
        (a batch action's follow-ups, unless it went live)."""
        ctx, rt = self.ctx, self.rt
        batch = self.batch_units if not self.live else None
        j = Judging(ctx, rt, self.rec, self._view(), self._unit_request, batch, self._repair_live)
        try:
            return await judge_answer(j, d)
        except RenderError as exc:  # the unit's request, for a repair
            return d._replace(status="failed", reason=exc.reason, detail=str(exc), output_json=None)

    def _unit_request(self) -> Request:
        """The unit's request, rendered now when it was not (an answer read from a batch)."""
        if self.request is None:
            self._render()
        assert self.request is not None
        return self.request

    async def _repair_live(self, request: Request, text: str, fp: str, repairs: int) -> Settled:
        """A repair of an answer this run did not ask, asked live by the call path."""
        return await call_with_retries(
            self.ctx,
            self.rt,
            self.rec,
            request,
            fp,
            text,
            self._checker,
            repairs=repairs,
            base=self._unit_request(),
        )

    async def _gate(self) -> Settled | None:
        """A1: the gate settles the unit, lets it wait, or lets it act with the approved
        inputs (or request); the decision then goes on from there."""
        approvals = self.ctx.approvals
        assert approvals is not None
        try:
            gated = await approvals.gate(self.ctx, self.rt, self.rec, self._view())
        except RenderError as exc:
            self.render_error, self.render_reason = str(exc), exc.reason
            return await self.run()
        except AttachmentError as exc:
            self.attachment_error = (exc.reason or "unsupported_attachment", str(exc))
            return await self.run()
        if not isinstance(gated, Act):
            return gated
        f = self
        f.gated = False
        self.view, self.given = gated.view, gated.request
        f.fingerprint, f.stored = NOT_YET, NOT_YET
        return await self.run()


def _guard(rt: ActionRuntime, view: JSONObject) -> bool:
    guard = rt.guard
    assert guard is not None
    return guard.holds(view)
