"""People's decisions on proposals (A1-A3): list, show, approve, reject, revise. None of
these needs the run's lease; each is refused (exit 2) when the proposal is stale,
replayed, expired or altered, or the decider is not an approver. On a storage point a
decision owns the point while it is recorded (exit 75 naming a live owner) and needs
``AGAC_SECRET`` (``secret_not_durable``). A proposal of another tenant than the caller's
is not found (T2).

With ``identity: login`` in agac.yml (A3, T3) ``approve``, ``reject`` and ``revise`` do
not write the store: they send the decision to ``agac serve`` (``AGAC_SERVER`` +
``AGAC_TOKEN``, :mod:`agac.api.remote`), and ``who`` / ``AGAC_USER`` are refused. The
service decides through :func:`agac.api.team.decide`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, project_of, reading, scope_of, workflow_name

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.store.repository import Store

__all__ = [
    "approvals_list",
    "approvals_show",
    "approve",
    "decide_hint",
    "reject",
    "revise",
]


def approvals_list(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    every: bool = False,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """``agac approvals list [WF]``: proposals waiting for a decision (A1), oldest first;
    ``every``: in any state. Each has at least id, workflow, action, record, arguments,
    approvers, expires_at and state."""
    from agac.engine.approvals.decisions import list_proposals

    with reading(project, store) as (proj, st):
        return list_proposals(
            st,
            workflow_name(ref, proj) if ref else None,
            every=every,
            tenants=scope_of(proj, tenant, principal).visible,
        )


def decide_hint(project: ProjectRef = None, proposal: str = "ID", verb: str = "approve") -> str:
    """How a person decides on ``proposal`` here: ``--as NAME`` on a local project, the
    service under ``identity: login`` (never a way the project refuses)."""
    from agac.engine.approvals.proposals import decide_hint as hint

    return hint(project_of(project), proposal, verb)


def approvals_show(
    ref: str,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac approvals show ID``: one proposal, whether its signatures verify, its history."""
    from agac.engine.approvals.decisions import show_proposal

    _secret_must_be_durable(project)
    with reading(project, store) as (proj, st):
        return show_proposal(proj, st, ref, tenants=scope_of(proj, tenant, principal).visible)


def approve(
    ref: str,
    project: ProjectRef = None,
    *,
    who: str | None = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac approve ID [--as WHO]`` (A2, A3): ``who`` defaults to ``AGAC_USER``. Refused
    (RefusedError, exit 2) when stale, replayed, expired, altered, or ``who`` is not an
    approver. Never needs the run's lease. With ``identity: login``, sent to the service."""
    from agac.engine.approvals.decisions import approve as _approve

    proj = project_of(project)
    if proj.config.login:
        from agac.api.remote import send_decision

        return send_decision(ref, "approve", {}, who)
    _secret_must_be_durable(proj)
    with reading(proj, store, writes=True) as (proj, st):
        return _approve(proj, st, ref, who, tenants=scope_of(proj, tenant, principal).visible)


def reject(
    ref: str,
    reason: str,
    project: ProjectRef = None,
    *,
    who: str | None = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac reject ID --reason TEXT [--as WHO]``: the unit fails ``approval_rejected``
    (or the run ends failed with ``on_reject: fail_run``). With ``identity: login``, sent
    to the service."""
    from agac.engine.approvals.decisions import reject as _reject

    proj = project_of(project)
    if proj.config.login:
        from agac.api.remote import send_decision

        return send_decision(ref, "reject", {"reason": reason}, who)
    _secret_must_be_durable(proj)
    with reading(proj, store, writes=True) as (proj, st):
        return _reject(
            proj, st, ref, who, reason, tenants=scope_of(proj, tenant, principal).visible
        )


def revise(
    ref: str,
    changes: dict[str, Any] | list[str],
    project: ProjectRef = None,
    *,
    who: str | None = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """``agac revise ID --set field=value … [--as WHO]``: a new proposal with the changed
    arguments, which needs its own approval; the old one becomes stale. ``changes`` is a
    mapping of dotted field to value, or ``field=value`` strings. With ``identity: login``,
    sent to the service."""
    from agac.engine.approvals.decisions import parse_changes
    from agac.engine.approvals.decisions import revise as _revise

    proj = project_of(project)
    parsed = parse_changes(changes) if isinstance(changes, list) else dict(changes)
    if proj.config.login:
        from agac.api.remote import send_decision

        return send_decision(ref, "revise", {"set": parsed}, who)
    _secret_must_be_durable(proj)
    with reading(proj, store, writes=True) as (proj, st):
        return _revise(
            proj, st, ref, who, parsed, tenants=scope_of(proj, tenant, principal).visible
        )


def _secret_must_be_durable(project: ProjectRef) -> None:
    """On a storage point, decisions are signed with ``AGAC_SECRET``: a generated
    ``.agac/secret`` would die with the machine, and the run would find every decision
    altered (docs/guarantees.md, Storage points)."""
    import os

    from agac.config.project import is_point_url, store_url
    from agac.errors import ConfigError, Problem

    url = store_url(project_of(project))
    if is_point_url(url) and not os.environ.get("AGAC_SECRET"):
        raise ConfigError(
            problems=[
                Problem(
                    "secret_not_durable",
                    f"decisions on the storage point {url} need AGAC_SECRET",
                    hint="set AGAC_SECRET to the secret every machine of this project uses",
                )
            ]
        )
