"""One ``web_search`` call of a unit's tool loop, where agac runs the search (an action
whose provider's spec says ``web_search.in_loop``: Ollama's web search API).

The call's result is what the model reads next, stored as any tool result before it
counts (engine/walk/toolloop.py), so a search whose result is stored is never sent again.
Every call ends in a result; what went wrong is told to the model with a code, kept in
the record's session:

- ``web_search_limit``: the loop's searches reached ``max_uses``; nothing is sent and the
  model is told to answer with what it found (the loop goes on);
- ``web_search_arguments``: the arguments are not a search (no ``query``, a
  ``max_results`` out of 1–10);
- ``web_search_failed``: the search API failed (an HTTP error, a timeout, a lost
  connection, an answer of another shape, no key); not retried — the model may search
  again.

Otherwise the hits passing the search's domain filters go to the model as ``{"results":
[{title, url, content}]}``; they are the answer's citations. A search sent is one ledger
row of kind ``tool`` on the action's provider and model, ``server_tools``
``{"web_search": 1}`` when answered, priced at the model's fee per search (Ollama's is 0
unless ``prices:`` sets one, then counted against the run's budget at once); a call not
sent has a row at $0, its code as the error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.engine.limits.budget import Reservation
from agac.errors import ProviderError
from agac.providers.base import Response, Usage
from agac.providers.servertools import SEARCH_TOOL, SearchHit, domain_allowed
from agac.store.rows import UsageRow
from agac.tools.websearch import read_search_call

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import UnitContext
    from agac.engine.values import UnitRecord
    from agac.providers.base import Request, ToolCall

__all__ = ["SEARCH_TIMEOUT", "SearchDone", "search_call"]

SEARCH_TIMEOUT = 60.0
"""Seconds one search may take when the action sets no ``timeout``."""


@dataclass(frozen=True, slots=True)
class SearchDone:
    """One call's result: the ``content`` the model is sent, the ``hits`` it holds, the
    error and its ``code`` (None when the search answered) and its ledger row."""

    content: str
    hits: tuple[SearchHit, ...]
    error: str | None
    code: str | None
    row: UsageRow


async def search_call(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    request: Request,
    call: ToolCall,
    ordinal: int,
    attempt: int,
    input_hash: str,
) -> SearchDone:
    """Run the loop's ``ordinal``-th search call (1-based, in the order the model asked)."""
    search, clock = rt.search, ctx.control.clock
    assert search is not None, "a search call of an action that searches in its loop"
    started = clock.monotonic()
    bound = search.max_uses
    if bound is not None and ordinal > bound:
        why = (
            f"the search limit of this task is reached ({bound} searches, max_uses); "
            "answer with what the searches so far found"
        )
        return _refused(ctx, rt, rec, attempt, input_hash, started, "web_search_limit", why)
    asked = read_search_call(call.arguments)
    if isinstance(asked, str):
        return _refused(ctx, rt, rec, attempt, input_hash, started, "web_search_arguments", asked)
    if rt.searcher is None:
        why = f"{request.provider} cannot search here"
        return _refused(ctx, rt, rec, attempt, input_hash, started, "web_search_failed", why)
    timeout = request.timeout or SEARCH_TIMEOUT
    try:
        found = await rt.searcher.search_web(asked.query, asked.max_results, timeout)
    except ProviderError as exc:
        row = ctx.out.usage_row(rt, rec, attempt, request, None, exc, started, input_hash)
        why = ctx.out.redact(f"the web search failed: {exc}")
        return SearchDone(_error(why), (), why, "web_search_failed", row._replace(kind="tool"))
    hits = tuple(h for h in found if domain_allowed(h.url, search))
    billed = Response("", request.model, usage=Usage(server_tools=((SEARCH_TOOL, 1),)))
    row = ctx.out.usage_row(rt, rec, attempt, request, billed, None, started, input_hash)
    if ctx.budget is not None and row.cost_usd:
        ctx.budget.settle(Reservation(0.0, 0), row.cost_usd, 0)  # a search priced by prices:
    results = {"results": [h.to_dict() for h in hits]}
    return SearchDone(
        json.dumps(results, ensure_ascii=False), hits, None, None, row._replace(kind="tool")
    )


def _refused(
    ctx: UnitContext,
    rt: ActionRuntime,
    rec: UnitRecord,
    attempt: int,
    input_hash: str,
    started: float,
    code: str,
    why: str,
) -> SearchDone:
    """A call not sent: its result tells the model why; its ledger row costs nothing."""
    clock = ctx.control.clock
    row = UsageRow(
        ctx.run_id,
        rt.name,
        rec.key,
        attempt,
        "tool",
        rt.action.provider or "",
        rt.action.model_name or "",
        "live",
        0,
        0,
        0,
        0,
        0.0,
        (clock.monotonic() - started) * 1000,
        "error",
        f"{code}: {why}",
        input_hash,
        clock.time(),
    )
    return SearchDone(_error(why), (), why, code, row)


def _error(why: str) -> str:
    return json.dumps({"error": why}, ensure_ascii=False)
