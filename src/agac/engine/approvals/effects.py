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

A function tool of an llm action marked ``effect:`` follows the same rules per call of
its tool loop (:meth:`Effects.tool_call`): the call's key is the unit's and the hash of the
function and its canonical arguments, so the same call — asked again after a crash, later
in the loop or in a later run — is the same effect. Its receipt is sent back to the model
without calling the function again; a call whose effect is unknown leaves its unit
waiting on a person, like a tool action's. A call that timed out may still be running:
its effect is unknown too.

Nothing here claims that an effect was undone: compensation runs only on request
(``agac effects compensate``).

Keys start with the run's tenant (``<tenant>:<hash>``, T2); people name an effect by the
hash (:func:`agac.engine.requests.effect_id`) and see only their tenant's. An effect that
was in flight when the store was upgraded to tenants was called with its old key (kept
in ``resolution.key_before_tenants``): it is never called again by itself, whatever its
``idempotent`` says — the service it called knows it by that old key — until a person
settles it.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agac.config.functions import resolve_function
from agac.engine.context import ToolContext
from agac.engine.crashpoints import maybe_crash
from agac.engine.ports import LoopEffect
from agac.engine.requests import Fail, effect_id, invoke_tool, tool_output
from agac.errors import NotFound, RefusedError
from agac.jsontext import dumps, storable_text
from agac.providers.registry import credential_env_names
from agac.redaction import Redactor
from agac.store.effects import UNSETTLED_EFFECT_STATES
from agac.tools.invoke import LoadedTool, ToolOutcome, argument_error, call_function
from agac.usercode import describe, fails_only_its_unit

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.config.project import Project
    from agac.engine.actions import ActionRuntime
    from agac.engine.outcomes.gateway import StoreGateway
    from agac.engine.outcomes.writer import OutcomeWriter
    from agac.engine.ports import UnitContext
    from agac.engine.values import RunControl, Settled, UnitRecord
    from agac.store.repository import Store

__all__ = [
    "DONE_STATES",
    "Effects",
    "compensate_effect",
    "effect_dict",
    "resolve_effect",
]

DONE_STATES = ("succeeded", "done", "compensated")


