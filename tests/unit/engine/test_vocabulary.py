"""Every status, origin and reason the engine writes into an outcome is one of the store's
vocabulary (agac.store.values): a misspelt code would be a silent new bucket. Outcomes are
written by the outcome writer (``out.settle(rt, rec, status, reason, …)``) and decided as
``Settle(status, reason, detail, origin, …)`` values (engine/decision.py)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import agac.engine
from agac.store.values import Origin, OutcomeStatus, Reason

ENGINE = Path(agac.engine.__file__).parent


def _settle_calls() -> list[tuple[str, ast.Call]]:
    """Each outcome written or decided, as a call ``settle(rt, rec, status, reason, …,
    origin=…)``."""
    out = []
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "settle"
                and len(node.args) >= 3
                and ast.unparse(node.func.value).endswith("out")
            ):  # the outcome writer
                out.append((f"{path.relative_to(ENGINE)}:{node.lineno}", node))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Settle"
                and node.args
            ):  # a decision's outcome
                args = [ast.Constant(None), ast.Constant(None), *node.args[:2]]
                keywords = list(node.keywords)
                if len(node.args) > 3:
                    keywords.append(ast.keyword("origin", node.args[3]))
                out.append(
                    (
                        f"{path.relative_to(ENGINE)}:{node.lineno}",
                        ast.Call(node.func, args, keywords),
                    )
                )
    return out


def test_settled_statuses_reasons_and_origins_are_the_vocabulary() -> None:
    statuses, reasons, origins = (set(typing.get_args(t)) for t in (OutcomeStatus, Reason, Origin))
    calls = _settle_calls()
    assert len(calls) > 30  # the walk, batch units, approvals, effects settle units
    wrong = []
    for where, call in calls:
        status = call.args[2]
        if isinstance(status, ast.Constant) and status.value not in statuses:
            wrong.append(f"{where}: status {status.value!r}")
        if (
            len(call.args) > 3
            and isinstance(call.args[3], ast.Constant)
            and call.args[3].value is not None
            and call.args[3].value not in reasons
        ):
            wrong.append(f"{where}: reason {call.args[3].value!r}")
        for kw in call.keywords:
            if (
                kw.arg == "origin"
                and isinstance(kw.value, ast.Constant)
                and kw.value.value not in origins
            ):
                wrong.append(f"{where}: origin {kw.value.value!r}")
    assert wrong == []
