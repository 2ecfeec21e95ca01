"""An llm action's ``checks:`` applied to one answer: each check's verdict, and what they make
of the unit's outcome (docs/workflow-reference.md, Checks).

A check's expression is compiled once (the sandboxed guard compiler of agac.prompt.render)
and evaluated with the unit's view (``source``, the ancestors' outputs) plus ``answer``. An
expression that reads a value the answer lacks, or raises, is a failed check whose reason
says so: a check never passes by accident.

The checks are judged in the order written; the first failed ``repair`` or ``fail`` check
decides the unit, failed ``flag`` checks only mark it. A repair is asked by the online call
path (engine/walk/calls.py) for an answer it asked; an answer it did not ask (reused, or
read from a batch) is judged and repaired by engine/walk/judging.py, its repairs in the
action's next batch round (engine/batch/rounds.py) or live.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from jinja2.exceptions import UndefinedError

from agac.prompt.render import compile_guard
from agac.providers.base import Message

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agac.config.model import CheckSpec
    from agac.jsontext import JSON, JSONObject
    from agac.providers.base import Request

__all__ = [
    "JUDGE_ORIGIN",
    "CheckedOutcome",
    "Grader",
    "JudgeNotSent",
    "Verdict",
    "expr_verdict",
    "judge",
    "kept_before_judging",
    "outcome_of",
    "repair_feedback",
    "repair_request",
    "verdicts_json",
    "verdicts_of",
]

JUDGE_ORIGIN = "judge"
"""The ledger origin of a judge's call (engine/judges.py)."""


class JudgeNotSent(Exception):
    """A judge's call the run's budget has no room for: the unit it grades is skipped
    ``budget_exhausted`` (its answer kept, so a later run with room judges it without
    asking it again). The message names the check and the cap."""


def kept_before_judging(checks: Sequence[CheckSpec]) -> bool:
    """Whether an answer asked live is stored before its judges are asked, so a crash
    between the two neither loses the answer nor asks it again: with a ``judge:`` check.
    Each answer is kept under the request that got it — the unit's, or the repair request
    (:func:`repair_request`) — so a repair never takes the place of the answer it
    repaired, and a later run finds the whole chain stored."""
    return any(c.judge is not None for c in checks)


@dataclass(frozen=True)
class Verdict:
    """One check's verdict on one answer; ``why`` says what is wrong when it failed."""

    check: CheckSpec
    passed: bool
    why: str | None = None


@dataclass(frozen=True)
class CheckedOutcome:
    """What the verdicts make of an answered unit: still ``answered`` (``detail`` marks the
    failed ``flag`` checks), ``repair`` with the failed check, ``failed``
    ``check_failed``, or ``skipped`` when a judge could not be sent (``detail`` says
    why: :class:`JudgeNotSent`)."""

    status: Literal["answered", "repair", "failed", "skipped"]
    detail: str | None = None
    failed: Verdict | None = None
    verdicts: str | None = None
    """Every check's verdict as stored with the unit (:func:`verdicts_json`)."""


@lru_cache(maxsize=256)
def _compiled(expr: str) -> Any:
    return compile_guard(expr)


def judge(checks: Sequence[CheckSpec], view: JSONObject, answer: JSON) -> tuple[Verdict, ...]:
    """Every expression check's verdict on ``answer`` for the unit that sees ``view``
    (:func:`verdicts_of` asks the judges too)."""
    if not checks:
        return ()
    scope = dict(view)
    scope["answer"] = answer
    return tuple(expr_verdict(c, scope) for c in checks if c.judge is None)


Grader = Callable[["CheckSpec", "dict[str, Any]"], Awaitable["Verdict"]]
"""A ``judge:`` check's verdict on the answer in a scope (engine/judges.py, for one unit)."""


async def verdicts_of(
    checks: Sequence[CheckSpec], view: JSONObject, answer: JSON, grader: Grader
) -> tuple[Verdict, ...]:
    """Every check's verdict on ``answer``, in the order written: an expression judged
    here, a judge asked through ``grader``."""
    if not checks:
        return ()
    scope = dict(view)
    scope["answer"] = answer
    out: list[Verdict] = []
    for check in checks:
        out.append(
            await grader(check, scope) if check.judge is not None else expr_verdict(check, scope)
        )
    return tuple(out)


def expr_verdict(check: CheckSpec, scope: dict[str, Any]) -> Verdict:
    """An expression check's verdict on the ``answer`` in ``scope``."""
    assert check.expr is not None, check.name
    try:
        value = _compiled(check.expr)(scope)
    except UndefinedError as exc:
        return Verdict(check, False, f"{check.expr} reads a value the answer lacks ({exc})")
    except Exception as exc:  # noqa: BLE001 - an error in the user's expression fails the check
        return Verdict(check, False, f"{check.expr} raised {type(exc).__name__}: {exc}")
    if value:
        return Verdict(check, True)
    return Verdict(check, False, check.message or f"{check.expr} is false")


def outcome_of(verdicts: Sequence[Verdict], *, repairs: int, can_repair: bool) -> CheckedOutcome:
    """The unit's outcome after ``repairs`` repairs already asked; ``can_repair`` is False
    where the answer is not asked in this run (reused, from a batch)."""
    flagged: list[str] = []
    for v in verdicts:
        if v.passed:
            continue
        on_fail = v.check.on_fail
        if on_fail == "flag":
            flagged.append(f"check_failed:{v.check.name}: {v.why}")
            continue
        if on_fail == "repair" and can_repair and repairs < v.check.max_repairs:
            return CheckedOutcome("repair", failed=v)
        detail = _failed_detail(v, repairs, can_repair)
        return CheckedOutcome("failed", detail, v, verdicts_json(verdicts))
    return CheckedOutcome("answered", "; ".join(flagged) or None, None, verdicts_json(verdicts))


def verdicts_json(verdicts: Sequence[Verdict]) -> str | None:
    """The verdicts as stored with the unit (``outcomes.checks``): a JSON object of check
    name → passed, in the order written; None without checks."""
    if not verdicts:
        return None
    return json.dumps({v.check.name: v.passed for v in verdicts}, separators=(",", ":"))


def _failed_detail(v: Verdict, repairs: int, can_repair: bool) -> str:
    text = f"check {v.check.name!r} failed: {v.why}"
    if v.check.on_fail != "repair":
        return text
    if not can_repair:
        return f"{text} (an answer not asked in this run is not repaired)"
    return f"{text} (after {repairs} repair{'s' if repairs != 1 else ''})"


def repair_feedback(v: Verdict) -> str:
    """What the model is told when its answer is sent back for repair."""
    return (
        f"Your answer failed the check {v.check.name!r}: {v.why}. "
        "Answer again, in the same format, with that corrected."
    )


def repair_request(request: Request, output_json: str, v: Verdict) -> Request:
    """The repair of the answer ``output_json`` (as stored) to the unit's ``request``: the
    request, that answer, and what the failed check says. One function for every path
    (live, a batch round, a reused answer), so a repair asked anywhere is found again by
    its fingerprint: never asked twice."""
    value = json.loads(output_json)
    said = value if isinstance(value, str) else output_json
    messages = (*request.messages, Message("assistant", said), Message("user", repair_feedback(v)))
    return replace(request, messages=messages)
