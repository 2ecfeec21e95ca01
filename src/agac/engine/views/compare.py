"""``agac compare RUN_A RUN_B``: two runs over the same records, side by side (docs/cli.md,
agac compare) — two models, two prompts, or a run before and after a change.

Units are matched by unit key within each action the two runs share. For each action:
how many units each run has and how many both do; the units whose status changed; for
the units answered in both, agreement per field of the answer (its top-level fields, or
``text`` for a free-text answer) and the rows that differ; for each field the action's
schema declares an ``enum`` (or a boolean), the values' counts in each run; for each
numeric field, the mean in each run and the mean, mean absolute and largest absolute
difference (B − A). Per run: each check's pass rate, and calls, tokens and cost (the
ledger, every origin counted).

The same comparison serves the variants of one action in one run (``agac compare RUN
--variants``; config/variants.py): each side is then a variant, read from the action
that runs it, and its calls, tokens, cost and check pass rates are that action's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.engine.graph import run_graph
from agac.engine.report.checks import check_rates
from agac.engine.report.cost import cost_breakdown
from agac.engine.report.jsondoc import to_json
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store
    from agac.store.values import OutcomeRecord, RunRecord

__all__ = ["Side", "answered_pairs", "compare_runs", "compare_variants", "diff_rows", "sides"]

_MISSING = object()


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run, or one variant of an action in a run (then
    ``stored`` is the action that runs the variant, read for the compared action)."""

    run: RunRecord
    stored: str | None = None
    variant: str | None = None

    def action(self, name: str) -> str:
        return self.stored or name


def sides(
    run: RunRecord, action: str | None, variants: tuple[str, str] | None
) -> tuple[str, Side, Side]:
    """(the compared action, side A, side B) of two variants of an action of ``run``:
    ``action`` (or the run's one action with variants) and ``variants`` (or its primary and
    the next); UsageError naming what there is to choose from."""
    found: dict[str, dict[str, str]] = {}
    for one in run_graph(run).actions:
        if one.variant_of is not None and one.variant is not None:
            found.setdefault(one.variant_of, {})[one.variant] = one.name
    if action is None and not found:
        raise UsageError(f"run {run.id} has no action with variants to compare")
    if action is None and len(found) > 1:
        raise UsageError(f"run {run.id} has variants on {', '.join(found)}: name one with --action")
    action = action if action is not None else next(iter(found))
    if action not in found:
        raise UsageError(
            f"action {action!r} of run {run.id} has no variants"
            + (f"; these do: {', '.join(found)}" if found else "")
        )
    names = found[action]
    ordered = list(names)
    pick = variants or (ordered[0], ordered[1])
    for v in pick:
        if v not in names:
            raise UsageError(
                f"action {action!r} has no variant {v!r}; its variants: {', '.join(names)}"
            )
    if pick[0] == pick[1]:
        raise UsageError(f"name two different variants of {action!r}, not {pick[0]!r} twice")
    return action, Side(run, names[pick[0]], pick[0]), Side(run, names[pick[1]], pick[1])


