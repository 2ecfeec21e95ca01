"""What happens to one unit (record x action) in a run.

Order of decisions for a unit, each final for it:

1. already settled in this run (an earlier invocation, or carried over by a retry) -> as is
   (the walk does not call the unit then);
2. the record is invalid -> ``failed`` (``invalid_input``/``duplicate_key``) where the
   action reads records directly (no dependencies), ``skipped upstream_failed`` below;
3. a dependency failed -> ``skipped upstream_failed``; a dependency skipped -> skipped with
   the same reason (so a guard's skip flows down as ``guard`` and a run can still succeed);
4. the run is stopping (Ctrl-C) -> no outcome: the unit stays pending for the next run;
5. the guard is false -> ``skipped guard``; an action with ``approval:`` asks its gate;
6. llm: render, fingerprint; a failure carried over from the previous run with the same
   fingerprint (R1 c) -> ``failed`` with the same reason, no call; an answer stored under
   the fingerprint (S5) -> ``answered`` (reused); a batch action -> its batch unit
   (engine/batch/units.py); an identical request in flight in this run -> share its
   answer (single-flight); else call with retries (engine/walk/calls.py).
   tool: the same with the tool-result cache instead of answers (engine/walk/tools.py).

A unit reports only through its :class:`agac.engine.ports.UnitContext`.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from agac.engine.actions import is_batched
from agac.engine.ports import Act
from agac.engine.requests import build_request
from agac.engine.values import Settled
from agac.engine.walk.calls import call_with_retries
from agac.engine.walk.tools import run_tool
from agac.prompt.render import RenderError
from agac.providers.base import fingerprint_of

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import UnitContext
    from agac.engine.values import UnitRecord
    from agac.providers.base import Request
    from agac.store.values import Origin

__all__ = ["act", "run_unit"]


async def run_unit(
    ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, payload: Any,
    results: dict[str, Settled], extra: dict[str, Any] | None = None,
) -> Settled | None:
    """The unit's outcome, or None when it stays pending (it waits on a batch, a person,
    an effect, or the run is stopping). ``extra`` are roots the unit sees besides
    ``source`` and its ancestors' outputs: a fan-out's item, a join's
    ``fulfilled``/``rejected``/``skipped`` (engine/walk/walker.py). A dependency missing
    from ``results`` is a join's per-item input, judged there."""
    action = rt.action
    out = ctx.out
    if rec.reason:
        if not action.dependencies:
            return await out.settle(rt, rec, "failed", rec.reason, rec.error)
        return await out.settle(rt, rec, "skipped", "upstream_failed", "the input record is invalid")
    for dep in action.dependencies:
        r = results.get(dep)
        if r is None:
            continue
        if r.status == "failed":
            return await out.settle(rt, rec, "skipped", "upstream_failed", f"{dep} failed: {r.reason}")
        if r.status == "skipped":
            return await out.settle(rt, rec, "skipped", r.reason, f"{dep} was skipped: {r.reason}")
    if ctx.control.stopping:
        return None
    outputs = {a: r.output for a in action.ancestors
               if (r := results.get(a)) is not None and r.status == "answered"}
    view = rt.view.build(payload, outputs)
    if extra:
        view.update(extra)
    try:
        if rt.guard is not None and not _guard(rt, view):
            return await out.settle(rt, rec, "skipped", "guard", f"guard {action.when!r} is false")
        stopped = ctx.control.action_failed(rt.name)
        if stopped is not None:
            return await out.settle(rt, rec, "failed", "provider_error", stopped)
        if action.approval is not None and ctx.approvals is not None:
            gated = await ctx.approvals.gate(ctx, rt, rec, view)  # A1
            if not isinstance(gated, Act):
                return gated
            return await act(ctx, rt, rec, gated.view, gated.request)
        return await act(ctx, rt, rec, view)
    except RenderError as exc:
        return await out.settle(rt, rec, "failed", "render_error", str(exc))


async def act(ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, view: dict[str, Any],
              request: Request | None = None) -> Settled | None:
    """Call the unit's tool with ``view`` as its inputs, or send its llm request (rendered
    from ``view``, or ``request`` as given: an approved proposal's)."""
    if rt.action.kind == "tool":
        return await run_tool(ctx, rt, rec, view)
    return await _run_llm(ctx, rt, rec, view, request)


def _guard(rt: ActionRuntime, view: dict[str, Any]) -> bool:
    from jinja2.exceptions import UndefinedError

    guard = rt.guard
    assert guard is not None
    try:
        return bool(guard(view))
    except UndefinedError:
        return False
    except Exception as exc:
        raise RenderError(f"guard {rt.action.when!r} failed: {type(exc).__name__}: {exc}") from exc


async def _run_llm(ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, view: dict[str, Any],
                   given: Request | None = None) -> Settled | None:
    batch = ctx.batch if ctx.batch is not None and is_batched(rt) else None
    if batch is not None:
        own = batch.own_item(rt, rec.key)
        if own is not None and batch.own_item_decides(own):
            # Staged or sent by this very run, from the same inputs: its fingerprint is
            # this unit's, so the unit needs no rendering to wait on it or to settle.
            return await batch.settle_from_own_item(rt, rec, own)
    prefetched = ctx.memory.take_prefetched(rt.name, rec.key)
    if given is not None:  # an approved proposal's request, not the rendered one
        prefetched = None
    if prefetched is not None:
        request, request_json, fp, stored = prefetched
    else:
        request = given if given is not None else build_request(rt, view)
        request_json = rt.canonical.of(request) if rt.canonical is not None else request.canonical()
        fp = fingerprint_of(request_json)
        stored = None if ctx.fresh else await ctx.lookups.lookup_answer(fp)
    carried = ctx.memory.carried_failure(rt.name, rec.key, fp)
    if carried is not None:
        return await ctx.out.settle(rt, rec, "failed", carried.reason, carried.detail,
                                    origin="carried", fingerprint=fp)
    if ctx.fresh and batch is not None and batch.answer_is_ours(rt, rec, fp):
        stored = await ctx.lookups.lookup_answer(fp)  # --fresh still reads its own batches
    if stored is not None:
        origin: Origin = "reused"
        attempts = 0
        if batch is not None:
            origin, attempts = batch.origin(rt, rec, fp)
        return await ctx.out.settle(rt, rec, "answered", output=json.loads(stored), origin=origin,
                                    fingerprint=fp, output_json=stored, attempts=attempts)
    if batch is not None:
        return await batch.unit(rt, rec, request_json, fp)
    return await _single_flight(ctx, rt, rec, request, request_json, fp)


async def _single_flight(ctx: UnitContext, rt: ActionRuntime, rec: UnitRecord, request: Request,
                         request_json: str, fp: str) -> Settled | None:
    """S5: an identical request in flight in this run is asked once; the others share its
    result (answered units as ``reused``)."""
    inflight = ctx.memory.inflight
    shared = inflight.get(fp)
    if shared is not None:
        got = await asyncio.shield(shared)
        return await ctx.out.settle(rt, rec, got.status, got.reason, got.detail, output=got.output,
                                    origin="reused" if got.status == "answered" else "call",
                                    fingerprint=fp)
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    inflight[fp] = fut
    try:
        called = await call_with_retries(ctx, rt, rec, request, fp, request_json)
        fut.set_result(called)
    except BaseException as exc:
        fut.set_exception(exc)
        fut.exception()  # mark retrieved: waiters re-raise it themselves
        raise
    finally:
        inflight.pop(fp, None)
    return called
