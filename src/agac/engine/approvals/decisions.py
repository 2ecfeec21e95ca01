"""People deciding on proposals (A2, A3): ``agac approvals list|show``, ``agac approve``,
``agac reject``, ``agac revise``, and the same decisions made in ``agac serve``.

A decision never needs the run's lease — a person decides while the run is parked — and
is race-safe: it is a conditional UPDATE on the proposal being still ``pending`` with the
content it was shown with, so of two decisions on one proposal exactly one wins and the
other is refused as replayed. Refusals (exit 2; in the service 403 or 409 with the code)
say which rule refused:

- **altered** (``approval_altered``): the stored content or decision does not match its
  hash and signature;
- **stale** (``approval_stale``): a revision or a newer proposal replaced it, or its run
  ended (withdrawn), or its approval was revoked;
- **replayed** (``approval_replayed``): it was already decided;
- **expired** (``approval_expired``): nobody decided before ``expires_at``;
- **not an approver** (``not_an_approver``): the deciding user is not among its approvers
  (users, or members of their groups), or — with ``identity: login`` — is disabled or not
  in the run's tenant (T3).

Who decides (:class:`Decider`): on a single-user project ``--as NAME`` or ``AGAC_USER``,
taken on trust; with ``identity: login`` only a user signed in to the service (a web
session or an API token), and ``--as`` / ``AGAC_USER`` are refused.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.engine.approvals.proposals import (
    LLM_REVISABLE,
    approver_refusal,
    content_hash,
    decision_signature,
    load_secret,
    new_proposal_id,
    proposal_dict,
    sign,
    tampered,
)
from agac.engine.crashpoints import maybe_crash
from agac.engine.graph import run_graph
from agac.engine.lifecycle.closing import run_event
from agac.errors import DecisionRefused, NotAnApprover, NotFound, UsageError
from agac.providers.base import canonical_json
from agac.store.approvals import STALE_APPROVAL_STATES
from agac.store.rows import Checkpoint

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = [
    "LOGIN_REFUSAL",
    "Decider",
    "approve",
    "decider",
    "list_proposals",
    "parse_changes",
    "reject",
    "revise",
    "show_proposal",
]

LOGIN_REFUSAL = (
    "this project has identity: login: decisions come only from users signed in to "
    "`agac serve`, so --as and AGAC_USER are refused; set AGAC_SERVER (the service's URL) and "
    "AGAC_TOKEN (from `agac tokens create NAME`) and agac sends the decision there"
)


@dataclass(frozen=True)
class Decider:
    """Who decides: ``name``, and whether the service checked it (``signed_in``: a web
    session or an API token) or it is taken on trust (``--as`` / ``AGAC_USER``)."""

    name: str
    signed_in: bool = False


def decider(who: str | Decider | None, project: Project) -> Decider:
    """The deciding user (A3): a signed-in user under ``identity: login`` (``--as`` and
    ``AGAC_USER`` refused, naming both); else ``--as NAME``, else ``AGAC_USER``, and with
    neither the decision is refused naming both."""
    if project.config.login:
        if isinstance(who, Decider) and who.signed_in:
            return who
        raise UsageError(LOGIN_REFUSAL)
    if isinstance(who, Decider):
        return who
    name = (who or os.environ.get("AGAC_USER") or "").strip()
    if not name:
        raise UsageError(
            "say who decides: pass --as NAME or set AGAC_USER (identity is "
            "self-asserted on the command line)"
        )
    return Decider(name)


def list_proposals(
    store: Store, workflow: str | None, *, tenants: Collection[str], every: bool = False
) -> list[dict[str, Any]]:
    """Proposals of ``tenants`` waiting for a decision (``every``: in any state), oldest first."""
    rows = store.list_proposals(workflow, tenants=tenants, states=None if every else ("pending",))
    runs: dict[str, str | None] = {}
    out = []
    for row in rows:
        if row.run_id not in runs:
            run = store.get_run(row.run_id)
            runs[row.run_id] = run.state if run is not None else None
        out.append(proposal_dict(row, runs[row.run_id]))
    return out


def show_proposal(
    project: Project, store: Store, ref: str, *, tenants: Collection[str]
) -> dict[str, Any]:
    """One proposal of ``tenants``, whether its signatures check out, and its revision chain."""
    row = _one(store, ref, tenants)
    run = store.get_run(row.run_id)
    doc = proposal_dict(row, run.state if run is not None else None)
    why = tampered(load_secret(project.root), row)
    doc["verified"] = why is None
    if why is not None:
        doc["altered"] = why
    unit = store.unit_proposals(row.workflow, row.action, row.unit_key, tenant=row.tenant)
    doc["history"] = [
        {
            "id": r.id,
            "state": r.state,
            "revises": r.parent,
            "proposed_by": r.proposed_by,
            "decided_by": r.decided_by,
            "created_at": r.created_at,
        }
        for r in unit
        if r.subject == row.subject
    ]
    return doc


def approve(
    project: Project, store: Store, ref: str, who: str | Decider | None, *, tenants: Collection[str]
) -> dict[str, Any]:
    """A2: approve a pending proposal (of ``tenants``); the run acts on it when it next runs."""
    name = decider(who, project).name
    return _decide(project, store, _one(store, ref, tenants), name, "approved", None)


def reject(
    project: Project,
    store: Store,
    ref: str,
    who: str | Decider | None,
    reason: str,
    *,
    tenants: Collection[str],
) -> dict[str, Any]:
    """A2: reject a pending proposal (of ``tenants``): its unit fails ``approval_rejected``
    (or the run ends failed with ``on_reject: fail_run``)."""
    name = decider(who, project).name
    if not reason or not reason.strip():
        raise UsageError("say why: --reason TEXT (it is shown in the unit's failure)")
    return _decide(project, store, _one(store, ref, tenants), name, "rejected", reason.strip())


def revise(
    project: Project,
    store: Store,
    ref: str,
    who: str | Decider | None,
    changes: dict[str, Any],
    *,
    tenants: Collection[str],
) -> dict[str, Any]:
    """A2: a new proposal with ``changes`` (dotted field -> value) applied to the arguments;
    it needs its own approval, and the old one becomes stale (``superseded``)."""
    name = decider(who, project).name
    if not changes:
        raise UsageError("say what to change: --set field=value (one or more)")
    secret = load_secret(project.root)
    row = _one(store, ref, tenants)
    _check_decidable(project, store, row, name, secret)
    arguments = json.loads(row.arguments)
    revised = _apply(arguments, changes, llm=row.action in _llm_actions(store, row.run_id))
    if revised == arguments:
        raise UsageError(f"the changes leave proposal {row.id} as it is; nothing was revised")
    now = round(store.clock.time(), 3)
    new: dict[str, Any] = {
        "id": new_proposal_id(),
        "tenant": row.tenant,
        "workflow": row.workflow,
        "action": row.action,
        "unit_key": row.unit_key,
        "seq": row.seq,
        "run_id": row.run_id,
        "subject": row.subject,
        "parent": row.id,
        "arguments": canonical_json(revised),
        "policy_version": row.policy_version,
        "approvers": row.approvers,
        "proposed_by": name,
        "expires_at": round(now + (row.expires_at - row.created_at), 3),
        "state": "pending",
        "decided_by": None,
        "decided_at": None,
        "reason": None,
        "decision_signature": None,
        "used_by": None,
        "used_at": None,
        "created_at": now,
        "updated_at": now,
    }
    new["content_hash"] = content_hash(new)
    new["signature"] = sign(secret, "proposal:" + new["content_hash"])
    if not store.revise_proposal(row.id, row.content_hash, new):
        _check_decidable(project, store, _one(store, row.id, tenants), name, secret)
        raise DecisionRefused(
            f"proposal {row.id} changed while it was being revised; look "
            f"again with `agac approvals show {row.id}`",
            "approval_changed",
        )
    maybe_crash("approval_decided")  # the revision is durable
    store.checkpoint(
        _event(
            row,
            "approval_revised",
            {"proposal": row.id, "revision": new["id"], "by": name, "changes": sorted(changes)},
            store.clock.time(),
        )
    )
    return proposal_dict(_stored(store, new["id"]))


def parse_changes(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``field=value`` strings -> {field: value}; a value that parses as JSON is JSON
    (``max_tokens=200``, ``tags=["a"]``), anything else a string."""
    out: dict[str, Any] = {}
    for item in items:
        field, sep, text = item.partition("=")
        if not sep or not field.strip():
            raise UsageError(f"--set {item!r} is not field=value")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        out[field.strip()] = value
    return out


