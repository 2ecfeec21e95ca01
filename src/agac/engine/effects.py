"""Side effects (E1, E2): a tool action marked ``effect:`` runs at most once per
idempotency key, with its intent recorded before the call (S1) and its receipt after.

For one unit, by the state of its key's row:

- ``succeeded``, ``done`` (resolved by a person), ``compensated``: never called again;
  the unit is answered with the stored receipt (reused);
- ``started`` or ``unknown`` (a crash between the intent and the receipt): an idempotent
  effect is called again with the same key (the service recognizes the repeat); a
  non-idempotent one becomes ``unknown`` and its unit waits on a person (the run pauses,
  exit 75) until ``agac effects resolve KEY --done|--not-done``;
- none, ``failed`` (the function raised), ``not_done``: the intent is written, the
  function called once — an effect is never retried blindly — and the receipt (or the
  failure, ``effect_failed``) recorded.

Nothing here claims that an effect was undone: compensation runs only on request
(``agac effects compensate``).
"""

from __future__ import annotations

import json
import time
import traceback
from typing import TYPE_CHECKING, Any

from agac.config.functions import resolve_function
from agac.engine.context import ToolContext
from agac.engine.crashpoints import maybe_crash
from agac.engine.units import Fail, invoke_tool, tool_output
from agac.errors import RefusedError, UsageError
from agac.store.effects import UNSETTLED_EFFECT_STATES
from agac.store.repository import dumps

if TYPE_CHECKING:
    from agac.config.project import Project
    from agac.engine.actions import ActionRuntime
    from agac.engine.executor import Executor
    from agac.engine.units import Settled
    from agac.store.repository import Store

__all__ = ["DONE_STATES", "compensate_effect", "effect_dict", "resolve_effect", "run_effect"]

DONE_STATES = ("succeeded", "done", "compensated")


async def run_effect(ex: Executor, rt: ActionRuntime, rec: Any, inputs_json: str, input_hash: str,
                     key: str) -> Settled | None:
    """The unit's outcome, or None when it waits on a person (its effect is unknown)."""
    action = rt.action
    effect = action.effect
    assert effect is not None
    row = await ex.gateway.call(ex.store.get_effect, key)
    if row is not None and row.state in DONE_STATES:
        receipt = json.loads(row.receipt) if row.receipt is not None else None
        return await ex.settle(rt, rec, "answered", output=receipt, origin="reused",
                               fingerprint=input_hash)
    if row is not None and row.state in ("started", "unknown") and not effect.idempotent:
        if row.state == "started":
            await ex.gateway.call(ex.store.update_effect, key, state="unknown", lease=ex.gateway.fence)
            await ex.event("effect_unknown", rt.name, rec.key, effect=key, function=row.function)
        ex.effects_waiting.append(
            f"{rt.name}: the effect {key[:12]} of {rec.key} may or may not have happened; settle "
            f"it with `agac effects resolve {key[:12]} --done|--not-done`")
        return None
    async with rt.slots:
        if ex.stopping:
            return None
        await ex.gateway.call(ex.store.start_effect, {
            "key": key, "workflow": ex.workflow.name, "action": action.name, "unit_key": rec.key,
            "function": action.function or "", "idempotent": effect.idempotent,
            "compensate": effect.compensate, "run_id": ex.run_id, "arguments": inputs_json},
            lease=ex.gateway.fence)
        await ex.gateway.durable()
        maybe_crash("effect_started")  # the intent is durable, the function not called yet
        ctx = ToolContext(ex.run_id, ex.workflow.name, action.name, rec.key, None, 1, key)
        await ex.gateway.owned()  # still the run's owner, right before the effect (S3)
        started = time.monotonic()
        try:
            value = await invoke_tool(rt.function, json.loads(inputs_json), ctx)
            maybe_crash("effect_called")  # it happened; the receipt is not recorded yet
            output = tool_output(rt, value)
        except Exception as exc:  # the effect failed: its unit fails, no retry
            detail = exc.detail if isinstance(exc, Fail) else f"{type(exc).__name__}: {exc}"
            tb = traceback.format_exc()
            await ex.gateway.call(ex.store.update_effect, key, state="failed", error=detail,
                                  lease=ex.gateway.fence)
            await ex.record_tool(rt, rec, 1, started, tb, input_hash)
            return await ex.settle(rt, rec, "failed", "effect_failed", detail, origin="call",
                                   fingerprint=input_hash, attempts=1, traceback_text=tb)
        await ex.gateway.call(ex.store.update_effect, key, state="succeeded", receipt=dumps(output),
                              lease=ex.gateway.fence)
        usage = [ex.tool_usage_row(rt, rec, 1, started, None, input_hash)]
        return await ex.settle(rt, rec, "answered", output=output, origin="call",
                               fingerprint=input_hash, attempts=1, usage=usage)


