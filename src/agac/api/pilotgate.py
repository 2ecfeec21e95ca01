"""A workflow's ``pilot: {sample: N, approve: true, approvers: […]}`` (docs/workflow-reference.md,
Pilot): before ``agac run`` admits a full run, it runs the pilot (``agac pilot`` with the
file's sample, seed and stratification) and proposes it for approval; the full run is
admitted only once a person approved that proposal.

The proposal is an approval like an action's (A1-A3): signed with the project's secret,
decided with ``agac approve ID --as NAME`` (or on the service) by one of ``approvers``,
and expiring ``expires_in`` after it is made. It is bound to what was approved: the
pilot run, the workflow's configuration (``config_hash``), a digest of the pilot's
answers and check verdicts as stored, and its projected cost per tier. The full run is
admitted only when all of them still hold; a changed workflow, changed pilot answers, an
expired or altered proposal, or one a full run has used already, makes ``agac run`` run a
new pilot (which pays only for answers it has not stored) and propose again. A rejected
proposal refuses the run until the workflow changes.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from agac.errors import Paused, RefusedError

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.engine import Row

    from agac.api.progress import ProgressMode
    from agac.config.model import PilotSpec, Workflow
    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = ["PILOT_ACTION", "admit_after_pilot", "pilot_used"]

PILOT_ACTION = "(pilot)"
"""The ``action`` of a pilot's proposal (no action can have this name)."""
_UNIT = "pilot"


def admit_after_pilot(
    ref: str | Path,
    proj: Project,
    loaded: Workflow,
    store: Store,
    tenant: str,
    progress: ProgressMode,
    records: object = None,
) -> str | None:
    """Before a new full run of ``loaded``: the id of the approved pilot proposal that
    admits it (None when the workflow asks for no approval). Raises Paused (exit 75) with
    the proposal to decide when it waits for a person — after running a new pilot when
    none holds — and RefusedError when the pilot was rejected, or when ``records`` are
    given in memory (a pilot samples the workflow's input)."""
    spec = loaded.pilot
    if spec is None or not spec.approve:
        return None
    if records is not None:
        raise RefusedError(
            f"{loaded.name} asks for a pilot's approval before a full run, and a pilot "
            "samples the workflow's input: run it over its input.path, not records given "
            "in memory"
        )
    row = _latest(store, loaded.name, tenant)
    if row is not None:
        state = _state(proj, store, row, loaded)
        if state == "approved":
            return str(row.id)
        if state == "pending":
            raise Paused(_waiting(proj, row, "waits"))
        if state == "rejected":
            raise RefusedError(
                f"the pilot of {loaded.name} was rejected by {row.decided_by}"
                + (f": {row.reason}" if row.reason else "")
                + "; change the workflow and run again (a new pilot is proposed)"
            )
    row = _propose(ref, proj, store, loaded, spec, tenant, progress)
    raise Paused(_waiting(proj, row, "ran and waits"))


def pilot_used(store: Store, proposal: str, run_id: str) -> None:
    """The approved pilot proposal ``proposal`` admitted run ``run_id``: a later full run
    needs a new pilot's approval."""
    store.use_proposal(proposal, run_id)


def _latest(store: Store, workflow: str, tenant: str) -> Row | None:
    rows = store.unit_proposals(workflow, PILOT_ACTION, _UNIT, tenant=tenant)
    return rows[-1] if rows else None


def _state(proj: Project, store: Store, row: Row, loaded: Workflow) -> str | None:
    """``approved`` (and still bound), ``pending``, ``rejected``, or None: a new pilot is
    needed (none holds: stale, expired, altered, used, or no longer bound)."""
    from agac.engine.approvals.proposals import load_secret, tampered

    if tampered(load_secret(proj.root), row) is not None or row.used_by is not None:
        return None
    if row.state in ("pending", "approved") and store.clock.time() >= row.expires_at:
        store.change_proposal(row.id, ["pending", "approved"], state="expired")
        return None
    arguments = json.loads(row.arguments)
    if arguments.get("config_hash") != loaded.config_hash:
        return None
    if row.state == "rejected":
        return "rejected"
    run = store.get_run(str(arguments.get("pilot_run")))
    if run is None or _digest(store, run.id) != arguments.get("answers_digest"):
        return None
    return str(row.state) if row.state in ("pending", "approved") else None


def _digest(store: Store, run_id: str) -> str:
    """A digest of a pilot run's answers and verdicts as stored: what was approved."""
    from agac.engine.views.pilot import answer_rows

    run = store.get_run(run_id)
    assert run is not None
    text = json.dumps(list(answer_rows(store, run)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _propose(
    ref: str | Path,
    proj: Project,
    store: Store,
    loaded: Workflow,
    spec: PilotSpec,
    tenant: str,
    progress: ProgressMode,
) -> Row:
    """Run the pilot and store its signed proposal."""
    from agac.api.pilot import pilot

    report = pilot(
        ref,
        proj,
        sample=spec.sample,
        seed=spec.seed,
        stratify=spec.stratify,
        tenant=tenant,
        progress=progress,
        store=store,
    )
    arguments = {
        "pilot_run": report["run_id"],
        "sample": report["sample"]["records"],
        "of": report["sample"]["of"],
        "seed": spec.seed,
        "config_hash": loaded.config_hash,
        "answers_digest": _digest(store, report["run_id"]),
        "checks": report["checks"],
        "measured_usd": report["measured"]["cost_usd"],
        "projected_usd": {
            tier: None if p is None else p["estimate_usd"]
            for tier, p in report["projection"].items()
        },
    }
    return _store_proposal(proj, store, loaded.name, spec, tenant, report["run_id"], arguments)


def _store_proposal(
    proj: Project,
    store: Store,
    workflow: str,
    spec: PilotSpec,
    tenant: str,
    run_id: str,
    arguments: dict[str, Any],
) -> Row:
    from agac.engine.approvals.proposals import (
        arguments_hash,
        content_hash,
        load_secret,
        new_proposal_id,
        sign,
    )
    from agac.providers.base import canonical_json

    now = store.clock.time()
    subject = hashlib.sha256(
        canonical_json([workflow, PILOT_ACTION, arguments_hash(arguments)]).encode("utf-8")
    ).hexdigest()
    row: dict[str, Any] = {
        "id": new_proposal_id(),
        "tenant": tenant,
        "workflow": workflow,
        "action": PILOT_ACTION,
        "unit_key": _UNIT,
        "seq": 0,
        "run_id": run_id,
        "subject": subject,
        "parent": None,
        "arguments": canonical_json(arguments),
        "policy_version": "1",
        "approvers": canonical_json(list(spec.approvers)),
        "proposed_by": None,
        "expires_at": round(now + spec.expires_in, 3),
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
    row["content_hash"] = content_hash(row)
    row["signature"] = sign(load_secret(proj.root), "proposal:" + row["content_hash"])
    store.insert_proposal(row)
    got = store.get_proposal(row["id"])
    assert got is not None
    return got


def _waiting(proj: Project, row: Row, verb: str) -> str:
    from agac.engine.approvals.proposals import decide_hint

    arguments = json.loads(row.arguments)
    projected = arguments["projected_usd"]
    costs = ", ".join(f"{t} ${v:.4f}" for t, v in projected.items() if v is not None)
    return (
        f"the pilot of {row.workflow} ({arguments['pilot_run']}, {arguments['sample']} of "
        f"{arguments['of']} records; whole input projected at {costs}) {verb} for approval: "
        f"proposal {row.id}; {decide_hint(proj, row.id)}, then run again "
        f"(agac pilot's report: agac approvals show {row.id})"
    )
