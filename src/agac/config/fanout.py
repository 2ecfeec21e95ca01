"""Fan-out regions and their joins: which actions run once per item (docs/workflow-reference.md, Fan-out and join).

A fan-out action F and every action downstream of it up to F's join make F's
*region*: they run once per item. A join (``kind: join``, or ``join: F`` on an llm or
tool action) runs once per parent and gets the items back. Regions nest: an action's
*scope* is the chain of fan-outs whose region holds it, outermost first; a record-level
action has the empty scope.

:func:`resolve_regions` is shared by validation (which reports its problems with
lines) and by the engine (which runs a validated workflow, so finds none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agac.config.keys import JOIN_NAMES

if TYPE_CHECKING:
    from agac.config.actions import RawAction
    from agac.config.model import FanOutSpec
    from agac.config.source import Findings

__all__ = ["JOIN_OUTPUT_SCHEMA", "Node", "Regions", "check_fan_outs", "list_at", "resolve_regions"]

JOIN_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "fulfilled": {"type": "array", "items": {"type": "object"}},
        "rejected": {"type": "array", "items": {"type": "object"}},
        "skipped": {"type": "array", "items": {"type": "object"}},
    },
}
"""The output of a ``kind: join`` action: the items as the join received them."""


@dataclass(frozen=True)
class Node:
    """What region resolution needs to know of one action (in topological order)."""

    name: str
    dependencies: tuple[str, ...]
    ancestors: tuple[str, ...]
    fan_out: bool = False
    join: str | None = None
    """The fan-out named by ``join:``; None when inferred (``kind: join``) or not a join."""
    is_join: bool = False


@dataclass
class Regions:
    """The resolved structure. ``problems`` are (code, message, action, key) tuples."""

    fan_outs: list[str] = field(default_factory=list)
    joins: dict[str, str] = field(default_factory=dict)
    """join action -> the fan-out whose items it collects."""
    members: dict[str, set[str]] = field(default_factory=dict)
    """fan-out -> the actions of its region (itself included)."""
    scope: dict[str, tuple[str, ...]] = field(default_factory=dict)
    problems: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def per_item(self, action: str) -> bool:
        return bool(self.scope.get(action))

    def join_inputs(self, join: str, dependencies: Sequence[str]) -> list[str]:
        """The join's dependencies inside its fan-out's region: what each item hands it."""
        region = self.members.get(self.joins.get(join, ""), set())
        return [d for d in dependencies if d in region]


def resolve_regions(nodes: Sequence[Node]) -> Regions:
    r = Regions()
    by_name = {n.name: n for n in nodes}
    anc = {n.name: set(n.ancestors) for n in nodes}
    r.fan_outs = [n.name for n in nodes if n.fan_out]
    for n in nodes:
        if n.is_join:
            target = _join_target(r, n, anc)
            if target is not None:
                r.joins[n.name] = target
    for fan in r.fan_outs:
        closers = {j for j, t in r.joins.items() if t == fan}
        r.members[fan] = {fan} | {
            x for x in by_name if fan in anc[x] and x not in closers and not (anc[x] & closers)
        }
    for n in nodes:
        r.scope[n.name] = _scope(r, n.name)
    for n in nodes:
        _check_dependencies(r, n)
    for j, fan in r.joins.items():
        if r.scope[j] != r.scope[fan][:-1]:
            r.problems.append(
                (
                    "nested_fan_out",
                    (
                        f"join {j!r} of fan-out {fan!r} must run at the "
                        f"level {fan!r} was fanned out from; close the inner fan-outs "
                        "first"
                    ),
                    j,
                    "join",
                )
            )
        if not r.join_inputs(j, by_name[j].dependencies):
            r.problems.append(
                (
                    "join_without_fan_out",
                    (f"join {j!r} does not depend on any action that runs per item of {fan!r}"),
                    j,
                    "dependencies",
                )
            )
    return r


def _join_target(r: Regions, n: Node, anc: Mapping[str, set[str]]) -> str | None:
    if n.join is not None:
        if n.join not in r.fan_outs:
            r.problems.append(
                (
                    "join_without_fan_out",
                    (f"{n.name!r} joins {n.join!r}, which is not an action with fan_out"),
                    n.name,
                    "join",
                )
            )
            return None
        if n.join not in anc[n.name]:
            r.problems.append(
                (
                    "join_without_fan_out",
                    (f"{n.name!r} joins {n.join!r}, which is not upstream of it"),
                    n.name,
                    "join",
                )
            )
            return None
        return n.join
    closed = {t for j, t in r.joins.items() if j in anc[n.name]}
    open_fans = [f for f in r.fan_outs if f in anc[n.name] and f not in closed]
    if not open_fans:
        r.problems.append(
            (
                "join_without_fan_out",
                (f"join {n.name!r} has no fan-out upstream whose items it could collect"),
                n.name,
                "kind",
            )
        )
        return None
    # The innermost: the open fan-out with the most open fan-outs above it.
    return max(open_fans, key=lambda f: sum(1 for g in open_fans if g in anc[f]))


def _scope(r: Regions, name: str) -> tuple[str, ...]:
    holders = [f for f in r.fan_outs if name in r.members[f]]
    for i, outer in enumerate(holders):
        for inner in holders[i + 1 :]:
            if inner not in r.members[outer]:
                r.problems.append(
                    (
                        "nested_fan_out",
                        (
                            f"{name!r} runs per item of both {outer!r} "
                            f"and {inner!r}, which are not nested"
                        ),
                        name,
                        "dependencies",
                    )
                )
    return tuple(holders)


def _check_dependencies(r: Regions, n: Node) -> None:
    sx = r.scope[n.name]
    for dep in n.dependencies:
        sd = r.scope.get(dep, ())
        if sx[: len(sd)] == sd:
            continue  # same level or deeper: an item sees its parent's outputs
        if r.joins.get(n.name) == sd[-1] and sd[:-1] == sx:
            continue  # the join reads the items of its fan-out
        r.problems.append(
            (
                "per_item_dependency",
                (
                    f"{n.name!r} depends on {dep!r}, which runs "
                    f"once per item of fan-out {sd[-1]!r}; read it through a join of "
                    f"{sd[-1]!r}"
                ),
                n.name,
                "dependencies",
            )
        )


_MISSING = object()


def list_at(schema: Any, path: Sequence[str]) -> bool | None:
    """Whether the value at ``path`` of an output with ``schema`` is a list: True, False
    (it cannot be one, or cannot exist), or None when the schema does not tell."""
    node = schema
    for key in path:
        if not isinstance(node, dict) or any(
            k in node for k in ("$ref", "anyOf", "oneOf", "allOf")
        ):
            return None
        props = node.get("properties")
        if props is None:
            return None
        if key not in props:
            extra = node.get("additionalProperties")
            return None if extra not in (None, False) or node.get("patternProperties") else False
        node = props[key]
    if not isinstance(node, dict) or any(k in node for k in ("$ref", "anyOf", "oneOf", "allOf")):
        return None
    types = node.get("type")
    if types is None:
        return None
    types = {types} if isinstance(types, str) else set(types)
    return "array" in types


# -- validation ---------------------------------------------------------------------------


def check_fan_outs(
    f: Findings,
    order: Sequence[RawAction],
    ancestors: Mapping[str, tuple[str, ...]],
    fields: dict[str, dict[str, Any]],
) -> dict[str, tuple[tuple[str, ...], frozenset[str]]]:
    """Check fan-outs and joins; fill each join's fan-out into ``fields``. Returns, per
    action, (the ancestors its templates see, the extra roots it sees)."""
    nodes = [
        Node(
            r.name,
            tuple(r.dependencies),
            ancestors[r.name],
            fan_out=fields[r.name].get("fan_out") is not None or "fan_out" in r.values,
            join=fields[r.name].get("join"),
            is_join=r.kind == "join" or "join" in r.values,
        )
        for r in order
    ]
    regions = resolve_regions(nodes)
    by_name = {r.name: r for r in order}
    for code, message, name, key in regions.problems:
        raw = by_name[name]
        f.error(
            code,
            message,
            raw.origin(key) if key in raw.values else raw.path + (key,),
            hint=_HINTS.get(code),
        )
    for j, fan in regions.joins.items():
        fields[j]["join"] = fan
    names = set(by_name)
    for fan in regions.fan_outs:
        _check_over(f, by_name[fan], fields, ancestors, names)
        _check_gate(f, by_name[fan], regions, fields, by_name)
    visible: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}
    for raw in order:
        scope = regions.scope.get(raw.name, ())
        seen = tuple(
            a
            for a in ancestors[raw.name]
            if scope[: len(regions.scope.get(a, ()))] == regions.scope.get(a, ())
        )
        extra = {_item_name(fields[s]) for s in scope if fields[s].get("fan_out") is not None}
        if raw.name in regions.joins:
            extra |= JOIN_NAMES
        visible[raw.name] = (seen, frozenset(extra))
    return visible


_HINTS = {
    "join_without_fan_out": "a join collects the items of a fan_out upstream of it",
    "per_item_dependency": "depend on the join instead; it receives every item as fulfilled "
    "or rejected",
    "nested_fan_out": "an inner fan-out is joined before its outer one",
}


def _item_name(fields: dict[str, Any]) -> str:
    spec: FanOutSpec = fields["fan_out"]
    return "version" if spec.versions is not None else spec.as_name


def _check_over(
    f: Findings,
    raw: RawAction,
    fields: dict[str, dict[str, Any]],
    ancestors: Mapping[str, tuple[str, ...]],
    names: set[str],
) -> None:
    spec: FanOutSpec | None = fields[raw.name].get("fan_out")
    if spec is None:
        return
    where = raw.origin("fan_out")
    if spec.versions is None and spec.as_name in names:
        f.error(
            "invalid_fan_out",
            f"fan_out.as {spec.as_name!r} is also the name of an action",
            where + ("as",),
            hint="pick another name for the item",
        )
    if spec.over is None:
        return
    root, *path = spec.over.split(".")
    if root == "source":
        return
    if root not in ancestors[raw.name]:
        f.error(
            "invalid_fan_out",
            f"fan_out.over of {raw.name!r} reads {spec.over!r}, but {root!r} is not upstream of it",
            where + ("over",),
            hint=f"add {root!r} to its dependencies"
            if root in names
            else "over is source.<field> or <ancestor>.<field>",
        )
        return
    root_fields = fields.get(root, {})
    schema = root_fields.get("schema")
    if schema is None:
        if root_fields.get("model") is not None:
            schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        elif root_fields.get("function") is None and root_fields.get("join"):
            schema = JOIN_OUTPUT_SCHEMA
    if schema is not None and list_at(schema, path) is False:
        f.error(
            "fan_out_not_a_list",
            f"fan_out.over of {raw.name!r} reads {spec.over!r}, which "
            f"the output schema of {root!r} does not make a list",
            where + ("over",),
            hint="fan out over a field whose schema has type: array",
        )


def _check_gate(
    f: Findings,
    raw: RawAction,
    regions: Regions,
    fields: dict[str, dict[str, Any]],
    by_name: Mapping[str, RawAction],
) -> None:
    if fields[raw.name].get("gate") != "sequential":
        return
    batched = [
        m
        for m in sorted(regions.members.get(raw.name, ()))
        if fields[m].get("run_mode") == "batch" and by_name[m].kind == "llm"
    ]
    if batched:
        f.error(
            "sequential_fan_out",
            f"fan-out {raw.name!r} is gated sequential, but "
            f"{', '.join(batched)} run in batch mode: every item would wait for the previous "
            "one's batch (up to 24 h each)",
            raw.origin("gate"),
            hint="use gate: parallel, or run_mode: online for the actions of this fan-out",
        )
