"""One tool unit's call: its inputs are the unit's view; its output is cached by
(function, inputs) unless ``cache: false`` (a cached one settles the unit before it is
called: engine/decision.py). A raising tool fails ``tool_error`` at once, naming the
exception (a ``SystemExit`` too: user code never ends agac); only an
``agac.RetryableError`` is retried like a call. A tool marked ``effect:`` goes to the
effects room instead (E1, E2)."""

from __future__ import annotations

import json
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agac.engine.context import ToolContext
from agac.engine.requests import Fail, invoke_tool, tool_output
from agac.engine.walk.calls import backoff
from agac.jsontext import JSON, JSONObject, dumps, storable_text
from agac.store.rows import ToolResultRow
from agac.usercode import describe, fails_only_its_unit, is_retryable

if TYPE_CHECKING:
    from agac.config.model import RetrySpec
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import UnitContext
    from agac.engine.values import Settled, UnitRecord
    from agac.store.rows import UsageRow
    from agac.store.values import OutcomeStatus

__all__ = ["call_tool"]


async def call_tool(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    view: JSONObject,
    inputs_json: str,
    input_hash: str,
    idem: str,
) -> Settled | None:
    """Call the tool until it returns or its attempts are spent, in the action's slot
    (once the unit's decision says so: no cached result, before the deadline)."""
    action = rt.action
    clock = ctx.control.clock
    attempt = 0
    while True:
        attempt += 1
        async with rt.slots:
            if ctx.control.stopping:
                return None  # never called, or not called again: pending for the next run
            # At a join the view holds the items (engine/walk/walker.py); the names are reserved.
            tool_ctx = ToolContext(
                ctx.run_id,
                ctx.workflow,
                action.name,
                rec.record_key,
                rec.item_key,
                attempt,
                idem,
                _items(view, "fulfilled"),
                _items(view, "rejected"),
                tenant=ctx.tenant,
            )
            started = clock.monotonic()
            try:
                value = await invoke_tool(rt.function, json.loads(inputs_json), tool_ctx)
                output = tool_output(rt, value)
            except Fail as fail:
                await ctx.out.record_tool(rt, rec, attempt, started, fail.detail, input_hash)
                return await _final(
                    ctx, rt, rec, "failed", fail.reason, fail.detail, None, input_hash, attempt
                )
            except BaseException as exc:  # user code: it fails its unit, never agac
                if not fails_only_its_unit(exc):
                    raise
                tb = ctx.out.redact(storable_text(traceback.format_exc()))
                detail = ctx.out.redact(describe(exc))
                await ctx.out.record_tool(rt, rec, attempt, started, tb, input_hash)
                if not is_retryable(exc) or attempt >= action.retry.max_attempts:
                    return await _final(
                        ctx,
                        rt,
                        rec,
                        "failed",
                        "tool_error",
                        detail,
                        None,
                        input_hash,
                        attempt,
                        traceback_text=tb,
                    )
                delay = _retry_delay(exc, action.retry, attempt)
            else:
                usage = [ctx.out.tool_usage_row(rt, rec, attempt, started, None, input_hash)]
                cached = (
                    [ToolResultRow(input_hash, action.function or "", dumps(output), clock.time())]
                    if action.cache
                    else []
                )
                return await _final(
                    ctx,
                    rt,
                    rec,
                    "answered",
                    None,
                    None,
                    output,
                    input_hash,
                    attempt,
                    usage=usage,
                    tool_results=cached,
                )
        if await ctx.control.sleep(delay):
            return None


def _items(view: JSONObject, name: str) -> list[JSON]:
    """A join's ``fulfilled`` or ``rejected`` items in its view (empty elsewhere)."""
    items = view.get(name)
    return list(items) if isinstance(items, list) else []


def _retry_delay(exc: BaseException, spec: RetrySpec, attempt: int) -> float:
    """The tool's own hint (``RetryableError(retry_after=…)``) or the action's backoff."""
    hint = getattr(exc, "retry_after", None)
    return float(hint) if isinstance(hint, (int, float)) and hint >= 0 else backoff(spec, attempt)


async def _final(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    status: OutcomeStatus,
    reason: str | None,
    detail: str | None,
    output: JSON,
    input_hash: str,
    attempts: int,
    *,
    usage: Sequence[UsageRow] = (),
    tool_results: Sequence[ToolResultRow] = (),
    traceback_text: str | None = None,
) -> Settled:
    return await ctx.out.settle(
        rt,
        rec,
        status,
        reason,
        detail,
        output=output,
        origin="call",
        fingerprint=input_hash,
        attempts=attempts,
        usage=usage,
        tool_results=tool_results,
        traceback_text=traceback_text,
    )
