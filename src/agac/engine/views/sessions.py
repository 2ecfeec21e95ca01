"""Read-only views of a workflow and its runs: rendered requests and record sessions."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agac.config.websearch import runs_loop
from agac.data.view import compile_view
from agac.engine.actions import build_runtime
from agac.engine.graph import RunGraph, run_graph
from agac.engine.lifecycle.snapshots import input_source
from agac.engine.prefixes import cache_report
from agac.engine.requests import build_request
from agac.engine.walk.steps import regions_of
from agac.errors import AttachmentError, NotFound, UsageError
from agac.jsontext import loads
from agac.keys import escape, item_key, record_of, unit_key_of
from agac.prompt.render import Guard, RenderError

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.config.fanout import Regions
    from agac.config.model import Action, Workflow
    from agac.config.project import Project
    from agac.data.readers import InputRecord
    from agac.data.sources import RecordSource
    from agac.store.repository import Store
    from agac.store.values import OutcomeRecord, RunRecord

__all__ = ["render_requests", "session_document"]


def _find_input_record(
    project: Project, workflow: Workflow, key: str, source: RecordSource | None
) -> InputRecord:
    found = input_source(workflow, project, source)
    for rec in found.records(workflow.input.id_field):
        if rec.key == key:
            return rec
    raise UsageError(f"no record with key {key!r} in {found.label}")


def render_requests(
    project: Project,
    store: Store,
    workflow: Workflow,
    key: str,
    only: str | None,
    source: RecordSource | None = None,
    *,
    tenant: str,
) -> list[dict[str, Any]]:
    """Each llm action's request for record ``key`` (of the input, or of ``source``).
    Upstream outputs come from the tenant's latest run of the workflow; an action whose
    inputs are not known yet says so."""
    rec = _find_input_record(project, workflow, key, source)
    if rec.payload is None:
        raise UsageError(f"record {key!r} is invalid: {rec.error}")
    last = store.latest_run(workflow.name, tenant=tenant)
    outputs: dict[str, Any] = {}
    if last is not None:
        for o in store.unit_outcomes(last.id, escape(key)):
            if o.status == "answered":
                outputs[o.action] = loads(o.output)
    if only is not None and only not in workflow.action_names:
        raise UsageError(f"{workflow.name} has no action {only!r}")
    out = []
    regions = (
        regions_of(workflow.actions)
        if any(a.fan_out is not None or a.join is not None for a in workflow.actions)
        else None
    )
    for action in workflow.actions:
        if only is not None and action.name != only:
            continue
        if regions is not None and (regions.per_item(action.name) or action.join is not None):
            out.extend(_render_items(project, store, workflow, regions, action, rec, last, outputs))
            continue
        entry: dict[str, Any] = {"action": action.name, "kind": action.kind}
        seen = [a for a in action.ancestors if regions is None or not regions.per_item(a)]
        missing = [a for a in seen if a not in outputs]
        if missing:
            entry["missing_upstream"] = missing
            entry["note"] = f"needs the output of {', '.join(missing)}: run the workflow first"
            out.append(entry)
            continue
        view = compile_view(action.context.observe, action.context.drop).build(
            rec.payload, {a: outputs[a] for a in seen}
        )
        if action.when:
            try:
                entry["guard"] = Guard.compile(action.when).holds(view)
            except RenderError as exc:  # what the run does with it: the unit fails
                entry["note"] = f"would fail {exc.reason}: {exc}"
                entry["reason"] = exc.reason
                out.append(entry)
                continue
        entry.update(_what_it_sends(project, workflow.name, action, view, key))
        out.append(entry)
    return out


def _what_it_sends(
    project: Project,
    workflow: str,
    action: Action,
    view: dict[str, Any],
    record: str | None = None,
) -> dict[str, Any]:
    """An llm unit's request and fingerprint (``record``'s own when its loop is:
    :attr:`ActionRuntime.own_loops`), or a tool unit's inputs and function."""
    if action.kind == "llm":
        try:
            rt = build_runtime(action, None, project.root, workflow=workflow)
            req = build_request(rt, view)
        except AttachmentError as exc:  # what the unit would fail with, said before it runs
            return {"note": f"would fail {exc.reason}: {exc}", "reason": exc.reason}
        cache = cache_report(
            action, rt.prefix, rt.cache_head, rt.cache_texts[0], req.chat[0].content, req.cache
        )
        return {
            "request": req.to_dict(),
            "fingerprint": rt.identify(req, record)[1],
            "cache": cache,
        }
    return {"inputs": view, "function": action.function}


