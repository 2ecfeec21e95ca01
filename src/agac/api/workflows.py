"""Workflows before they run: load and validate them, plan a run's cost, render the exact
requests a record would send. Nothing here sends a request or writes the store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, project_of, using
from agac.config.model import Workflow

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["load_workflow", "plan", "render", "validate"]


def load_workflow(ref: str | Path, project: ProjectRef = None, *,
                  run_mode: str | None = None, poll_interval: float | str | None = None,
                  batch_deadline: float | str | None = None,
                  budget_usd: float | None = None) -> Workflow:
    """The validated workflow ``ref`` (a path or a ``name:``); ConfigError with every problem.

    ``run_mode``, ``poll_interval``, ``batch_deadline`` and ``budget_usd`` are this run's
    own settings (seconds or a duration string; USD), merged before validation (DESIGN §3).
    """
    from agac.config.workflow import load_workflow as _load
    from agac.providers.pricing import PriceTable

    proj = project_of(project)
    prices = PriceTable(dict(proj.config.prices))
    return _load(ref, proj, run_mode=run_mode, poll_interval=poll_interval,
                 batch_deadline=batch_deadline, price_lookup=prices.known, budget_usd=budget_usd)


def validate(ref: str | Path, project: ProjectRef = None, *,
             run_mode: str | None = None, poll_interval: float | str | None = None,
             batch_deadline: float | str | None = None,
             sample: int = 100) -> tuple[Workflow | None, list[Any]]:
    """(workflow or None, every error and warning) without raising for config errors.

    ``sample``: how many of the input's first records to read to check ``id_field`` and
    the ``source`` fields templates read (0: do not read the input)."""
    from agac.config.workflow import validate_workflow
    from agac.providers.pricing import PriceTable

    proj = project_of(project)
    prices = PriceTable(dict(proj.config.prices))
    return validate_workflow(ref, proj, run_mode=run_mode, poll_interval=poll_interval,
                             batch_deadline=batch_deadline, price_lookup=prices.known,
                             sample=sample)


def plan(ref: str | Path, project: ProjectRef = None, *,
         run_mode: str | None = None, budget_usd: float | None = None,
         limit: int | None = None, store: Store | None = None) -> dict[str, Any]:
    """``agac plan``: what a new run would send and cost — units, requests, estimated
    tokens, cost online vs batch, answers already reusable (R5). Sends nothing and
    writes nothing."""
    from itertools import islice

    from agac.engine.plan import estimate_run, plan_records
    from agac.providers.pricing import PriceTable

    proj = project_of(project)
    workflow = load_workflow(ref, proj, run_mode=run_mode, budget_usd=budget_usd)
    with using(proj, store, writes=False) as (_, st):
        records = plan_records(proj, workflow)
        if limit is not None:
            records = islice(records, limit)
        return estimate_run(proj, st, workflow, PriceTable(dict(proj.config.prices)), records)


def render(ref: str, record: str, action: str | None = None, project: ProjectRef = None, *,
           store: Store | None = None) -> list[dict[str, Any]]:
    """The exact requests the workflow would send for ``record``, before any money is spent."""
    from agac.engine.sessions import render_requests

    proj = project_of(project)
    workflow = load_workflow(ref, proj)
    with using(proj, store, writes=False) as (_, st):
        return render_requests(proj, st, workflow, record, action)
