"""``agac submit``, ``agac worker`` and ``agac workers``: scale-out on one PostgreSQL.

Each command makes one :mod:`agac.api` call and renders it; the engine is imported inside
the commands.
"""

from __future__ import annotations

from typing import Any

import click

from agac.cli.main import (
    _emit_json,
    admission_options,
    batch_deadline_option,
    budget_options,
    command,
    json_option,
    poll_interval_option,
    run_mode_option,
    tenant_option,
)

__all__ = ["submit", "worker", "workers"]


@click.command()
@click.argument("workflow")
@run_mode_option
@poll_interval_option
@batch_deadline_option
@admission_options
@budget_options
@tenant_option
@json_option
@command
def submit(
    workflow: str,
    run_mode: str | None,
    poll_interval: float | None,
    batch_deadline: float | None,
    new: bool,
    fresh: bool,
    limit: int | None,
    budget_usd: float | None,
    allow_over_estimate: bool,
    tenant: str | None,
    as_json: bool,
) -> int:
    """Admit a run for workers (or continue the open one) without executing it; print its id."""
    from agac import api

    doc = api.submit(
        workflow,
        run_mode=run_mode,
        poll_interval=poll_interval,
        batch_deadline=batch_deadline,
        budget_usd=budget_usd,
        new=new,
        fresh=fresh,
        limit=limit,
        allow_over_estimate=allow_over_estimate,
        tenant=tenant,
    )
    for note in doc["notes"]:
        click.echo(note, err=True)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(doc["run_id"])
    return 0


@click.command()
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="The most model and tool calls in flight in this worker, across its shards.",
)
@click.option(
    "--lease-ttl",
    type=click.FloatRange(min=1.0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a shard stays this worker's without a heartbeat.",
)
@click.option(
    "--poll",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How often an idle worker looks for work without a NOTIFY.",
)
@click.option("--exit-when-done", is_flag=True, help="Exit once no run in the store is open.")
@json_option
@command
def worker(
    concurrency: int, lease_ttl: float, poll: float, exit_when_done: bool, as_json: bool
) -> int:
    """Claim and advance shards of any open run, of every tenant, until stopped.

    SIGTERM or Ctrl-C: finish the calls in flight, hand the shards back, exit 0; a second
    one stops at once (exit 130)."""
    from agac import api

    report = api.worker(
        concurrency=concurrency,
        lease_ttl=lease_ttl,
        poll=poll,
        exit_when_done=exit_when_done,
        handle_signals=True,
        log=lambda line: click.echo(line, err=True),
    )
    doc = report.to_dict()
    if as_json:
        _emit_json(doc)
    else:
        click.echo(
            f"worker {doc['worker_id']}: {doc['shards']} shard claims, "
            f"{len(doc['finalized'])} runs ended here, {len(doc['lease_lost'])} leases lost"
        )
    return 130 if doc["stopped_at_once"] else 0


@click.command()
@click.option("--all", "all_workers", is_flag=True, help="Also workers that stopped or died.")
@json_option
@command
def workers(all_workers: bool, as_json: bool) -> int:
    """List live workers: what each holds (every tenant's) and its last heartbeat."""
    from agac import api

    rows = api.workers(all_workers=all_workers)
    if as_json:
        _emit_json(rows)
        return 0
    if not rows:
        click.echo("no live workers")
        return 0
    _print_workers(rows)
    return 0


def _print_workers(rows: list[dict[str, Any]]) -> None:
    """One row per worker, then one per shard a worker holds."""
    from agac.cli.render import new_table, print_table, when

    table = new_table("worker", "state", "concurrency>", "last heartbeat", "ago>", "holds>")
    for w in rows:
        table.add_row(
            w["worker_id"],
            w["state"],
            str(w["concurrency"]),
            when(w["heartbeat_at"], "%H:%M:%S"),
            f"{w['heartbeat_age_s']:.0f} s",
            str(len(w["holds"])),
        )
    print_table(table)
    holds = [(w["worker_id"], h) for w in rows for h in w["holds"]]
    if holds:
        click.echo()
        table = new_table("worker", "kind", "run", "tenant", "shard")
        for worker_id, h in holds:
            table.add_row(worker_id, h["kind"], h["run_id"], h["tenant"], str(h["shard"]))
        print_table(table)
