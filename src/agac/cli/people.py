"""``agac effects``, ``agac approvals``, ``agac approve|reject|revise``: what people decide
and settle (E2, A1-A3). Each command makes one :mod:`agac.api` call and renders it; loaded
by ``agac`` on first use (``cli/main.py``, ``LAZY``)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from agac.cli.main import _emit_json, command, json_option, tenant_option

__all__ = ["approvals", "approve", "effects", "reject", "revise"]


@click.group()
def effects() -> None:
    """Side effects of tool actions: receipts, unknown outcomes, compensation."""


@effects.command("list")
@click.argument("workflow", required=False)
@tenant_option
@json_option
@command
def effects_list(workflow: str | None, tenant: str | None, as_json: bool) -> int:
    """List recorded effects (all workflows, or WORKFLOW's), oldest first."""
    from agac import api
    from agac.cli.render import print_effects

    rows = api.effects_list(workflow, tenant=tenant)
    if as_json:
        _emit_json(rows)
    elif not rows:
        click.echo("no effects recorded")
    else:
        print_effects(rows)
    return 0


@effects.command("resolve")
@click.argument("effect_id", metavar="ID")
@click.option(
    "--done", "done", flag_value=True, default=None, help="It happened: never call it again."
)
@click.option(
    "--not-done", "done", flag_value=False, help="It did not happen: the next run calls it."
)
@tenant_option
@json_option
@command
def effects_resolve(effect_id: str, done: bool | None, tenant: str | None, as_json: bool) -> int:
    """Settle an effect left unknown by a crash (E2)."""
    from agac import api
    from agac.errors import UsageError

    if done is None:
        raise UsageError("say whether it happened: --done or --not-done")
    row = api.effects_resolve(effect_id, done, tenant=tenant)
    _emit_json(row) if as_json else click.echo(
        f"effect {row['id'][:12]} resolved {row['state']}; `agac run {row['workflow']}` continues"
    )
    return 0


@effects.command("compensate")
@click.argument("effect_id", metavar="ID")
@tenant_option
@json_option
@command
def effects_compensate(effect_id: str, tenant: str | None, as_json: bool) -> int:
    """Run an effect's declared compensation once (it does not claim the effect was undone)."""
    from agac import api

    row = api.effects_compensate(effect_id, tenant=tenant)
    _emit_json(row) if as_json else click.echo(
        f"compensation of effect {row['id'][:12]} ran and returned "
        f"{json.dumps(row['resolution'].get('compensation'), default=str)}; whether that undid the "
        "effect is for the other service to say"
    )
    return 0


@click.group()
def approvals() -> None:
    """Proposals of actions with approval: (A1-A3): what waits for a person."""


def _print_proposal(p: dict[str, Any]) -> None:
    expires = time.strftime("%Y-%m-%d %H:%M", time.localtime(p["expires_at"]))
    click.echo(
        f"proposal {p['id']} of {p['workflow']}/{p['action']}, record {p['record']}: "
        f"{p['state']}, expires {expires}, approvers: {', '.join(p['approvers'])}"
    )
    click.echo(f"    arguments: {json.dumps(p['arguments'], ensure_ascii=False, default=str)}")


@approvals.command("list")
@click.argument("workflow", required=False)
@click.option("--all", "every", is_flag=True, help="Every proposal, decided or not.")
@tenant_option
@json_option
@command
def approvals_list(workflow: str | None, every: bool, tenant: str | None, as_json: bool) -> int:
    """List proposals waiting for a decision (all workflows, or WORKFLOW's), oldest first."""
    from agac import api
    from agac.cli.render import print_proposals

    rows = api.approvals_list(workflow, every=every, tenant=tenant)
    if as_json:
        _emit_json(rows)
    elif not rows:
        click.echo("no proposal waits for a decision")
    else:
        print_proposals(rows)
        click.echo(
            f"{len(rows)} proposal(s); decide with {api.decide_hint()}; "
            "reject with --reason TEXT, revise with --set field=value"
        )
    return 0


@approvals.command("show")
@click.argument("proposal_id", metavar="ID")
@tenant_option
@json_option
@command
def approvals_show(proposal_id: str, tenant: str | None, as_json: bool) -> int:
    """Show one proposal: its exact arguments, terms, decision, signature check, history."""
    from agac import api

    doc = api.approvals_show(proposal_id, tenant=tenant)
    if as_json:
        _emit_json(doc)
        return 0
    _print_proposal(doc)
    click.echo(
        f"    policy version {doc['policy_version']}; run {doc['run_id']} ({doc['run_state']}); "
        + ("signatures verified" if doc["verified"] else f"ALTERED: {doc['altered']}")
    )
    if doc.get("decided_by"):
        click.echo(
            f"    {doc['state']} by {doc['decided_by']}"
            + (f": {doc['reason']}" if doc["reason"] else "")
        )
    for h in doc["history"]:
        click.echo(
            f"    history: {h['id']} {h['state']}"
            + (f" (revises {h['revises']} by {h['proposed_by']})" if h["revises"] else "")
        )
    return 0


as_option = click.option(
    "--as",
    "who",
    default=None,
    metavar="NAME",
    help="Who decides (else AGAC_USER); must be one of the approvers.",
)


def _decided(doc: dict[str, Any], as_json: bool, words: str) -> int:
    if as_json:
        _emit_json(doc)
    else:
        tenant = "" if doc["tenant"] == "default" else f" --tenant {doc['tenant']}"
        click.echo(f"proposal {doc['id']} {words}; `agac run {doc['workflow']}{tenant}` continues")
    return 0


@click.command()
@click.argument("proposal_id", metavar="ID")
@as_option
@tenant_option
@json_option
@command
def approve(proposal_id: str, who: str | None, tenant: str | None, as_json: bool) -> int:
    """Approve a proposal: its unit acts with exactly its arguments on the next run."""
    from agac import api

    doc = api.approve(proposal_id, who=who, tenant=tenant)
    return _decided(doc, as_json, f"approved by {doc['decided_by']}")


@click.command()
@click.argument("proposal_id", metavar="ID")
@click.option("--reason", required=True, help="Why (shown in the unit's failure).")
@as_option
@tenant_option
@json_option
@command
def reject(
    proposal_id: str, reason: str, who: str | None, tenant: str | None, as_json: bool
) -> int:
    """Reject a proposal: its unit fails approval_rejected (or the run, with on_reject: fail_run)."""
    from agac import api

    doc = api.reject(proposal_id, reason, who=who, tenant=tenant)
    return _decided(doc, as_json, f"rejected by {doc['decided_by']}")


@click.command()
@click.argument("proposal_id", metavar="ID")
@click.option(
    "--set",
    "changes",
    multiple=True,
    required=True,
    metavar="FIELD=VALUE",
    help="Change one field of the arguments (dotted path; JSON or text). Repeatable.",
)
@as_option
@tenant_option
@json_option
@command
def revise(
    proposal_id: str, changes: tuple[str, ...], who: str | None, tenant: str | None, as_json: bool
) -> int:
    """Revise a proposal's arguments: a new proposal that needs its own approval."""
    from agac import api

    doc = api.revise(proposal_id, list(changes), who=who, tenant=tenant)
    if as_json:
        _emit_json(doc)
    else:
        click.echo(
            f"proposal {doc['revises']} is superseded by {doc['id']}, which needs its own "
            f"approval: {api.decide_hint(proposal=doc['id'])}"
        )
    return 0
