"""A run's results as a table (docs/python.md): ``agac.results`` and ``agac export``'s wide
formats.

``results(...)`` names the run (a workflow's latest run, a run id, or a RunResult) and
returns a :class:`Results`, read when asked for: ``to_arrow()``, ``to_pandas()``,
``to_polars()``, or iterating over rows (dicts keyed by column name). Columns are
:mod:`agac.data.results`': ``key``, ``source.<field>`` when asked, and per action its
fields (``classify.sentiment``, ``classify.meta.score``), ``classify#status`` and
``classify#reason``. A run is found in the caller's tenants only (T2), like every call's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.inline import WorkflowRef, workflow_file
from agac.api.projects import ProjectRef, Scope, reading, resolve_run, scope_of
from agac.errors import AgacError, UsageError
from agac.objectstores import is_cloud_url

if TYPE_CHECKING:
    import pandas
    import polars
    import pyarrow

    from agac.api.projects import Principal
    from agac.config.project import Project
    from agac.data.export import Protected
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["Results", "export_action", "export_table", "protected_files", "results"]


class Results:
    """The wide table of one run, read from the store each time it is asked for."""

    def __init__(
        self,
        project: Project,
        run_id: str,
        action: str | None,
        include_source: bool,
        store: Store | None = None,
        scope: Scope | None = None,
    ) -> None:
        self.project = project
        self.run_id = run_id
        self.scope = scope or scope_of(project)
        self.action = action
        self.include_source = include_source
        self._store = store

    def _groups(self, *, json_text: bool = True) -> Iterator[tuple[Any, list[list[Any]]]]:
        from agac.engine.views.results import result_row_groups, result_table

        with reading(self.project, self._store) as (_, store):
            run = resolve_run(store, self.project, self.run_id, self.scope)
            table = result_table(store, run, self.action, include_source=self.include_source)
            for group in result_row_groups(store, run, table, json_text=json_text):
                yield table, group

    @property
    def columns(self) -> list[str]:
        from agac.engine.views.results import result_table

        with reading(self.project, self._store) as (_, store):
            run = resolve_run(store, self.project, self.run_id, self.scope)
            return list(
                result_table(store, run, self.action, include_source=self.include_source).names
            )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """One dict per record, keyed by column name (JSON-text columns as text)."""
        for table, group in self._groups():
            for row in group:
                yield dict(zip(table.names, row, strict=True))

    def to_arrow(self) -> pyarrow.Table:
        from agac.data.arrow import arrow_schema, record_batch, require
        from agac.engine.views.results import result_table

        pa = require("pyarrow")
        batches, schema = [], None
        for table, group in self._groups():
            schema = schema or arrow_schema(table)
            batches.append(record_batch(schema, group))
        if schema is None:  # no records: the columns still
            with reading(self.project, self._store) as (_, store):
                run = resolve_run(store, self.project, self.run_id, self.scope)
                schema = arrow_schema(
                    result_table(store, run, self.action, include_source=self.include_source)
                )
        return pa.Table.from_batches(batches, schema=schema)

    def to_pandas(self) -> pandas.DataFrame:
        from agac.data.arrow import require

        require("pandas")
        return self.to_arrow().to_pandas()

    def to_polars(self) -> polars.DataFrame:
        from agac.data.arrow import require

        pl = require("polars")
        return pl.from_arrow(self.to_arrow())

    def __repr__(self) -> str:
        return f"<Results of run {self.run_id}{f' action {self.action}' if self.action else ''}>"


def results(
    workflow_or_run: WorkflowRef | Any,
    action: str | None = None,
    *,
    include_source: bool = False,
    project: ProjectRef = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> Results:
    """The results of a run: ``workflow_or_run`` is a workflow (path, ``name:`` or dict: its
    latest run), a run id, or a :class:`~agac.engine.lifecycle.options.RunResult`. Only ``action``'s
    columns when given; the record's fields as ``source.<field>`` with ``include_source``."""
    with reading(project, store) as (proj, st):
        scope = scope_of(proj, tenant, principal)
        run = resolve_run(st, proj, _ref(workflow_or_run, proj), scope)
        return Results(proj, run.id, action, include_source, store, scope)


def _ref(workflow_or_run: Any, proj: Project) -> str:
    run_id = getattr(workflow_or_run, "run_id", None)
    if isinstance(run_id, str):
        return run_id
    if isinstance(workflow_or_run, Mapping):
        return str(Path(workflow_file(workflow_or_run, proj)))
    if isinstance(workflow_or_run, str | Path):
        return str(workflow_or_run)
    raise UsageError(
        f"name a run by its workflow (a path, a name or a dict), its id or its "
        f"RunResult, not a {type(workflow_or_run).__name__}"
    )