# -- internals ------------------------------------------------------------------------------


def _stored(store: Store, proposal_id: str) -> Row:
    """The proposal ``proposal_id`` as stored right after this process wrote it."""
    row = store.get_proposal(proposal_id)
    assert row is not None, proposal_id
    return row


def _one(store: Store, ref: str, tenants: Collection[str]) -> Row:
    """The proposal ``ref`` names among those of ``tenants``: another tenant's is not
    found, exactly like one that does not exist (T2)."""
    rows = store.find_proposals(ref, tenants=tenants) if ref else []
    if not rows:
        raise NotFound(f"no proposal {ref!r}; `agac approvals list` shows those waiting")
    if len(rows) > 1 and rows[0].id != ref:
        raise UsageError(f"{ref!r} names several proposals; give more of the id")
    return rows[0]


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "?"


def _check_decidable(project: Project, store: Store, row: Row, who: str, secret: bytes) -> None:
    """Raise the refusal that applies to ``who`` deciding on ``row`` now, if any."""
    why = tampered(secret, row)
    if why is not None:
        raise DecisionRefused(
            f"proposal {row.id} is altered: {why}; agac will not act on it "
            "(the next run makes a new proposal)",
            "approval_altered",
        )
    if row.state in STALE_APPROVAL_STATES:
        raise DecisionRefused(
            f"proposal {row.id} is stale: {_stale_reason(store, row)}", "approval_stale"
        )
    if row.state in ("approved", "rejected"):
        raise DecisionRefused(
            f"proposal {row.id} is already decided (replayed): {row.state} by "
            f"{row.decided_by} at {_when(row.decided_at)}",
            "approval_replayed",
        )
    if row.state == "expired" or store.clock.time() >= row.expires_at:
        store.change_proposal(row.id, ["pending"], state="expired")
        raise DecisionRefused(
            f"proposal {row.id} expired at {_when(row.expires_at)}; the next "
            f"`agac run {row.workflow}` fails its unit approval_expired "
            "(`agac retry` then proposes again)",
            "approval_expired",
        )
    refusal = approver_refusal(project, store, who, json.loads(row.approvers), row.tenant)
    if refusal is not None:  # as the approvers and groups are now (A3, T3)
        raise NotAnApprover(f"{refusal}: may not decide on proposal {row.id}")


