"""Reading an ended batch (B6): stream its results into answers, usage and item results.

Results are streamed from the provider and written in groups of 1,000; nothing holds a
whole result file. Each item ends one of:

- ``succeeded``: its answer is stored by fingerprint (usage at the batch tier);
- ``retry``: left out of the results, errored retryably, truncated or schema-invalid
  while the action's attempts are not spent: the next online pass sends it again in a
  retry batch;
- ``failed`` with a reason: ``batch_not_returned``, ``provider_error``, ``refusal``,
  ``content_filter``, ``truncated``, ``schema_invalid``, ``batch_cancelled``,
  ``batch_expired``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from agac.engine.crashpoints import maybe_crash
from agac.engine.units import Fail, accept_response, response_dict
from agac.errors import FatalError, ProviderError, UnsupportedError
from agac.providers.base import BatchHandle, Response
from agac.store.repository import dumps

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.executor import Executor

__all__ = ["ingest_batch"]

_GROUP = 1000


async def ingest_batch(ex: Executor, rt: ActionRuntime, b: Any, handle: BatchHandle) -> dict[str, int]:
    """Read batch ``b`` once; returns counts by item status."""
    items = {i.custom_id: i for i in await ex.gateway.call(lambda: list(ex.store.iter_batch_items(b.key)))}
    max_attempts = rt.action.retry.max_attempts
    counts = {"succeeded": 0, "retry": 0, "failed": 0, "not_returned": 0}
    answers: list[dict[str, Any]] = []
    usage: list[dict[str, Any]] = []
    results: list[tuple[str, str, str | None, str | None]] = []
    latency_ms = (time.time() - (b.submitted_at or time.time())) * 1000

    async def flush() -> None:
        nonlocal answers, usage, results
        if answers or usage:
            await ex.gateway.commit(answers=answers, usage=usage)
        if results:
            await ex.gateway.call(ex.store.set_item_results, b.key, results)
        answers, usage, results = [], [], []

    def give_up(item: Any, reason: str, detail: str) -> tuple[str, str, str | None, str | None]:
        if item.attempt < max_attempts and reason in ("truncated", "schema_invalid", "provider_error_retryable"):
            counts["retry"] += 1
            return (item.custom_id, "retry", reason, detail)
        counts["failed"] += 1
        final = "provider_error" if reason == "provider_error_retryable" else reason
        return (item.custom_id, "failed", final, detail)

    async for result in rt.provider.batch_results(handle):
        item = items.pop(result.custom_id, None)
        if item is None:
            continue  # not ours (a candidate adopted by matching is verified by its ids)
        if item.status != "pending":
            continue  # read before a crash mid-ingest: never ledgered twice
        if result.type == "succeeded" and result.response is not None:
            usage.append(_usage_row(ex, rt, b, item, result.response, latency_ms))
            try:
                output = accept_response(rt, result.response)
            except Fail as fail:
                results.append(give_up(item, fail.reason, fail.detail))
            else:
                out_json = dumps(output)
                answers.append({
                    "fingerprint": item.fingerprint, "provider": rt.action.provider,
                    "model": rt.action.model_name, "request": item.request,
                    "response": dumps(response_dict(result.response)), "output": out_json,
                    "created_at": time.time(),
                })
                results.append((item.custom_id, "succeeded", None, None))
                counts["succeeded"] += 1
        elif result.type == "errored":
            err = result.error
            fatal = isinstance(err, (FatalError, UnsupportedError)) or not isinstance(err, ProviderError)
            reason = "provider_error" if fatal else "provider_error_retryable"
            results.append(give_up(item, reason, f"errored in the batch: {err}"))
        elif result.type == "canceled":
            counts["failed"] += 1
            results.append((item.custom_id, "failed", "batch_cancelled", "the batch was cancelled"))
        else:
            counts["failed"] += 1
            results.append((item.custom_id, "failed", "batch_expired", "the batch expired"))
        if len(results) >= _GROUP:
            await flush()
            maybe_crash("mid_ingest")
    for item in items.values():  # B6: left out of the results
        if item.status != "pending":
            continue
        counts["not_returned"] += 1
        if item.attempt < max_attempts:
            results.append((item.custom_id, "retry", "batch_not_returned",
                            "missing from the batch results; sent again in a retry batch"))
        else:
            results.append((item.custom_id, "failed", "batch_not_returned",
                            f"missing from the batch results after {item.attempt} attempts"))
    await flush()
    await ex.gateway.call(ex.store.update_batch, b.key, state="collected", collected_by=ex.run_id,
                          ended_at=time.time())
    return counts


def _usage_row(ex: Executor, rt: ActionRuntime, b: Any, item: Any, response: Response,
               latency_ms: float) -> dict[str, Any]:
    u = response.usage
    return {
        "run_id": b.run_id, "action": rt.name, "unit_key": item.unit_key, "attempt": item.attempt,
        "kind": "llm", "provider": rt.action.provider, "model": rt.action.model_name, "tier": "batch",
        "input_tokens": u.input_tokens, "cached_tokens": u.cached_tokens,
        "cache_write_tokens": u.cache_write_tokens, "output_tokens": u.output_tokens,
        "cost_usd": ex.prices.cost(rt.action.model or "", u, "batch"), "latency_ms": latency_ms,
        "status": "ok", "error": None, "fingerprint": item.fingerprint, "created_at": time.time(),
        "origin": None,
    }
