"""The action graph: dependency checks, a stable topological order, and ancestors.

The order is file order wherever the dependencies allow it (Kahn's algorithm always
taking the earliest action in the file that is ready), so reordering nothing in the
file reorders nothing in the run.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from agac.config.actions import RawAction
from agac.config.source import Findings, did_you_mean

__all__ = ["order_actions", "reachable_dependencies"]


def order_actions(
    f: Findings, actions: Sequence[RawAction]
) -> tuple[list[RawAction], dict[str, tuple[str, ...]]] | None:
    """Check the graph and return (actions in topological order, ancestors by name).

    Reports ``duplicate_action``, ``unknown_dependency`` and ``dependency_cycle``;
    returns None when a cycle makes an order impossible.
    """
    by_name: dict[str, RawAction] = {}
    for raw in actions:
        if raw.name in by_name:
            f.error(
                "duplicate_action",
                f"action {raw.name!r} is defined twice (first on line {by_name[raw.name].line})",
                raw.path + ("name",),
            )
        else:
            by_name[raw.name] = raw
    deps: dict[str, list[str]] = {}
    for raw in by_name.values():
        deps[raw.name] = []
        for i, dep in enumerate(raw.dependencies):
            if dep in by_name:
                deps[raw.name].append(dep)
            else:
                f.error(
                    "unknown_dependency",
                    f"action {raw.name!r} depends on unknown action {dep!r}",
                    raw.path + ("dependencies", i),
                    hint=did_you_mean(dep, by_name),
                )
    order = _topological(by_name, deps)
    if len(order) < len(by_name):
        _report_cycles(f, by_name, deps, set(by_name) - set(order))
        return None
    position = {name: i for i, name in enumerate(order)}
    ancestors: dict[str, tuple[str, ...]] = {}
    for name in order:
        seen = set(deps[name])
        for dep in deps[name]:
            seen.update(ancestors[dep])
        ancestors[name] = tuple(sorted(seen, key=position.__getitem__))
    return [by_name[n] for n in order], ancestors


def _topological(by_name: dict[str, RawAction], deps: dict[str, list[str]]) -> list[str]:
    waiting = {name: len(set(d)) for name, d in deps.items()}
    dependants: dict[str, list[str]] = {name: [] for name in deps}
    for name, d in deps.items():
        for dep in set(d):
            dependants[dep].append(name)
    ready = [(by_name[n].index, n) for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for child in dependants[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, (by_name[child].index, child))
    return order


def _report_cycles(
    f: Findings, by_name: dict[str, RawAction], deps: dict[str, list[str]], left: set[str]
) -> None:
    reported: set[str] = set()
    for start in sorted(left, key=lambda n: by_name[n].index):
        cycle = _find_cycle(start, deps, left)
        if cycle is None or reported.intersection(cycle):
            continue
        reported.update(cycle)
        first = by_name[cycle[0]]
        f.error(
            "dependency_cycle",
            "dependency cycle: " + " -> ".join([*cycle, cycle[0]]),
            first.path + ("dependencies",),
        )


def _find_cycle(start: str, deps: dict[str, list[str]], left: set[str]) -> list[str] | None:
    path: list[str] = []
    on_path: set[str] = set()
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for dep in deps[node]:
            if dep in on_path:
                return path[path.index(dep) :]
            if dep in left and dep not in done and (found := visit(dep)) is not None:
                return found
        on_path.discard(node)
        done.add(node)
        path.pop()
        return None

    return visit(start)


def reachable_dependencies(actions: Sequence[RawAction]) -> dict[str, tuple[str, ...]]:
    """Every action's transitive dependencies (known names only), in file order — defined
    even when the graph has a cycle, so the checks that need an action's ancestors can
    still run and report their own problems next to ``dependency_cycle``. An action on a
    cycle is never its own dependency here."""
    by_name = {raw.name: raw for raw in actions}
    found: dict[str, tuple[str, ...]] = {}
    for raw in actions:
        seen: set[str] = set()
        stack = [d for d in raw.dependencies if d in by_name]
        while stack:
            name = stack.pop()
            if name in seen or name == raw.name:
                continue
            seen.add(name)
            stack.extend(d for d in by_name[name].dependencies if d in by_name)
        found[raw.name] = tuple(sorted(seen, key=lambda n: by_name[n].index))
    return found