def _stale_reason(store: Store, row: Row) -> str:
    if row.state == "superseded":
        newer = [
            r
            for r in store.unit_proposals(row.workflow, row.action, row.unit_key, tenant=row.tenant)
            if r.parent == row.id
        ]
        if newer:
            return f"revision {newer[-1].id} replaced it; decide on that one"
        return "a newer proposal for the same unit replaced it"
    if row.state == "withdrawn":
        return row.reason or "its run ended"
    if row.state == "revoked":
        return f"its approval was revoked: {row.reason}"
    return f"it is {row.state}"


def _decide(
    project: Project, store: Store, row: Row, who: str, state: str, reason: str | None
) -> dict[str, Any]:
    secret = load_secret(project.root)
    _check_decidable(project, store, row, who, secret)
    at = round(store.clock.time(), 3)
    signature = decision_signature(secret, row.content_hash, state, who, at, reason)
    won = store.change_proposal(
        row.id,
        ["pending"],
        content_hash=row.content_hash,
        state=state,
        decided_by=who,
        decided_at=at,
        reason=reason,
        decision_signature=signature,
    )
    if not won:
        _check_decidable(project, store, _one(store, row.id, (row.tenant,)), who, secret)
        raise DecisionRefused(
            f"proposal {row.id} changed while it was being decided; look "
            f"again with `agac approvals show {row.id}`",
            "approval_changed",
        )
    maybe_crash("approval_decided")  # the decision is durable; the run has not seen it
    store.checkpoint(
        _event(
            row,
            "approval_decided",
            {"proposal": row.id, "state": state, "by": who, "reason": reason},
            store.clock.time(),
        )
    )
    # a run waiting on batches walks its units again
    store.mark_run_needs_pass(row.workflow, tenant=row.tenant)
    return proposal_dict(_stored(store, row.id))


def _event(row: Row, kind: str, data: dict[str, Any], now: float) -> Checkpoint:
    return run_event(row.run_id, kind, data, now, action=row.action, unit_key=row.unit_key)


def _llm_actions(store: Store, run_id: str) -> set[str]:
    run = store.get_run(run_id)
    if run is None:
        return set()
    return set(run_graph(run).llm_actions())


def _apply(arguments: dict[str, Any], changes: dict[str, Any], *, llm: bool) -> dict[str, Any]:
    """``arguments`` with each dotted field set; only fields that exist (for an llm
    proposal: system, prompt, max_tokens, temperature)."""
    out: dict[str, Any] = json.loads(json.dumps(arguments))
    for field, value in changes.items():
        if llm:
            if field not in LLM_REVISABLE:
                raise UsageError(
                    f"--set {field}: an llm proposal can change "
                    f"{', '.join(LLM_REVISABLE)} (not the model or the schema)"
                )
            if field == "max_tokens" and not (isinstance(value, int) and value >= 1):
                raise UsageError(f"--set max_tokens must be an integer >= 1, got {value!r}")
            if field == "temperature" and value is not None and not isinstance(value, (int, float)):
                raise UsageError(f"--set temperature must be a number, got {value!r}")
            if field in ("system", "prompt") and not isinstance(value, str):
                value = json.dumps(value)
            out[field] = value
            continue
        parts = field.split(".")
        target: Any = out
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(target, dict) and part in target:
                if last:
                    target[part] = value
                else:
                    target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                if last:
                    target[int(part)] = value
                else:
                    target = target[int(part)]
            else:
                known = ", ".join(sorted(out)) if isinstance(out, dict) else ""
                raise UsageError(
                    f"--set {field}: the proposal's arguments have no "
                    f"{'.'.join(parts[: i + 1])!r} (fields: {known})"
                )
    return out