def _render_items(
    project: Project,
    store: Store,
    workflow: Workflow,
    regions: Regions,
    action: Action,
    rec: InputRecord,
    last: RunRecord | None,
    outputs: dict[str, Any],
) -> list[dict[str, Any]]:
    """The requests of an action inside a fan-out, one per item whose list is known (from
    the record or the latest run); a join's request depends on its items' answers."""
    entry: dict[str, Any] = {"action": action.name, "kind": action.kind}
    scope = regions.scope.get(action.name, ())
    if action.join is not None and not scope:
        entry["note"] = (
            f"a join: its request is built from the answers of the items of "
            f"{action.join}; `agac records show {rec.key}` shows what it received"
        )
        return [entry]
    if len(scope) > 1:
        entry["note"] = (
            "runs per item of a nested fan-out: run the workflow and see `agac records show`"
        )
        return [entry]
    fan = workflow.action(scope[0])
    spec = fan.fan_out
    assert spec is not None
    if spec.versions is not None:
        values: list[Any] = list(range(spec.versions))
        name = "version"
    else:
        root, *path = (spec.over or "").split(".")
        value: Any = rec.payload if root == "source" else outputs.get(root)
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if not isinstance(value, list):
            entry["note"] = (
                f"runs once per item of {spec.over}, which is not known yet: run the workflow first"
            )
            return [entry]
        values, name = value, spec.as_name
    out = []
    for i, item in enumerate(values):
        key = item_key(escape(rec.key), i)
        item_outputs = dict(outputs)
        if last is not None and any(a in regions.members[fan.name] for a in action.ancestors):
            for o in store.unit_outcomes(last.id, key):
                if o.status == "answered":
                    item_outputs[o.action] = loads(o.output)
        e: dict[str, Any] = {"action": action.name, "kind": action.kind, "item": key}
        missing = [a for a in action.ancestors if a not in item_outputs]
        if missing:
            e["missing_upstream"] = missing
            e["note"] = f"needs the output of {', '.join(missing)}: run the workflow first"
            out.append(e)
            continue
        view = compile_view(action.context.observe, action.context.drop).build(
            rec.payload, {a: item_outputs[a] for a in action.ancestors}
        )
        view[name] = item
        e.update(_what_it_sends(project, workflow.name, action, view))
        out.append(e)
    return out


def session_document(
    project: Project,
    store: Store,
    key: str,
    workflow: str | None,
    run_ref: str | None,
    *,
    tenants: Collection[str],
) -> dict[str, Any]:
    """The session of a record (or of one fan-out item) in a run of ``tenants``: its
    history across actions (request, response, attempts), tokens and cost, status and
    error log; under ``items``, the same document for each item it fanned out into, in
    request order. Another tenant's run is not found (T2)."""
    if run_ref:
        run = store.get_run(run_ref, tenants=tenants)
        if run is None:
            raise NotFound(f"no run {run_ref!r}")
    else:
        # KEY is a record key as in the input, or a unit key as agac shows it (agac/keys.py)
        runs = store.runs_of_unit(escape(key), workflow, tenants=tenants) or store.runs_of_unit(
            key, workflow, tenants=tenants
        )
        if not runs:
            raise NotFound(
                f"no run has a unit with key {key!r}"
                + (f" in workflow {workflow}" if workflow else "")
            )
        run = runs[0]
    unit = unit_key_of(key, lambda k: store.find_record(run.snapshot_id, k) is not None)
    record_key = record_of(unit)
    rec = store.find_record(run.snapshot_id, record_key)
    top = escape(record_key)
    tree = _SessionTree(store, run, run_graph(run), top, rec)
    doc = tree.node(top, ())
    if unit != top:
        doc = _find_node(doc, unit) or tree.node(unit, tree.chain_of(unit))
    doc.update({"workflow": run.workflow, "run_id": run.id, "tenant": run.tenant})
    doc["record"] = (
        {
            "key": record_key,
            "file": rec.file,
            "n": rec.n,
            "line": rec.line,
            "payload": loads(rec.payload),
            "reason": rec.reason,
            "error": rec.error,
        }
        if rec
        else None
    )
    return doc


