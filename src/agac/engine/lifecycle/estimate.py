"""R5: what a run of a workflow would send and cost, before anything is sent. Admission
refuses a run whose estimate alone exceeds its budget; ``agac plan`` shows the same
estimate (engine/views/plan.py reads the records it is made over).

Each record walks the actions like a run does, without calling anything: a request
whose inputs are known (the record, and upstream answers already stored) is rendered
exactly, fingerprinted and looked up (an answer already stored is *reusable*, free; a
request identical to one counted before for the action is *shared*: a run asks it once,
online and in a batch alike, S5);
a request downstream of one that would be sent cannot be rendered yet, so its input
is estimated from its templates, the record and each unknown upstream answer at its
``max_tokens``. A guard that cannot be evaluated yet counts as true. Tokens are
``ceil(chars / 4)`` of the messages plus ``max_tokens`` (the worst case a reservation
holds too), priced live and at the batch tier, each without and with prompt caching of
the action's static prefix (engine/limits/caching.py), and at the flex tier (None for an
action whose model its provider does not serve on flex).

Each llm action says the mode it would run in: its ``run_mode``, or for ``auto`` the
mode a run admitted now would choose over these records, and why (decisions 0085, 0103).
The cost ``as_configured`` prices each action in that mode, without caching.

Prices are those of the moment of planning; an action whose model costs less at other
hours of the day (a price calendar: DeepSeek) says when those hours next open and what
its online estimate would be then (``cheaper_hours``, providers/pricecalendar.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agac.config.project import store_url
from agac.engine.actions import build_runtime
from agac.engine.lifecycle.cheaper import cheaper_starts
from agac.engine.lifecycle.modes import resolve_auto
from agac.engine.limits.budget import (
    attachment_tokens,
    request_estimate,
    reserved_searches,
    within_cap,
)
from agac.engine.limits.caching import cached_usage, one_hour_writes, static_prefix_tokens
from agac.engine.requests import build_request
from agac.errors import ConfigError
from agac.prompt.render import RenderError
from agac.providers import registry
from agac.providers.base import Request, Usage
from agac.providers.pricecalendar import cheaper_hours

if TYPE_CHECKING:
    from agac.config.fanout import Regions
    from agac.config.model import Action, FanOutSpec, Workflow
    from agac.config.project import Project
    from agac.engine.actions import ActionRuntime
    from agac.jsontext import JSONObject
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store

__all__ = ["estimate_run"]

_CHUNK = 500
_UNKNOWN = object()


def estimate_run(
    project: Project,
    store: Store | None,
    workflow: Workflow,
    prices: PriceTable,
    records: Iterable[tuple[str, JSONObject | None]],
    *,
    tenant: str,
    fresh: bool = False,
) -> dict[str, Any]:
    """The plan of a run over ``records`` in ``tenant``: per action units, requests,
    answers the tenant could reuse (T2), estimated tokens and cost online and batch;
    totals, and the cost as configured."""

    def answers(fps: list[str]) -> dict[str, str]:
        return store.get_answers(fps, tenant=tenant) if store is not None and fps else {}

    now = store.clock.time() if store is not None else time.time()
    prices = prices.at_time(now)  # a model with a price calendar costs what it costs now

    runtimes = {
        a.name: build_runtime(a, None, project.root, workflow=workflow.name)
        for a in workflow.actions
    }
    actions: dict[str, dict[str, Any]] = {
        a.name: {
            "kind": a.kind,
            "model": a.model,
            "run_mode": a.run_mode,
            "units": 0,
            "requests": 0,
            "reusable": 0,
            "shared": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": _zero_costs(a),
        }
        for a in workflow.actions
    }
    for a in workflow.actions:
        if a.kind == "llm":
            actions[a.name]["price"] = prices.status(a.model or "")
            actions[a.name]["cache_prefix_tokens"] = static_prefix_tokens(runtimes[a.name])
            actions[a.name]["cache_ttl"] = "1h" if one_hour_writes(runtimes[a.name]) else "5m"
    count = 0
    chunk: list[tuple[str, JSONObject | None]] = []
    counted: dict[str, set[str]] = {a.name: set() for a in workflow.actions}
    for item in records:
        chunk.append(item)
        count += 1
        if len(chunk) >= _CHUNK:
            _plan_chunk(chunk, workflow, runtimes, actions, answers, prices, fresh, counted)
            chunk = []
    if chunk:
        _plan_chunk(chunk, workflow, runtimes, actions, answers, prices, fresh, counted)
    resolved = _modes(project, workflow, actions, count)
    deadline_at = None if workflow.deadline is None else now + workflow.deadline
    starts = cheaper_starts(resolved, count, prices, now, deadline_at)
    for a in workflow.actions:
        entry = actions[a.name]
        usage = Usage(int(entry["input_tokens"]), int(entry["output_tokens"]))
        opening = cheaper_hours(prices, a.model, usage, now) if a.kind == "llm" else None
        if opening is not None:
            opening["auto_waits"] = a.name in starts
            if a.name in starts:
                saves = opening["online_usd_now"] - opening["online_usd_then"]
                opening["auto_saves_usd"] = round(saves, 10)
            entry["cheaper_hours"] = opening
    return _totals(workflow, actions, count)


_COSTS = ("online", "batch", "flex", "online_cached", "batch_cached")
"""The estimates of each llm action: online and batch, each without and with caching, and
flex (None when its model is not served on flex)."""
_MODE_COST = {"batch": "batch", "flex": "flex"}
"""The estimate that prices an action in each mode (``online`` for any other)."""


def _zero_costs(action: Action) -> dict[str, float | None]:
    """An action's estimates before its first request: 0, and no flex estimate for an llm
    action whose model is not served on flex."""
    costs: dict[str, float | None] = dict.fromkeys(_COSTS, 0.0)
    if action.kind == "llm" and not _flex_served(action):
        costs["flex"] = None
    return costs


def _flex_served(action: Action) -> bool:
    """Whether the action's provider serves its model on a flex tier."""
    try:
        spec = registry.provider_spec(action.provider or "")
    except (ConfigError, ImportError):
        return False
    return spec.flex_serves(action.model_name or "")


