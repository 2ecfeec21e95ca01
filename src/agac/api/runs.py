"""Running workflows: ``agac run`` (admit or continue, R1), ``agac retry`` (R2) and
``agac cancel``. Each returns a :class:`agac.engine.runs.RunResult`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, project_of, reading, using, workflow_name
from agac.api.workflows import load_workflow
from agac.jsontext import loads

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["cancel", "retry", "run"]


def run(ref: str | Path, project: ProjectRef = None, *,
        run_mode: str | None = None, poll_interval: float | str | None = None,
        batch_deadline: float | str | None = None, budget_usd: float | None = None,
        store: Store | None = None, **options: Any) -> Any:
    """``agac run``: continue the open run or admit a new one and execute it (R1).

    ``budget_usd`` caps a new run's spending instead of the file's ``budget.usd`` (R5).
    Options: ``new``, ``fresh``, ``limit``, ``wait``, ``allow_over_estimate``,
    ``handle_signals``, ``on_progress``, ``on_start``. Returns a
    :class:`agac.engine.runs.RunResult`.
    """
    from agac.engine.runs import RunOptions, start_run

    proj = project_of(project)
    overrides: dict[str, Any] = {"run_mode": run_mode, "poll_interval": poll_interval,
                                 "batch_deadline": batch_deadline, "budget_usd": budget_usd}
    workflow = load_workflow(ref, proj, **overrides)
    with using(proj, store, wait=bool(options.get("wait"))) as (_, st):
        # A run continued (R1) is compared with the file as loaded with the overrides
        # it was admitted with, not with today's: they belong to the run.
        result = start_run(proj, st, workflow, RunOptions(**options), overrides=overrides,
                           reload=lambda o: load_workflow(ref, proj, **o))
        result.notes[:0] = st.notes  # what the store itself has to say (a torn log, O3)
        return result


def retry(ref: str | Path, project: ProjectRef = None, *,
          action: str | None = None, record: str | None = None, dry_run: bool = False,
          abandon_in_flight: bool = False, store: Store | None = None, **options: Any) -> Any:
    """``agac retry`` (R2): re-ask the failed units of the latest final run.

    ``abandon_in_flight`` (B10): retry even though a batch of the workflow is still out;
    its waiting records fail ``batch_abandoned`` first.
    """
    from agac.engine.runs import RunOptions, start_retry

    proj = project_of(project)
    workflow = load_workflow(ref, proj)
    with using(proj, store) as (_, st):
        # A retry runs with the per-run settings (--run-mode, ...) of the run it retries.
        last = st.latest_run(workflow.name, final=True)
        overrides = (loads(last.options).get("overrides") or {}) if last is not None else {}
        if overrides:
            workflow = load_workflow(ref, proj, **overrides)
        run_options = RunOptions(**options)
        run_options.overrides = overrides
        return start_retry(proj, st, workflow, run_options, action, record, dry_run,
                           abandon_in_flight=abandon_in_flight)


def cancel(ref: str, project: ProjectRef = None, *, store: Store | None = None) -> Any:
    """``agac cancel RUN|WF``: end a run ``cancelled`` — a run id, or a workflow's open run.

    Its batches out are cancelled at the provider (their records fail ``batch_cancelled``)
    and units never sent are skipped ``cancelled``. A run owned by a live process is marked
    ``cancelling`` and ended by its owner at its next heartbeat. Returns a
    :class:`agac.engine.runs.RunResult`."""
    from agac.engine.runs import cancel_run
    from agac.errors import RefusedError

    with reading(project, store, writes=True) as (proj, st):
        run_row = st.get_run(ref)
        if run_row is None:
            run_row = st.open_run(workflow_name(ref, proj))
            if run_row is None:
                raise RefusedError(f"{ref!r} is neither a run id nor a workflow with an open run; "
                                   "`agac runs list` shows the runs")
        return cancel_run(proj, st, run_row)
