"""``agac export``: a run's results to a file or stdout (docs/cli.md, agac events; docs/python.md), one row per record
of an action or the wide table. Loaded by ``agac`` on first use (``cli/main.py``, ``LAZY``)."""

from __future__ import annotations

import click

from agac.cli.main import _emit_json, command, tenant_option

__all__ = ["export"]


@click.command()
@click.argument("workflow")
@click.option(
    "--action", default=None, help="One action's rows (or its columns, for the wide table)."
)
@click.option(
    "--all-actions", is_flag=True, help="The wide table: one row per record, every action."
)
@click.option("--include-source", is_flag=True, help="Add the record's fields (source.<field>).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv", "parquet"]),
    default=None,
    help="Default: what the name given to --out says (.jsonl, .csv, .parquet), else jsonl; "
    "a --format the name contradicts is refused.",
)
@click.option(
    "--out",
    default=None,
    help="Write here instead of stdout (parquet needs it): a "
    "file, or an object (s3://bucket/key, gs://…, az://…) uploaded in parts.",
)
@click.option("--run", "run_ref", default=None, help="A run id (default: the latest run).")
@click.option(
    "--escape-formulas/--no-escape-formulas",
    default=True,
    show_default=True,
    help="CSV: put a ' before a cell starting with = + - @, a tab or a carriage "
    "return, so a spreadsheet shows it instead of running it.",
)
@tenant_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="With --out: print one JSON document about the file written.",
)
@command
def export(
    workflow: str,
    action: str | None,
    all_actions: bool,
    include_source: bool,
    fmt: str | None,
    out: str | None,
    run_ref: str | None,
    escape_formulas: bool,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Export a run's results: one row per record of an action, or the wide table."""
    from agac import api
    from agac.data.export import export_format
    from agac.errors import UsageError

    if (action is None) != all_actions:
        raise UsageError(
            "name one action with --action A, or every action with --all-actions",
            hint="--all-actions writes one row per record with every action's columns",
        )
    if as_json and out is None:
        raise UsageError(
            "--json reports on the file written with --out; without --out the rows "
            "themselves are stdout",
            hint="add --out PATH, or drop --json",
        )
    fmt = export_format(fmt, out)
    if fmt == "parquet" or all_actions or include_source:
        n = api.export_table(
            run_ref or workflow,
            out,
            format=fmt,
            action=action,
            include_source=include_source,
            escape_formulas=escape_formulas,
            tenant=tenant,
        )
    else:
        assert action is not None
        n = api.export_action(
            workflow,
            action,
            out,
            format=fmt,
            run_ref=run_ref,
            escape_formulas=escape_formulas,
            tenant=tenant,
        )
    if out:
        msg = {"out": out, "rows": n, "format": fmt}
        _emit_json(msg) if as_json else click.echo(f"wrote {n} rows to {out}", err=True)
    return 0