class _SessionTree:
    """Builds the session documents of one record and its items from the store."""

    def __init__(
        self, store: Store, run: RunRecord, graph: RunGraph, record_key: str, rec: Row | None
    ) -> None:
        self.store = store
        self.run_id = run.id
        self.tenant: str = run.tenant
        self.actions = graph.actions
        self.regions = graph.regions
        fans = self.regions is not None
        self.outcomes: dict[str, dict[str, OutcomeRecord]] = {}
        for o in (
            store.unit_outcomes_under(run.id, record_key)
            if fans
            else store.unit_outcomes(run.id, record_key)
        ):
            self.outcomes.setdefault(o.unit_key, {})[o.action] = o
        self.usage: dict[str, list[Row]] = {}
        for u in (
            store.usage_under(run.id, record_key) if fans else store.unit_usage(run.id, record_key)
        ):
            self.usage.setdefault(u.unit_key, []).append(u)
        self.events: dict[str, list[Row]] = {}
        for e in (
            store.events_under(run.id, record_key)
            if fans
            else store.unit_events(run.id, record_key)
        ):
            self.events.setdefault(e.unit_key, []).append(e)
        self.expansions = (
            store.fanouts_between(run.id, rec.seq, rec.seq + 1) if fans and rec is not None else {}
        )

    def chain_of(self, key: str) -> tuple[str, ...]:
        actions = self.outcomes.get(key, {})
        if self.regions is None or not actions:
            return ()
        return max((self.regions.scope.get(a, ()) for a in actions), key=len)

    def node(self, key: str, chain: tuple[str, ...]) -> dict[str, Any]:
        own = self.outcomes.get(key, {})
        usage = self.usage.get(key, [])
        entries = []
        tokens = {"input": 0, "cached": 0, "cache_write": 0, "output": 0, "reasoning": 0}
        for u in usage:
            tokens["input"] += u.input_tokens
            tokens["cached"] += u.cached_tokens
            tokens["cache_write"] += u.cache_write_tokens
            tokens["output"] += u.output_tokens
            tokens["reasoning"] += u.reasoning_tokens or 0
        for a in self.actions:
            o = own.get(a.name)
            scope = self.regions.scope.get(a.name, ()) if self.regions else ()
            if o is None and scope != chain:
                continue
            entries.append(self._entry(a, o, [u for u in usage if u.action == a.name]))
        items: list[dict[str, Any]] = []
        if self.regions is not None:
            for fan in self.regions.fan_outs:
                n = self.expansions.get((fan, key))
                if n is not None:
                    items.extend(self.node(item_key(key, i), chain + (fan,)) for i in range(n))
        cost = sum(e["cost_usd"] for e in entries) + sum(i["cost_usd"] for i in items)
        for item in items:
            for k in tokens:
                tokens[k] += item["tokens"][k]
        statuses = [x["status"] for x in entries]
        status = (
            "failed"
            if "failed" in statuses
            else "pending"
            if "pending" in statuses
            else "answered"
            if "answered" in statuses
            else "skipped"
        )
        errors = [
            {
                "kind": e.kind,
                "action": e.action,
                "unit_key": e.unit_key,
                "data": loads(e.data),
                "created_at": e.created_at,
            }
            for e in self.events.get(key, [])
            if e.kind == "unit_failed"
        ]
        for item in items:
            errors.extend(item["errors"])
        doc: dict[str, Any] = {
            "key": key,
            "status": status,
            "actions": entries,
            "tokens": tokens,
            "cost_usd": round(cost, 6),
            "errors": errors,
        }
        if items:
            doc["items"] = items
            doc["failed_items"] = [k for i in items for k in _failed_keys(i)]
        return doc

    def _entry(self, a: Action, o: OutcomeRecord | None, usage: list[Row]) -> dict[str, Any]:
        attempts = [_attempt(u) for u in usage]
        entry: dict[str, Any] = {
            "action": a.name,
            "kind": a.kind,
            "status": o.status if o else "pending",
            "reason": o.reason if o else None,
            "detail": o.detail if o else None,
            "origin": o.origin if o else None,
            "output": loads(o.output) if o else None,
            "attempts": attempts,
            "cost_usd": round(sum(x["cost_usd"] for x in attempts), 6),
        }
        if o is not None and o.checks is not None:
            entry["checks"] = loads(o.checks)  # each check's verdict: name -> passed
        if a.join:
            entry["join"] = a.join  # the fan-out whose items it received
        if runs_loop(a) and o is not None:
            entry["turns"] = [
                _turn(r) for r in self.store.turns_of(self.run_id, a.name, o.unit_key)
            ]
        if o is not None and o.fingerprint and a.kind == "llm":
            ans = self.store.get_answer(o.fingerprint, tenant=self.tenant)
            if ans is not None:
                entry["request"] = loads(ans.request)
                entry["response"] = loads(ans.response)
        return entry


def _failed_keys(node: dict[str, Any]) -> list[str]:
    own = [node["key"]] if node["status"] == "failed" else []
    return own + list(node.get("failed_items", []))


def _find_node(doc: dict[str, Any], key: str) -> dict[str, Any] | None:
    if doc["key"] == key:
        return doc
    for item in doc.get("items", []):
        found = _find_node(item, key)
        if found is not None:
            return found
    return None


def _turn(row: Row) -> dict[str, Any]:
    """A stored step of a tool loop: a model turn (its text and calls) or a call's result."""
    body = loads(row.body)
    assert isinstance(body, dict)
    return {"step": row.step, "kind": row.kind, "created_at": row.created_at, **body}


def _attempt(u: Row) -> dict[str, Any]:
    return {
        "attempt": u.attempt,
        "kind": u.kind,
        "origin": u.origin,
        "status": u.status,
        "error": u.error,
        "provider": u.provider,
        "model": u.model,
        "tier": u.tier,
        "input_tokens": u.input_tokens,
        "cached_tokens": u.cached_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "output_tokens": u.output_tokens,
        "reasoning_tokens": int(u.reasoning_tokens or 0),
        "server_tools": loads(u.server_tools) if u.server_tools else {},
        "request_id": u.request_id,
        "cost_usd": round(float(u.cost_usd), 6),
        "latency_ms": round(float(u.latency_ms), 2),
        "created_at": u.created_at,
    }
