"""Workflows before they run: load and validate them, plan a run's cost, render the exact
requests a record would send. Nothing here sends a request or writes the store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agac.api.inline import WorkflowRef, given_records, project_for, workflow_file
from agac.api.projects import ProjectRef, scope_of, using
from agac.config.model import Action, Workflow

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.store.repository import Store

__all__ = ["load_workflow", "plan", "render", "validate"]


def load_workflow(
    ref: WorkflowRef,
    project: ProjectRef = None,
    *,
    run_mode: str | None = None,
    poll_interval: float | str | None = None,
    batch_deadline: float | str | None = None,
    budget_usd: float | None = None,
    records: bool = False,
    kept_prefixes: Mapping[str, str] | None = None,
    pilot: Mapping[str, Any] | None = None,
) -> Workflow:
    """The validated workflow ``ref`` (a path, a ``name:`` or a dict); ConfigError with every
    problem.

    ``run_mode``, ``poll_interval``, ``batch_deadline`` and ``budget_usd`` are this run's
    own settings (seconds or a duration string; USD), merged before validation (docs/workflow-reference.md).
    ``records``: records given in memory replace ``input.path`` (docs/python.md).
    ``kept_prefixes``: action -> the ``context_prefix`` template whose text the open run
    being continued keeps; it is not rendered again.
    ``pilot``: the sample of a pilot's run (``agac pilot``, stored with the run as one of its
    settings); every llm action then runs on flex where its provider sells it for its
    model, else online.
    """
    from agac.config.workflow import load_workflow as _load
    from agac.providers.pricing import PriceTable

    proj = project_for(project)
    prices = PriceTable(dict(proj.config.prices))
    loaded = _load(
        workflow_file(ref, proj),
        proj,
        run_mode=run_mode,
        poll_interval=poll_interval,
        batch_deadline=batch_deadline,
        price_lookup=prices.known,
        budget_usd=budget_usd,
        records=records,
        kept_prefixes=kept_prefixes,
    )
    return loaded if pilot is None else loaded.online(flex=_flex_sold)


def _flex_sold(action: Action) -> bool:
    """Whether the action's provider sells its flex tier for the action's model."""
    from agac.providers.registry import provider_spec

    if action.provider is None or action.model_name is None:
        return False
    return provider_spec(action.provider).flex_serves(action.model_name)


def validate(
    ref: WorkflowRef,
    project: ProjectRef = None,
    *,
    records: Any = None,
    run_mode: str | None = None,
    poll_interval: float | str | None = None,
    batch_deadline: float | str | None = None,
    sample: int = 100,
) -> tuple[Workflow | None, list[Any]]:
    """(workflow or None, every error and warning) without raising for config errors.

    ``sample``: how many of the input's first records to read to check ``id_field`` and
    the ``source`` fields templates read (0: do not read the input). ``records`` (any
    value but None) validates the workflow as records given in memory would run it:
    without ``input.path``; the sample is then the first of those records."""
    from agac.config.workflow import validate_workflow
    from agac.providers.pricing import PriceTable

    proj = project_for(project)
    prices = PriceTable(dict(proj.config.prices))
    return validate_workflow(
        workflow_file(ref, proj),
        proj,
        run_mode=run_mode,
        poll_interval=poll_interval,
        batch_deadline=batch_deadline,
        price_lookup=prices.known,
        sample=sample,
        records=records is not None,
    )


def plan(
    ref: WorkflowRef,
    project: ProjectRef = None,
    *,
    records: Any = None,
    run_mode: str | None = None,
    budget_usd: float | None = None,
    limit: int | None = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac plan``: what a new run in the tenant would send and cost — units, requests,
    estimated tokens, cost online vs batch, answers the tenant could already reuse (R5,
    T2) — over the input, or over ``records``. Sends nothing and writes nothing."""
    from itertools import islice

    from agac.engine.lifecycle.estimate import estimate_run
    from agac.engine.views.plan import plan_records
    from agac.providers.pricing import PriceTable

    proj = project_for(project)
    acting = scope_of(proj, tenant, principal).acting()
    workflow = load_workflow(
        ref, proj, run_mode=run_mode, budget_usd=budget_usd, records=records is not None
    )
    with given_records(records, proj) as source, using(proj, store, writes=False) as (_, st):
        planned = plan_records(proj, workflow, source)
        if limit is not None:
            planned = islice(planned, limit)
        return estimate_run(
            proj, st, workflow, PriceTable(dict(proj.config.prices)), planned, tenant=acting
        )


def render(
    ref: WorkflowRef,
    record: str,
    action: str | None = None,
    project: ProjectRef = None,
    *,
    records: Any = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """The exact requests the workflow would send for ``record`` (a key of the input, or of
    ``records``), before any money is spent (upstream outputs from the tenant's latest run)."""
    from agac.engine.views.sessions import render_requests

    proj = project_for(project)
    acting = scope_of(proj, tenant, principal).acting()
    workflow = load_workflow(ref, proj, records=records is not None)
    with given_records(records, proj) as source, using(proj, store, writes=False) as (_, st):
        return render_requests(proj, st, workflow, record, action, source, tenant=acting)