def compare_variants(
    store: Store,
    run: RunRecord,
    prices: PriceTable,
    *,
    action: str | None = None,
    variants: tuple[str, str] | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    """Two variants of one action of ``run`` compared as :func:`compare_runs` compares two
    runs (``agac compare RUN --variants``), with ``variants``: the action and the two."""
    name, a, b = sides(run, action, variants)
    out = _compare(store, a, b, [name], prices, limit)
    out["variants"] = {"action": name, "a": a.variant, "b": b.variant}
    return out


def compare_runs(
    store: Store,
    a: RunRecord,
    b: RunRecord,
    prices: PriceTable,
    *,
    action: str | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    """The comparison of run ``a`` with run ``b`` (``agac compare --json``); each action's
    ``changed`` lists at most ``limit`` rows (:func:`diff_rows` has them all)."""
    return _compare(store, Side(a), Side(b), _shared(a, b, action), prices, limit)


def _compare(
    store: Store, a: Side, b: Side, actions: list[str], prices: PriceTable, limit: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "runs": {"a": _run(store, a, prices), "b": _run(store, b, prices)},
        "actions": {},
    }
    for name in actions:
        out["actions"][name] = _compare_action(store, a, b, name, limit)
    return out


def _names(a: Side, b: Side, action: str | None) -> list[str]:
    """The compared actions: of two variants, the one action; of two runs, those shared."""
    if a.stored is not None:
        return [action] if action is not None else []
    return _shared(a.run, b.run, action)


def diff_rows(
    store: Store, a: Side, b: Side, action: str | None = None
) -> Iterator[dict[str, Any]]:
    """Every unit that differs between the sides, action by action: its key, each side's
    status, reason and answer, and the fields that changed."""
    for name in _names(a, b, action):
        for key, left, right in _pairs(store, a, b, name):
            row = _diff(name, key, left, right)
            if row is not None:
                yield row


def answered_pairs(
    store: Store, a: Side, b: Side, action: str | None = None
) -> Iterator[tuple[str, str, Any, Any]]:
    """(action, unit key, A's answer, B's answer) of every unit both sides answered."""
    for name in _names(a, b, action):
        for key, left, right in _pairs(store, a, b, name):
            if left is None or right is None:
                continue
            if left.status == right.status == "answered":
                yield name, key, _fields(left), _fields(right)


def _shared(a: RunRecord, b: RunRecord, action: str | None) -> list[str]:
    theirs = set(b.action_names)
    shared = [n for n in a.action_names if n in theirs]
    if action is not None:
        if action not in shared:
            raise UsageError(
                f"action {action!r} is not in both runs; they share: {', '.join(shared) or 'none'}"
            )
        return [action]
    if not shared:
        raise UsageError(
            f"runs {a.id} ({a.workflow}) and {b.id} ({b.workflow}) share no action to compare"
        )
    return shared


def _run(store: Store, side: Side, prices: PriceTable) -> dict[str, Any]:
    run = side.run
    cost = cost_breakdown(store, run, prices)
    llm = [r for r in cost.rows if r.kind == "llm"]
    if side.stored is not None:
        llm = [r for r in llm if r.action == side.stored]
    by_action: dict[str, dict[str, Any]] = {}
    for r in llm:
        entry = by_action.setdefault(
            r.action, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        )
        entry["calls"] += r.calls
        entry["input_tokens"] += r.input_tokens + r.cached_tokens + r.cache_write_tokens
        entry["output_tokens"] += r.output_tokens
        entry["cost_usd"] = round(entry["cost_usd"] + r.cost_usd, 6)
    graph = run_graph(run)
    checks = to_json(check_rates(store, run.id))
    out: dict[str, Any] = {"run_id": run.id, "workflow": run.workflow, "state": run.state}
    if side.stored is not None:
        action = graph.action(side.stored)
        compared = action.variant_of or side.stored
        by_action = {compared: by_action[side.stored]} if side.stored in by_action else {}
        checks = {compared: checks[side.stored]} if side.stored in checks else {}
        out.update(variant=side.variant, action=side.stored)
    models = sorted({a.model for a in graph.actions if a.model and side.stored in (None, a.name)})
    return {
        **out,
        "models": models,
        "cost_usd": round(sum(e["cost_usd"] for e in by_action.values()), 6)
        if side.stored is not None
        else cost.cost_usd,
        "calls": sum(e["calls"] for e in by_action.values()),
        "input_tokens": sum(e["input_tokens"] for e in by_action.values()),
        "output_tokens": sum(e["output_tokens"] for e in by_action.values()),
        "per_action": by_action,
        "checks": checks,
    }


def _pairs(
    store: Store, a: Side, b: Side, action: str
) -> Iterator[tuple[str, OutcomeRecord | None, OutcomeRecord | None]]:
    """(unit key, A's outcome, B's outcome) of every unit either side has, in A's order
    then B's own. B's outcomes are held in memory (one action's)."""
    theirs = {o.unit_key: o for o in store.iter_action_outcomes(b.run.id, b.action(action))}
    for o in store.iter_action_outcomes(a.run.id, a.action(action)):
        yield o.unit_key, o, theirs.pop(o.unit_key, None)
    for key, o in theirs.items():
        yield key, None, o


def _compare_action(store: Store, a: Side, b: Side, action: str, limit: int) -> dict[str, Any]:
    schema = _schema(a.run, a.action(action)) or _schema(b.run, b.action(action)) or {}
    counts = Counter[str]()
    agree: dict[str, list[int]] = {}
    enums = _enum_fields(schema)
    dist: dict[str, dict[str, Counter[str]]] = {f: {"a": Counter(), "b": Counter()} for f in enums}
    numbers: dict[str, list[tuple[float, float]]] = {}
    changed: list[dict[str, Any]] = []
    for key, left, right in _pairs(store, a, b, action):
        counts["units_a" if right is None else "units_b" if left is None else "both"] += 1
        _distribution(dist, "a", left)
        _distribution(dist, "b", right)
        if left is not None and right is not None:
            if left.status != right.status:
                counts["status_changed"] += 1
            if left.status == right.status == "answered":
                counts["answered_both"] += 1
                _agreement(agree, numbers, _fields(left), _fields(right))
        row = _diff(action, key, left, right)
        if row is not None:
            counts["changed"] += 1
            if len(changed) < limit:
                changed.append(row)
    return {
        "units": {
            "a": counts["units_a"] + counts["both"],
            "b": counts["units_b"] + counts["both"],
            "both": counts["both"],
            "only_a": counts["units_a"],
            "only_b": counts["units_b"],
        },
        "status_changed": counts["status_changed"],
        "answered_both": counts["answered_both"],
        "agreement": {
            f: {"same": s, "compared": n, "rate": round(s / n, 4) if n else None}
            for f, (s, n) in agree.items()
        },
        "distributions": {
            f: {side: dict(sorted(c.items())) for side, c in sides.items()}
            for f, sides in dist.items()
        },
        "numeric": {f: _deltas(pairs) for f, pairs in numbers.items() if pairs},
        "changed": changed,
        "changed_count": counts["changed"],
    }


def _schema(run: RunRecord, action: str) -> dict[str, Any] | None:
    found = [a.schema for a in run_graph(run).actions if a.name == action]
    return found[0] if found else None


def _enum_fields(schema: Mapping[str, Any]) -> list[str]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return []
    return [
        name
        for name, spec in props.items()
        if isinstance(spec, dict) and ("enum" in spec or spec.get("type") == "boolean")
    ]


def _fields(o: OutcomeRecord) -> dict[str, Any]:
    value = json.loads(o.output) if o.output is not None else None
    return value if isinstance(value, dict) else {"text": value}


def _distribution(
    dist: dict[str, dict[str, Counter[str]]], side: str, o: OutcomeRecord | None
) -> None:
    if not dist or o is None or o.status != "answered":
        return
    fields = _fields(o)
    for name, sides in dist.items():
        value = fields.get(name, _MISSING)
        label = value if isinstance(value, str) else json.dumps(value)
        sides[side]["(none)" if value is _MISSING else label] += 1


def _agreement(
    agree: dict[str, list[int]],
    numbers: dict[str, list[tuple[float, float]]],
    left: dict[str, Any],
    right: dict[str, Any],
) -> None:
    for name in dict.fromkeys([*left, *right]):
        x, y = left.get(name, _MISSING), right.get(name, _MISSING)
        tally = agree.setdefault(name, [0, 0])
        tally[0] += x == y
        tally[1] += 1
        if _number(x) and _number(y):
            numbers.setdefault(name, []).append((float(x), float(y)))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _deltas(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    n = len(pairs)
    deltas = [y - x for x, y in pairs]
    return {
        "compared": n,
        "mean_a": round(sum(x for x, _ in pairs) / n, 6),
        "mean_b": round(sum(y for _, y in pairs) / n, 6),
        "mean_delta": round(sum(deltas) / n, 6),
        "mean_abs_delta": round(sum(abs(d) for d in deltas) / n, 6),
        "max_abs_delta": round(max(abs(d) for d in deltas), 6),
        "changed": sum(1 for d in deltas if d != 0),
    }


def _diff(
    action: str, key: str, left: OutcomeRecord | None, right: OutcomeRecord | None
) -> dict[str, Any] | None:
    """The row of a unit that differs (status, reason or answer), else None."""
    a_out = _fields(left) if left is not None and left.output is not None else None
    b_out = _fields(right) if right is not None and right.output is not None else None
    same = (
        left is not None
        and right is not None
        and (left.status, left.reason) == (right.status, right.reason)
        and a_out == b_out
    )
    if same:
        return None
    fields = sorted(
        n
        for n in dict.fromkeys([*(a_out or {}), *(b_out or {})])
        if (a_out or {}).get(n, _MISSING) != (b_out or {}).get(n, _MISSING)
    )
    return {
        "action": action,
        "key": key,
        "a": _side(left, a_out),
        "b": _side(right, b_out),
        "fields": fields,
    }


def _side(o: OutcomeRecord | None, output: dict[str, Any] | None) -> dict[str, Any] | None:
    if o is None:
        return None
    return {"status": o.status, "reason": o.reason, "output": output}
