"""``agac batch``: list, inspect, read, cancel and settle provider batches.

Each command makes one :mod:`agac.api.batches` call and renders it. The library (and
with it the store and the SDKs) is imported inside the commands, so listing ``agac
--help`` stays fast.
"""

from __future__ import annotations

import json
from typing import Any

import click

from agac.cli.main import _emit_json, command, json_option, tenant_option
from agac.cli.render import new_table, print_table, when

__all__ = ["batch"]

WF_HELP = "A workflow file path or its name: (default: every workflow)."
BATCH_ID_HELP = "Our batch key (agac_…) or the provider's batch id (default: the latest batch)."


@click.group()
def batch() -> None:
    """Provider batches: list them, show one, read its raw results, cancel it, or settle a
    submission whose outcome is unknown."""


@batch.command("list")
@click.argument("workflow", required=False)
@tenant_option
@json_option
@command
def batch_list(workflow: str | None, tenant: str | None, as_json: bool) -> int:
    """List batches, newest first: key, provider batch id, action, file, state, requests."""
    from agac.api import batches

    rows = batches.list_batches(workflow, tenant=tenant)
    if as_json:
        _emit_json(rows)
        return 0
    if not rows:
        click.echo("no batches", err=True)
        return 0
    table = new_table(
        "key",
        "batch id",
        "workflow",
        "action",
        "file",
        "part>",
        "state",
        "provider status",
        "requests>",
        "created",
    )
    for r in rows:
        table.add_row(
            r["key"],
            r["batch_id"] or "-",
            r["workflow"],
            r["action"],
            r["file"],
            str(r["part"]),
            # a batch given up that may still run and be billed says why
            r["state"] + (f": {r['error']}" if r["state"] == "not_cancelled" else ""),
            r["raw_status"] or "",
            f"{r['requests']:,}",
            when(r["created_at"]),
        )
    print_table(table)
    return 0


@batch.command("status")
@click.argument("workflow", required=False)
@click.option("--batch-id", default=None, help=BATCH_ID_HELP)
@click.option("--poll", is_flag=True, help="Also ask the provider for the batch's status now.")
@tenant_option
@json_option
@command
def batch_status(
    workflow: str | None, batch_id: str | None, poll: bool, tenant: str | None, as_json: bool
) -> int:
    """Show one batch: its state, its items by status, and what to do next."""
    from agac.api import batches

    doc = batches.batch_status(workflow, batch_id=batch_id, poll=poll, tenant=tenant)
    if as_json:
        _emit_json(doc)
        return 0
    for name in (
        "key",
        "batch_id",
        "tenant",
        "workflow",
        "action",
        "file",
        "provider",
        "state",
        "raw_status",
        "requests",
        "run_id",
        "error",
    ):
        if doc[name] is not None:
            click.echo(f"{name:<12} {doc[name]}")
    for name in ("created_at", "submitted_at", "ended_at", "deadline_at"):
        if doc[name] is not None:
            click.echo(f"{name:<12} {when(doc[name])}")
    items = ", ".join(f"{n} {s}" for s, n in sorted(doc["items"].items())) or "none"
    click.echo(f"{'items':<12} {items}")
    if "provider_status" in doc:
        p = doc["provider_status"]
        click.echo(
            f"{'provider now':<12} {p['raw_status']} ({p['state']}), "
            f"{p['completed']} completed, {p['failed']} failed of {p['request_count']}"
        )
    if doc["next"]:
        click.echo(f"next: {doc['next']}")
    return 0


@batch.command("retrieve")
@click.argument("workflow", required=False)
@click.option("--batch-id", default=None, help=BATCH_ID_HELP)
@click.option("--out", default=None, help="Write the JSONL here instead of stdout.")
@tenant_option
@json_option
@command
def batch_retrieve(
    workflow: str | None, batch_id: str | None, out: str | None, tenant: str | None, as_json: bool
) -> int:
    """Read an ended batch's raw results as JSONL: one line per result with custom_id,
    type, response (text, stop_reason, usage) and error. Nothing is recorded."""
    from agac.api import batches
    from agac.data.export import open_output

    if as_json and out is None:
        results: list[dict[str, Any]] = []
        doc = batches.retrieve(workflow, batch_id=batch_id, sink=results.append, tenant=tenant)
        _emit_json({**doc, "items": results})
        return 0
    with open_output(out) as handle:
        doc = batches.retrieve(
            workflow,
            batch_id=batch_id,
            tenant=tenant,
            sink=lambda r: handle.write(
                json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
            ),
        )
    if as_json:
        _emit_json({**doc, "out": out})
    elif out:
        click.echo(f"wrote {doc['results']} results of batch {doc['batch_id']} to {out}", err=True)
    return 0


@batch.command("cancel")
@click.argument("workflow", required=False)
@click.option(
    "--batch-id", required=True, help="Our batch key (agac_…) or the provider's batch id."
)
@tenant_option
@json_option
@command
def batch_cancel(workflow: str | None, batch_id: str, tenant: str | None, as_json: bool) -> int:
    """Cancel a batch at the provider and mark it cancelling; the next run reads what the
    provider then reports (results are never claimed here)."""
    from agac.api import batches

    doc = batches.cancel(workflow, batch_id=batch_id, tenant=tenant)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(
            f"batch {doc['batch_id']} is cancelling; `agac run {doc['workflow']}` "
            "reads what the provider reports"
        )
    return 0


@batch.command("resolve")
@click.argument("key")
@click.option("--batch-id", default=None, help="The provider has the batch under this id.")
@click.option("--not-submitted", is_flag=True, help="The provider never got the batch.")
@tenant_option
@json_option
@command
def batch_resolve(
    key: str, batch_id: str | None, not_submitted: bool, tenant: str | None, as_json: bool
) -> int:
    """Settle a batch whose submission is unknown (KEY is our agac_… key): either the
    provider has it (--batch-id ID, the next run polls it) or it does not (--not-submitted,
    the next run sends its records again)."""
    from agac.api import batches

    doc = batches.resolve(key, batch_id=batch_id, not_submitted=not_submitted, tenant=tenant)
    if as_json:
        _emit_json(doc)
    elif not_submitted:
        click.echo(
            f"batch {key} is not_submitted; `agac run {doc['workflow']}` sends its records again"
        )
    else:
        click.echo(
            f"batch {key} is {doc['batch_id']} at {doc['provider']}; "
            f"`agac run {doc['workflow']}` polls and collects it"
        )
    return 0