def export_table(
    workflow_or_run: WorkflowRef | Any,
    out: str | Path | None,
    *,
    format: str | None = None,
    action: str | None = None,
    include_source: bool = False,
    escape_formulas: bool = True,
    project: ProjectRef = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> int:
    """Write the wide table of a run (named as :func:`results` takes it) to ``out`` (stdout
    for jsonl/csv when None) as ``parquet``, ``jsonl`` or ``csv`` (None: as the extension
    of ``out`` says, else parquet; UsageError for a contradiction), streamed in row groups
    (``agac export --all-actions|--format parquet``); returns the number of rows.
    JSONL keeps JSON fields as JSON; CSV writes lists, objects and booleans as JSON text,
    and a text cell a spreadsheet would run as a formula with a leading ``'`` (X4) unless
    ``escape_formulas=False``."""
    from agac.data.export import (
        export_format,
        open_binary_output,
        open_output,
        write_parquet,
        write_wide_csv,
        write_wide_jsonl,
    )
    from agac.engine.views.results import result_row_groups, result_table

    format = export_format(format, None if out is None else str(out), "parquet")
    with reading(project, store) as (proj, st):
        run = resolve_run(st, proj, _ref(workflow_or_run, proj), scope_of(proj, tenant, principal))
        table = result_table(st, run, action, include_source=include_source)
        guarded = (
            protected_files(proj, st, run) if out is not None and not is_cloud_url(str(out)) else []
        )
        if format == "parquet":
            if out is None:
                raise UsageError("parquet is binary: name a file to write (--out PATH)")
            groups = result_row_groups(st, run, table)
            with open_binary_output(str(out), guarded, _object_options(proj)) as handle:
                return write_parquet(table, groups, handle)
        rows = (
            row
            for group in result_row_groups(st, run, table, json_text=format != "jsonl")
            for row in group
        )
        with open_output(None if out is None else str(out), guarded, _object_options(proj)) as text:
            if format == "jsonl":
                return write_wide_jsonl(table.names, rows, text)
            return write_wide_csv(table.names, rows, text, escape_formulas=escape_formulas)


def export_action(
    workflow_or_run: WorkflowRef | Any,
    action: str,
    out: str | Path | None,
    *,
    format: str | None = None,
    run_ref: str | None = None,
    escape_formulas: bool = True,
    project: ProjectRef = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> int:
    """Write one row per record of ``action`` (key, status, reason, detail, output, tenant)
    to ``out`` (stdout when None) as ``jsonl`` or ``csv`` (None: as the extension of
    ``out`` says, else jsonl) (``agac export --action A``);
    returns the number of rows. ``out`` is never one of the run's own files (X1); CSV
    cells are neutralized against formulas (X4) unless ``escape_formulas=False``."""
    from agac.api.history import export_rows, search_actions, tool_actions
    from agac.data.export import export_format, open_output, write_csv, write_jsonl

    format = export_format(format, None if out is None else str(out))
    if format not in ("jsonl", "csv"):
        raise UsageError(
            f"format {format!r} of one action's rows is jsonl or csv; parquet "
            "writes the wide table (--all-actions)"
        )
    with reading(project, store) as (proj, st):
        ref = run_ref or _ref(workflow_or_run, proj)
        guarded = []
        if out is not None and not is_cloud_url(str(out)):
            guarded = protected_files(
                proj, st, resolve_run(st, proj, ref, scope_of(proj, tenant, principal))
            )
        rows = export_rows(ref, action, proj, tenant=tenant, principal=principal, store=st)
        with open_output(
            None if out is None else str(out), guarded, _object_options(proj)
        ) as handle:
            if format == "csv":
                run = resolve_run(st, proj, ref, scope_of(proj, tenant, principal))
                return write_csv(
                    rows,
                    handle,
                    escape_formulas=escape_formulas,
                    checks=check_names(run).get(action, ()),
                    tools=action in tool_actions(run.config),
                    citations=action in search_actions(run.config),
                )
            return write_jsonl(rows, handle)


def check_names(run: RunRecord) -> dict[str, tuple[str, ...]]:
    """The names of each action's checks, as the run was admitted with them."""
    out: dict[str, tuple[str, ...]] = {}
    for action in run.config.get("actions") or ():
        checks = action.get("checks") or ()
        if checks:
            out[str(action["name"])] = tuple(str(c["name"]) for c in checks)
    return out


def protected_files(project: Project, store: Store, run: RunRecord) -> list[Protected]:
    """The files an export of ``run`` must never write (X1): the store's own files, the
    workflow file and the input files the run's workflow reads now (those it was admitted
    with, when they still exist)."""
    from agac.data.export import Protected
    from agac.data.inputs import resolve_input_files

    guarded = [Protected(path, "a file of the agac store") for path in store.files()]
    workflow = project.root / run.workflow_path
    guarded.append(Protected(workflow, f"the workflow file of {run.workflow}"))
    spec = run.config.get("input") or {}
    if spec.get("path") and not spec.get("records"):
        with contextlib.suppress(AgacError, OSError):  # inputs moved or gone: none to guard
            guarded += [
                Protected(path, f"an input file of workflow {run.workflow}")
                for path in resolve_input_files(spec["path"], project.root)
            ]
    return guarded


def _object_options(proj: Project) -> Mapping[str, Any]:
    """``object_options:`` of agac.yml (exports to s3://, gs://, az://)."""
    return proj.config.object_options
