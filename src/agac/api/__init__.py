"""agac as a library: every CLI command is one of these calls (docs/python.md).

Each call finds the project (from ``project`` or the working directory), uses the given
long-lived ``store`` handle or opens the project's store for the call, does one thing and
returns plain data (dicts, lists, iterators) or a result object, so tests, notebooks and
the service drive agac exactly as the CLI does.

Modules by concern: :mod:`~agac.api.projects` (project, store, run lookup),
:mod:`~agac.api.workflows` (load, validate, plan, render), :mod:`~agac.api.runs` (run,
arun, retry, cancel), :mod:`~agac.api.pilot` (a run over a sample, with projections),
:mod:`~agac.api.compare` (two runs side by side), :mod:`~agac.api.results` (the wide results table, parquet export),
:mod:`~agac.api.history` (status, runs, events, export, records, cost),
:mod:`~agac.api.approvals`, :mod:`~agac.api.effects`, :mod:`~agac.api.batches` (``agac
batch …``), :mod:`~agac.api.workers` (submit, worker, workers) and
:mod:`~agac.api.maintenance` (gc, store upgrade, store info). For teams:
:mod:`~agac.api.people` (``agac users``/``agac tokens``, administrators),
:mod:`~agac.api.identity` (passwords, tokens, sessions, the :class:`Principal`),
:mod:`~agac.api.team` (what a signed-in person sees and decides; tenant filtering) and
:mod:`~agac.api.remote` (decisions sent to the service under ``identity: login``).
Notebooks' needs:
:mod:`~agac.api.inline` (workflows as dicts, records as DataFrames, projects created on
first use), :mod:`~agac.api.threads` (running inside an event loop), :mod:`~agac.api.progress`.

The store, the engine and SQLAlchemy are imported by the calls that use them, not at
import: ``agac validate`` never touches the store and must start fast.
"""

from __future__ import annotations

from agac.api.approvals import (
    approvals_list,
    approvals_show,
    approve,
    decide_hint,
    reject,
    revise,
)
from agac.api.compare import compare, compare_variants
from agac.api.effects import effects_compensate, effects_list, effects_resolve
from agac.api.history import (
    FINAL_STATES,
    cost,
    events,
    export_rows,
    is_final,
    list_records,
    list_runs,
    record_session,
    status,
)
from agac.api.maintenance import gc, store_info, store_upgrade
from agac.api.people import (
    tokens_create,
    tokens_list,
    tokens_revoke,
    users_add,
    users_disable,
    users_enable,
    users_list,
    users_passwd,
    users_set,
)
from agac.api.pilot import pilot
from agac.api.projects import open_store, project_of, resolve_run, workflow_name
from agac.api.results import Results, export_action, export_table, results
from agac.api.runs import arun, cancel, retry, run, unpriced_warnings
from agac.api.workers import submit, worker, workers
from agac.api.workflows import load_workflow, plan, render, validate

__all__ = [
    "FINAL_STATES",
    "Results",
    "approvals_list",
    "approvals_show",
    "approve",
    "arun",
    "cancel",
    "compare",
    "compare_variants",
    "cost",
    "decide_hint",
    "effects_compensate",
    "effects_list",
    "effects_resolve",
    "events",
    "export_action",
    "export_rows",
    "export_table",
    "gc",
    "is_final",
    "list_records",
    "list_runs",
    "load_workflow",
    "open_store",
    "pilot",
    "plan",
    "project_of",
    "record_session",
    "reject",
    "render",
    "resolve_run",
    "results",
    "retry",
    "revise",
    "run",
    "status",
    "store_info",
    "store_upgrade",
    "submit",
    "tokens_create",
    "tokens_list",
    "tokens_revoke",
    "unpriced_warnings",
    "users_add",
    "users_disable",
    "users_enable",
    "users_list",
    "users_passwd",
    "users_set",
    "validate",
    "worker",
    "workers",
    "workflow_name",
]