# -- for people: agac effects list / resolve / compensate ------------------------------------


def effect_dict(row: Any) -> dict[str, Any]:
    return {"id": row.key, "workflow": row.workflow, "action": row.action, "record": row.unit_key,
            "function": row.function, "idempotent": bool(row.idempotent), "state": row.state,
            "run_id": row.run_id, "arguments": json.loads(row.arguments),
            "receipt": json.loads(row.receipt) if row.receipt is not None else None,
            "error": row.error, "compensate": row.compensate,
            "resolution": json.loads(row.resolution) if row.resolution else None,
            "created_at": row.created_at, "updated_at": row.updated_at}


def _one(store: Store, ref: str) -> Any:
    rows = store.find_effect(ref)
    if not rows:
        raise UsageError(f"no effect {ref!r}; `agac effects list` shows them")
    if len(rows) > 1:
        raise UsageError(f"{ref!r} names several effects; give more of the id")
    return rows[0]


def resolve_effect(store: Store, ref: str, done: bool) -> dict[str, Any]:
    """E2: a person says whether an effect in ``unknown`` happened. ``--done``: it is never
    called again (its unit is answered without a receipt); ``--not-done``: the next run
    calls it again."""
    row = _one(store, ref)
    if row.state not in UNSETTLED_EFFECT_STATES:
        raise RefusedError(f"effect {row.key[:12]} is {row.state}, not unknown; only an unknown "
                           "effect is resolved")
    state = "done" if done else "not_done"
    store.update_effect(row.key, state=state,
                        resolution=dumps({"state": state, "at": time.time()}))
    store.mark_run_needs_pass(row.workflow)  # its unit can move now: walk the records again
    return effect_dict(store.get_effect(row.key))


def compensate_effect(project: Project, store: Store, ref: str) -> dict[str, Any]:
    """Run the effect's declared compensation once, on request, as
    ``fn({"arguments", "receipt"}, ctx)``. agac records what it returned and never claims
    the effect was undone."""
    import asyncio

    row = _one(store, ref)
    if not row.compensate:
        raise RefusedError(f"action {row.action} declares no compensation (effect: {{compensate: "
                           "module:function}}); nothing was run")
    if row.state not in ("succeeded", "done"):
        raise RefusedError(f"effect {row.key[:12]} is {row.state}; only an effect that happened "
                           "(succeeded, or resolved --done) is compensated")
    fn = resolve_function(row.compensate, project.root)
    ctx = ToolContext(row.run_id, row.workflow, row.action, row.unit_key, None, 1, row.key)
    inputs = {"arguments": json.loads(row.arguments),
              "receipt": json.loads(row.receipt) if row.receipt is not None else None}
    try:
        result = asyncio.run(invoke_tool(fn, inputs, ctx))
    except Exception as exc:
        store.update_effect(row.key, resolution=dumps({"compensation_failed": f"{type(exc).__name__}: {exc}",
                                                       "at": time.time()}))
        raise RefusedError(f"the compensation {row.compensate} raised {type(exc).__name__}: {exc}; "
                           "the effect is unchanged") from exc
    store.update_effect(row.key, state="compensated",
                        resolution=dumps({"compensation": result, "at": time.time()}))
    return effect_dict(store.get_effect(row.key))