def _modes(
    project: Project, workflow: Workflow, actions: dict[str, dict[str, Any]], records: int
) -> Workflow:
    """Each llm action's ``mode``: its run_mode, or what ``auto`` would choose for a run
    admitted now over ``records`` (its deadline starting now), with ``mode_why``; the
    workflow with those choices made."""
    resolved, choices = resolve_auto(
        workflow, records, remaining=workflow.deadline, durable=store_url(project) != "memory"
    )
    chosen = {c.action: c for c in choices}
    for a in workflow.actions:
        if a.kind != "llm":
            continue
        entry = actions[a.name]
        entry["mode"] = chosen[a.name].mode if a.name in chosen else a.run_mode
        if a.name in chosen:
            entry["mode_why"] = f"{chosen[a.name].why}: {chosen[a.name].detail}"
    return resolved


def _request_chars(entry: dict[str, Any], action: Action, request: Request) -> int:
    """The characters a rendered request sends, its attachments counted as the input
    tokens they cost (tallied in ``entry``, marked estimated)."""
    chars = sum(len(m.content) for m in request.messages)
    if action.attachments:
        extra = attachment_tokens(request.provider, request.messages)
        entry["attachment_tokens"] = entry.get("attachment_tokens", 0) + extra
        chars += 4 * extra
    return chars


