"""Advice: for an action whose failures are mostly of one reason — most of its units, or a
reason a retry cannot fix — that reason's first message and the fix that works."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.keys import record_of
from agac.reasons import REASONS, reason_code

if TYPE_CHECKING:
    from agac.engine.report.counts import ActionSummary
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = [
    "ADVISED_SKIPS",
    "NOT_FIXED_BY_RETRY",
    "SKIP_REASONS",
    "Advice",
    "FirstFailure",
    "advise",
]

SKIP_REASONS = frozenset(code for code, r in REASONS.items() if r.bucket == "skipped")
"""Reasons of skipped units (agac/reasons.py); every other reason is a failure's."""

ADVISED_SKIPS = frozenset({"provider_unreachable"})
"""Skips whose fix the summary says, as a failure's (for the action that sent the calls,
not the actions skipped after it): the provider, not the workflow."""

NOT_FIXED_BY_RETRY = frozenset(
    code for code, r in REASONS.items() if r.bucket == "failed" and not r.retry
) | {"batch_refused"}
"""Failures a retry alone does not fix (the same request fails the same way; a refused
batch: `agac retry` is refused while the other files' batches are out): the summary says
the fix, and ``next`` is the `agac run` that works after it."""

_SHOWS = {
    "render_error": " — `agac render {wf} --record {record} --action {action}` shows "
    "the template's request for the first one",
    "tool_error": " — `agac records show {key} --workflow {wf}` shows the traceback",
}


@dataclass(frozen=True)
class FirstFailure:
    """The first unit that failed of the reason: its key and message."""

    key: str
    detail: str | None


@dataclass(frozen=True)
class Advice:
    """An action's dominant failure (or advised skip): its reason, whether the units
    ``failed`` or were ``skipped``, how many, the first, the fix."""

    action: str
    reason: str
    status: str
    units: int
    first: FirstFailure
    fix: str


def advise(
    store: Store, run: RunRecord, actions: Mapping[str, ActionSummary]
) -> tuple[Advice, ...]:
    """The advice for each action whose failures are mostly of one reason, in order."""
    out = []
    for name, entry in actions.items():
        failures = {
            r: n
            for r, n in entry.reasons.items()
            if r not in SKIP_REASONS or (r in ADVISED_SKIPS and entry.calls)
        }
        if not failures:
            continue
        reason, n = max(failures.items(), key=lambda item: item[1])
        if n * 2 < entry.records and reason not in NOT_FIXED_BY_RETRY:
            continue
        first = store.first_failure(run.id, name, reason)
        key = first.unit_key if first is not None else ""
        detail = first.detail if first is not None else None
        status = "skipped" if reason in SKIP_REASONS else "failed"
        first_failure = FirstFailure(key, detail)
        out.append(Advice(name, reason, status, n, first_failure, _fix(run, name, reason, key)))
    return tuple(out)


def _fix(run: RunRecord, action: str, reason: str, key: str) -> str:
    """The registry's fix for ``reason``, with the command that shows the first one."""
    code = reason_code(reason)
    fix = (
        (code.fix if code is not None else "see `agac records show KEY`")
        .replace("WF", run.workflow)
        .replace("KEY", key)
    )
    return fix + _SHOWS.get(reason, "").format(
        wf=run.workflow, record=record_of(key), key=key, action=action
    )