class Effects:
    """The effects of one run's tool actions marked ``effect:`` (implements
    :class:`agac.engine.ports.Effects`)."""

    def __init__(
        self,
        *,
        run_id: str,
        workflow: str,
        tenant: str,
        store: Store,
        gateway: StoreGateway,
        out: OutcomeWriter,
        control: RunControl,
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.tenant = tenant
        self.store = store
        self.gateway = gateway
        self.out = out
        self.control = control
        self.waiting: list[str] = []
        """Units whose non-idempotent effect is unknown: they wait on a person (E2)."""

    async def run(
        self,
        ctx: UnitContext,
        rt: ActionRuntime,
        rec: UnitRecord,
        inputs_json: str,
        input_hash: str,
        key: str,
    ) -> Settled | None:
        """The unit's outcome, or None when it waits on a person (its effect is unknown)."""
        effect = rt.action.effect
        assert effect is not None
        row = await self.gateway.call(self.store.get_effect, key)
        if row is not None and row.state in DONE_STATES:
            receipt = json.loads(row.receipt) if row.receipt is not None else None
            return await self.out.settle(
                rt, rec, "answered", output=receipt, origin="reused", fingerprint=input_hash
            )
        if (
            row is not None
            and row.state in ("started", "unknown")
            and (not effect.idempotent or _called_before_tenants(row))
        ):
            await self._unknown(rt.name, rec.key, key, row.function, row.state)
            return None
        async with rt.slots:
            if self.control.stopping:
                return None
            return await self._call(rt, rec, inputs_json, input_hash, key)

    async def _unknown(
        self, action: str, unit_key: str, key: str, function: str, state: str
    ) -> None:
        """E2: the effect may or may not have happened; its unit waits on a person."""
        if state != "unknown":
            await self.gateway.call(
                self.store.update_effect, key, state="unknown", lease=self.gateway.fence
            )
            await self.out.event("effect_unknown", action, unit_key, effect=key, function=function)
        ref = effect_id(key)[:12]
        self.waiting.append(
            f"{action}: the effect {ref} of {unit_key} may or may not have happened; "
            f"settle it with `agac effects resolve {ref} --done|--not-done`"
        )

    async def tool_call(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        tool: LoadedTool,
        arguments: str,
        key: str,
        tool_ctx: ToolContext,
    ) -> LoopEffect:
        """One call of a function tool marked ``effect:`` in ``rec``'s tool loop, by the
        state of its key: the receipt of an effect done before, a wait on a person for an
        unknown one, else the intent (S1), the call, and its receipt or failure."""
        effect = tool.spec.effect
        assert effect is not None
        wrong = argument_error(tool, arguments)
        if wrong is not None:
            return LoopEffect(wrong, "not_called")  # never called: no intent, no effect
        row = await self.gateway.call(self.store.get_effect, key)
        if row is not None and row.state in DONE_STATES:
            # resolved --done by a person: no receipt, the model is told it happened
            told = row.receipt if row.receipt is not None else json.dumps({"effect": row.state})
            return LoopEffect(ToolOutcome(told), "reused")
        if (
            row is not None
            and row.state in ("started", "unknown")
            and (not effect.idempotent or _called_before_tenants(row))
        ):
            await self._unknown(rt.name, rec.key, key, row.function, row.state)
            return LoopEffect(None, "unknown")
        await self.gateway.call(
            self.store.start_effect,
            {
                "key": key,
                "tenant": self.tenant,
                "workflow": self.workflow,
                "action": rt.name,
                "unit_key": rec.key,
                "function": tool.spec.function,
                "idempotent": effect.idempotent,
                "compensate": effect.compensate,
                "run_id": self.run_id,
                "arguments": dumps(json.loads(arguments or "{}")),
            },
            lease=self.gateway.fence,
        )
        await self.gateway.durable()
        maybe_crash("effect_started")
        await self.gateway.owned()  # still the run's owner, right before the effect (S3)
        outcome = await call_function(tool, arguments, tool_ctx)
        maybe_crash("effect_called")
        return await self._receipt(rt, rec, tool, key, outcome, idempotent=effect.idempotent)

    async def _receipt(
        self,
        rt: ActionRuntime,
        rec: UnitRecord,
        tool: LoadedTool,
        key: str,
        outcome: ToolOutcome,
        *,
        idempotent: bool,
    ) -> LoopEffect:
        """A loop call's effect recorded: succeeded with its receipt, failed with its
        error, or unknown when it timed out (a non-idempotent one then waits)."""
        fence = self.gateway.fence
        error = self.out.redact(outcome.error) if outcome.error is not None else None
        told = ToolOutcome(outcome.output, error, outcome.timed_out)
        if outcome.timed_out:
            await self.gateway.call(
                self.store.update_effect, key, state="unknown", error=error, lease=fence
            )
            await self.out.event(
                "effect_unknown", rt.name, rec.key, effect=key, function=tool.spec.function
            )
            if idempotent:
                return LoopEffect(told, "unknown")  # called again with its key if asked again
            await self._unknown(rt.name, rec.key, key, tool.spec.function, "unknown")
            return LoopEffect(None, "unknown")
        if error is not None:
            await self.gateway.call(
                self.store.update_effect, key, state="failed", error=error, lease=fence
            )
            return LoopEffect(told, "failed")
        await self.gateway.call(
            self.store.update_effect, key, state="succeeded", receipt=outcome.output, lease=fence
        )
        return LoopEffect(told, "succeeded")

    async def _call(
        self, rt: ActionRuntime, rec: UnitRecord, inputs_json: str, input_hash: str, key: str
    ) -> Settled:
        """Intent (S1), the call, then its receipt or its failure — never retried."""
        action = rt.action
        assert action.effect is not None
        await self.gateway.call(
            self.store.start_effect,
            {
                "key": key,
                "tenant": self.tenant,
                "workflow": self.workflow,
                "action": action.name,
                "unit_key": rec.key,
                "function": action.function or "",
                "idempotent": action.effect.idempotent,
                "compensate": action.effect.compensate,
                "run_id": self.run_id,
                "arguments": inputs_json,
            },
            lease=self.gateway.fence,
        )
        await self.gateway.durable()
        maybe_crash("effect_started")  # the intent is durable, the function not called yet
        tool_ctx = ToolContext(
            self.run_id, self.workflow, action.name, rec.key, None, 1, key, tenant=self.tenant
        )
        await self.gateway.owned()  # still the run's owner, right before the effect (S3)
        clock = self.control.clock
        started = clock.monotonic()
        try:
            value = await invoke_tool(rt.function, json.loads(inputs_json), tool_ctx)
            maybe_crash("effect_called")  # it happened; the receipt is not recorded yet
            output = tool_output(rt, value)
        except BaseException as exc:  # the effect failed: its unit fails, no retry
            if not fails_only_its_unit(exc):
                raise
            detail = self.out.redact(exc.detail if isinstance(exc, Fail) else describe(exc))
            tb = self.out.redact(storable_text(traceback.format_exc()))
            await self.gateway.call(
                self.store.update_effect,
                key,
                state="failed",
                error=detail,
                lease=self.gateway.fence,
            )
            await self.out.record_tool(rt, rec, 1, started, tb, input_hash)
            return await self.out.settle(
                rt,
                rec,
                "failed",
                "effect_failed",
                detail,
                origin="call",
                fingerprint=input_hash,
                attempts=1,
                traceback_text=tb,
            )
        await self.gateway.call(
            self.store.update_effect,
            key,
            state="succeeded",
            receipt=dumps(output),
            lease=self.gateway.fence,
        )
        usage = [self.out.tool_usage_row(rt, rec, 1, started, None, input_hash)]
        return await self.out.settle(
            rt,
            rec,
            "answered",
            output=output,
            origin="call",
            fingerprint=input_hash,
            attempts=1,
            usage=usage,
        )


# -- for people: agac effects list / resolve / compensate ------------------------------------


def _called_before_tenants(row: Row) -> bool:
    """Whether the effect was in flight, under its old key, when the store was upgraded to
    tenants (migration 0009)."""
    return bool(row.resolution) and "key_before_tenants" in json.loads(row.resolution)


def effect_dict(row: Row) -> dict[str, Any]:
    return {
        "id": effect_id(row.key),
        "key": row.key,
        "tenant": row.tenant,
        "workflow": row.workflow,
        "action": row.action,
        "record": row.unit_key,
        "function": row.function,
        "idempotent": bool(row.idempotent),
        "state": row.state,
        "run_id": row.run_id,
        "arguments": json.loads(row.arguments),
        "receipt": json.loads(row.receipt) if row.receipt is not None else None,
        "error": row.error,
        "compensate": row.compensate,
        "resolution": json.loads(row.resolution) if row.resolution else None,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def _stored(store: Store, key: str) -> Row:
    """The effect ``key`` as stored right after this process wrote it."""
    row = store.get_effect(key)
    assert row is not None, key
    return row


def _one(store: Store, ref: str, tenants: Collection[str]) -> Row:
    """The effect ``ref`` names among those of ``tenants``: another tenant's is not found,
    exactly like one that does not exist (T2)."""
    rows = store.find_effect(ref, tenants=tenants)
    if not rows:
        raise NotFound(f"no effect {ref!r}; `agac effects list` shows them")
    if len(rows) > 1:
        raise NotFound(f"{ref!r} names several effects; give more of the id")
    return rows[0]


def resolve_effect(
    store: Store, ref: str, done: bool, *, tenants: Collection[str]
) -> dict[str, Any]:
    """E2: a person says whether an effect in ``unknown`` happened. ``--done``: it is never
    called again (its unit is answered without a receipt); ``--not-done``: the next run
    calls it again."""
    row = _one(store, ref, tenants)
    if row.state not in UNSETTLED_EFFECT_STATES:
        raise RefusedError(
            f"effect {effect_id(row.key)[:12]} is {row.state}, not unknown; only "
            "an unknown effect is resolved"
        )
    state = "done" if done else "not_done"
    store.update_effect(
        row.key, state=state, resolution=dumps({"state": state, "at": store.clock.time()})
    )
    # its unit can move now: walk the records again
    store.mark_run_needs_pass(row.workflow, tenant=row.tenant)
    return effect_dict(_stored(store, row.key))


def compensate_effect(
    project: Project, store: Store, ref: str, *, tenants: Collection[str]
) -> dict[str, Any]:
    """Run the effect's declared compensation once, on request, as
    ``fn({"arguments", "receipt"}, ctx)``. agac records what it returned and never claims
    the effect was undone."""
    import asyncio

    row = _one(store, ref, tenants)
    if not row.compensate:
        raise RefusedError(
            f"action {row.action} declares no compensation (effect: {{compensate: "
            "module:function}}); nothing was run"
        )
    if row.state not in ("succeeded", "done"):
        raise RefusedError(
            f"effect {effect_id(row.key)[:12]} is {row.state}; only an effect that "
            "happened (succeeded, or resolved --done) is compensated"
        )
    fn = resolve_function(row.compensate, project.root)
    ctx = ToolContext(
        row.run_id, row.workflow, row.action, row.unit_key, None, 1, row.key, tenant=row.tenant
    )
    inputs = {
        "arguments": json.loads(row.arguments),
        "receipt": json.loads(row.receipt) if row.receipt is not None else None,
    }
    try:
        result = asyncio.run(invoke_tool(fn, inputs, ctx))
    except BaseException as exc:  # user code: never ends agac (KeyboardInterrupt does)
        if not fails_only_its_unit(exc):
            raise
        said = Redactor.from_environment(credential_env_names())(describe(exc))
        store.update_effect(
            row.key, resolution=dumps({"compensation_failed": said, "at": store.clock.time()})
        )
        raise RefusedError(
            f"the compensation {row.compensate} raised {said}; the effect is unchanged"
        ) from exc
    store.update_effect(
        row.key,
        state="compensated",
        resolution=dumps({"compensation": result, "at": store.clock.time()}),
    )
    return effect_dict(_stored(store, row.key))