def _plan_chunk(
    chunk: list[tuple[str, JSONObject | None]],
    workflow: Workflow,
    runtimes: dict[str, ActionRuntime],
    actions: dict[str, dict[str, Any]],
    answers: Callable[[list[str]], dict[str, str]],
    prices: PriceTable,
    fresh: bool,
    counted: dict[str, set[str]],
) -> None:
    """The requests of ``chunk``'s records; ``counted``: the fingerprints of each action's
    requests counted so far (an identical one is shared, not counted again)."""
    outputs: list[dict[str, Any]] = [{} for _ in chunk]
    regions = _regions(workflow)
    for action in workflow.actions:
        rt = runtimes[action.name]
        entry = actions[action.name]
        exact: list[tuple[int, str, int]] = []
        scope = regions.scope.get(action.name, ()) if regions is not None else ()
        for i, (key, payload) in enumerate(chunk):
            known = outputs[i]
            if scope:
                _plan_items(entry, action, workflow, scope, payload, known, prices)
                continue
            entry["units"] += 1
            if payload is None or any(
                known.get(a) is None
                for a in action.ancestors
                if not (regions and regions.per_item(a))
            ):
                known[action.name] = None  # invalid record or a dependency skipped: no request
                continue
            if regions is not None and action.join is not None:
                known[action.name] = _UNKNOWN  # a join reads its items' answers
                if action.kind == "llm":
                    _count(entry, action, prices, _rough_chars(action, payload, [], workflow))
                continue
            unknown = [a for a in action.ancestors if known[a] is _UNKNOWN]
            view = (
                None if unknown else rt.view.build(payload, {a: known[a] for a in action.ancestors})
            )
            if view is not None and rt.guard is not None and not _guard(rt, view):
                known[action.name] = None
                continue
            if action.kind != "llm":
                known[action.name] = _UNKNOWN  # a tool's output is known only once it ran
                continue
            if view is not None:
                try:
                    request = build_request(rt, view)
                except Exception:  # noqa: BLE001 - the run reports it (render_error)
                    known[action.name] = None
                    continue
                _, fp = rt.identify(request, key)
                exact.append((i, fp, _request_chars(entry, action, request)))
                continue
            _count(entry, action, prices, _rough_chars(action, payload, unknown, workflow))
            known[action.name] = _UNKNOWN
        found = answers([fp for _, fp, _ in exact]) if not fresh else {}
        sent = counted[action.name]
        for i, fp, chars in exact:
            if fp in found:
                entry["reusable"] += 1
                outputs[i][action.name] = json.loads(found[fp])
                continue
            if fp in sent and not (action.tools and action.run_mode == "batch"):
                entry["shared"] += 1  # asked once in the run (S5): the first one is counted
            else:
                sent.add(fp)
                _count(entry, action, prices, chars)
            outputs[i][action.name] = _UNKNOWN


def _regions(workflow: Workflow) -> Regions | None:
    if not any(a.fan_out is not None or a.join is not None for a in workflow.actions):
        return None
    from agac.engine.walk.steps import regions_of

    return regions_of(workflow.actions)


def _plan_items(
    entry: dict[str, Any],
    action: Action,
    workflow: Workflow,
    scope: tuple[str, ...],
    payload: Any,
    known: dict[str, Any],
    prices: PriceTable,
) -> None:
    """An action inside a fan-out: one unit and (llm) one request per item. The item count
    is known for ``versions``, for a list in the record or in a stored upstream answer;
    otherwise the list's ``maxItems`` bounds it, and without one the plan counts one item
    per parent and says so (``items_unknown``)."""
    if payload is None:
        entry["units"] += 1
        return
    n = 1
    for fan in scope:
        spec = workflow.action(fan).fan_out
        assert spec is not None
        count = _item_count(spec, workflow, payload, known)
        if count is None:
            entry["items_unknown"] = True
            count = 1
        n *= count
    entry["units"] += n
    if action.kind == "llm":
        for _ in range(n):
            _count(entry, action, prices, _rough_chars(action, payload, [], workflow))
    known[action.name] = _UNKNOWN


def _item_count(
    spec: FanOutSpec, workflow: Workflow, payload: Any, known: dict[str, Any]
) -> int | None:
    if spec.versions is not None:
        return int(spec.versions)
    root, *path = (spec.over or "").split(".")
    value: Any = payload if root == "source" else known.get(root, _UNKNOWN)
    schema = None if root == "source" else workflow.action(root).schema
    for part in path:
        if isinstance(schema, dict):
            schema = (schema.get("properties") or {}).get(part)
        if isinstance(value, dict):
            value = value.get(part)
        elif value is not _UNKNOWN:
            value = None
    if isinstance(value, list):
        return len(value)
    if isinstance(schema, dict) and isinstance(schema.get("maxItems"), int):
        return int(schema["maxItems"])
    return None


def _guard(rt: ActionRuntime, view: dict[str, Any]) -> bool:
    """The guard as the run judges it; one that fails (the run fails the unit
    ``render_error``) sends no request either."""
    assert rt.guard is not None
    try:
        return rt.guard.holds(view)
    except RenderError:
        return False


