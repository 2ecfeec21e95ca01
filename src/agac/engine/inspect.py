"""Read-only views of a workflow and its runs: rendered requests and record sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.data.inputs import resolve_input_files
from agac.data.readers import iter_input
from agac.data.view import compile_view
from agac.engine.actions import build_runtime
from agac.engine.units import build_request
from agac.errors import UsageError
from agac.prompt.render import compile_guard
from agac.store.repository import loads

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = ["render_requests", "session_document"]


def _find_input_record(project: Project, workflow: Workflow, key: str) -> Any:
    files = resolve_input_files(workflow.input.path, project.root)
    for rec in iter_input(files, workflow.input.id_field):
        if rec.key == key:
            return rec
    raise UsageError(f"no record with key {key!r} in {workflow.input.path}")


def render_requests(project: Project, store: Store, workflow: Workflow, key: str,
                    only: str | None) -> list[dict[str, Any]]:
    """Each llm action's request for record ``key``. Upstream outputs come from the latest
    run that has them; an action whose inputs are not known yet says so."""
    rec = _find_input_record(project, workflow, key)
    if rec.payload is None:
        raise UsageError(f"record {key!r} is invalid: {rec.error}")
    last = store.latest_run(workflow.name)
    outputs: dict[str, Any] = {}
    if last is not None:
        for o in store.unit_outcomes(last.id, key):
            if o.status == "answered":
                outputs[o.action] = loads(o.output)
    if only is not None and only not in workflow.action_names:
        raise UsageError(f"{workflow.name} has no action {only!r}")
    out = []
    for action in workflow.actions:
        if only is not None and action.name != only:
            continue
        entry: dict[str, Any] = {"action": action.name, "kind": action.kind}
        missing = [a for a in action.ancestors if a not in outputs]
        if missing:
            entry["missing_upstream"] = missing
            entry["note"] = f"needs the output of {', '.join(missing)}: run the workflow first"
            out.append(entry)
            continue
        view = compile_view(action.context.observe, action.context.drop).build(
            rec.payload, {a: outputs[a] for a in action.ancestors})
        if action.when:
            try:
                entry["guard"] = bool(compile_guard(action.when)(view))
            except Exception:  # noqa: BLE001 - a guard reading a missing field is false
                entry["guard"] = False
        if action.kind == "llm":
            rt = build_runtime(action, None, project.root)
            req = build_request(rt, view)
            entry["request"] = req.to_dict()
            entry["fingerprint"] = req.fingerprint()
        else:
            entry["inputs"] = view
            entry["function"] = action.function
        out.append(entry)
    return out


def session_document(project: Project, store: Store, key: str, workflow: str | None,
                     run_ref: str | None) -> dict[str, Any]:
    if run_ref:
        run = store.get_run(run_ref)
        if run is None:
            raise UsageError(f"no run {run_ref!r}")
    else:
        runs = store.runs_of_unit(key, workflow)
        if not runs:
            raise UsageError(f"no run has a unit with key {key!r}"
                             + (f" in workflow {workflow}" if workflow else ""))
        run = runs[0]
    rec = store.find_record(run.snapshot_id, key)
    config = loads(run.config)
    outcomes = {o.action: o for o in store.unit_outcomes(run.id, key)}
    usage = store.unit_usage(run.id, key)
    events = store.unit_events(run.id, key)
    actions = []
    total_cost = 0.0
    tokens = {"input": 0, "cached": 0, "cache_write": 0, "output": 0}
    for a in config["actions"]:
        o = outcomes.get(a["name"])
        attempts = [_attempt(u) for u in usage if u.action == a["name"]]
        cost = sum(x["cost_usd"] for x in attempts)
        total_cost += cost
        for u in usage:
            if u.action == a["name"]:
                tokens["input"] += u.input_tokens
                tokens["cached"] += u.cached_tokens
                tokens["cache_write"] += u.cache_write_tokens
                tokens["output"] += u.output_tokens
        entry: dict[str, Any] = {
            "action": a["name"], "kind": a["kind"],
            "status": o.status if o else "pending",
            "reason": o.reason if o else None, "detail": o.detail if o else None,
            "origin": o.origin if o else None, "output": loads(o.output) if o else None,
            "attempts": attempts, "cost_usd": round(cost, 6),
        }
        if o is not None and o.fingerprint and a["kind"] == "llm":
            ans = store.get_answer(o.fingerprint)
            if ans is not None:
                entry["request"] = loads(ans.request)
                entry["response"] = loads(ans.response)
        actions.append(entry)
    statuses = [x["status"] for x in actions]
    status = ("failed" if "failed" in statuses else "pending" if "pending" in statuses
              else "answered" if "answered" in statuses else "skipped")
    return {
        "key": key, "workflow": run.workflow, "run_id": run.id, "status": status,
        "record": {"file": rec.file, "n": rec.n, "line": rec.line, "payload": loads(rec.payload),
                   "reason": rec.reason, "error": rec.error} if rec else None,
        "actions": actions, "tokens": tokens, "cost_usd": round(total_cost, 6),
        "errors": [{"kind": e.kind, "action": e.action, "data": loads(e.data),
                    "created_at": e.created_at} for e in events if e.kind == "unit_failed"],
    }


def _attempt(u: Any) -> dict[str, Any]:
    return {"attempt": u.attempt, "kind": u.kind, "status": u.status, "error": u.error,
            "provider": u.provider, "model": u.model, "tier": u.tier,
            "input_tokens": u.input_tokens, "cached_tokens": u.cached_tokens,
            "cache_write_tokens": u.cache_write_tokens, "output_tokens": u.output_tokens,
            "cost_usd": round(float(u.cost_usd), 6), "latency_ms": round(float(u.latency_ms), 2),
            "created_at": u.created_at}