def _rough_chars(action: Action, payload: Any, unknown: list[str], workflow: Workflow) -> int:
    """Input chars of a request that cannot be rendered yet: its templates, the record and
    every upstream answer it waits for at that action's ``max_tokens`` (4 chars a token)."""
    chars = len(action.system or "") + len(action.prompt or "") + len(json.dumps(payload))
    for name in unknown:
        upstream = workflow.action(name)
        chars += 4 * (upstream.max_tokens or 1024) if upstream.kind == "llm" else 0
    return chars


def _count(entry: dict[str, Any], action: Action, prices: PriceTable, chars: int) -> None:
    """One request that would be sent: its tokens, and its cost online and batch, each
    without caching and with its static prefix written (the action's first request) or
    read from the cache."""
    i, o = request_estimate(chars, action.max_tokens or 1024)
    first = entry["requests"] == 0
    entry["requests"] += 1
    entry["input_tokens"] += i
    entry["output_tokens"] += o
    search = action.web_search.to_dict() if action.web_search is not None else None
    searches = reserved_searches(search)  # each at its fee, as a budget reserves them
    tools = (("web_search", searches),) if searches else ()
    usage = Usage(i, o, server_tools=tools)
    cached = replace(
        cached_usage(
            i,
            o,
            entry.get("cache_prefix_tokens", 0),
            first,
            one_hour=entry.get("cache_ttl") == "1h",
        ),
        server_tools=tools,
    )
    model, cost = action.model or "", entry["cost_usd"]
    cost["online"] += prices.cost(model, usage, "live")
    cost["batch"] += prices.cost(model, usage, "batch")
    if cost["flex"] is not None:
        cost["flex"] += prices.cost(model, usage, "flex")
    cost["online_cached"] += prices.cost(model, cached, "live")
    cost["batch_cached"] += prices.cost(model, cached, "batch")


def _total(actions: dict[str, dict[str, Any]], key: str) -> float | None:
    """The workflow's estimate ``key``; for ``flex``, None when an action that sends
    requests cannot go on flex."""
    values = [a["cost_usd"][key] for a in actions.values() if a["requests"] or a["cost_usd"][key]]
    return None if None in values else sum(values)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _totals(workflow: Workflow, actions: dict[str, dict[str, Any]], count: int) -> dict[str, Any]:
    totals = {k: _total(actions, k) for k in _COSTS}
    configured = sum(
        a["cost_usd"][_MODE_COST.get(a.get("mode") or "", "online")] or 0.0
        for a in actions.values()
    )
    for a in actions.values():
        a["cost_usd"] = {k: _rounded(v) for k, v in a["cost_usd"].items()}
    estimated = [n for n, a in actions.items() if a.get("attachment_tokens")]
    budget = workflow.budget
    tokens = sum(a["input_tokens"] + a["output_tokens"] for a in actions.values())
    plan: dict[str, Any] = {
        "workflow": workflow.name,
        "records": count,
        "actions": actions,
        "requests": sum(a["requests"] for a in actions.values()),
        "reusable": sum(a["reusable"] for a in actions.values()),
        "shared": sum(a["shared"] for a in actions.values()),
        "input_tokens": sum(a["input_tokens"] for a in actions.values()),
        "output_tokens": sum(a["output_tokens"] for a in actions.values()),
        "cost_usd": {
            **{k: _rounded(v) for k, v in totals.items()},
            "as_configured": round(configured, 6),
        },
        "unpriced": sorted(n for n, a in actions.items() if a.get("price") == "unpriced"),
        "budget": None if budget is None else {"usd": budget.usd, "tokens": budget.tokens},
        "within_budget": True,
    }
    if estimated:
        plan["estimates"] = (
            f"the input tokens of {', '.join(estimated)} include "
            f"{sum(actions[n]['attachment_tokens'] for n in estimated):,} for attached images "
            "and PDF pages, estimated by each provider's published rules (OpenAI tiles, "
            "Anthropic width × height / 750, Gemini 258 an image or page); the ledger "
            "records what the provider reports"
        )
    if budget is not None:
        over_usd = budget.usd is not None and not within_cap(configured, budget.usd)
        over_tokens = budget.tokens is not None and tokens > budget.tokens
        plan["within_budget"] = not (over_usd or over_tokens)
    return plan
