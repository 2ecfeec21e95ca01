"""``pilot: {sample: N, approve: true, approvers: […]}`` in a workflow (The quality loop: a
pilot before the full run): ``agac run`` runs the pilot first and waits (exit 75) for a
signed proposal bound to the pilot's results and projected cost; once one of the
approvers approves it, the full run is admitted and reuses the pilot's answers. A
changed workflow, a proposal used by a full run, or a rejection is never an admission."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from engine_helpers import rows

from agac import api
from agac.errors import NotAnApprover, Paused, RefusedError
from agac.store import tables as t
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

WF = """
name: pa
input: {path: data/, id_field: id}
defaults: {model: mock/m1}
pilot: {sample: 2, approve: true, approvers: [leads], expires_in: 1h}
actions:
  - name: draft
    prompt: "PROMPT {{ source.text }}"
"""
GROUPS = "groups:\n  leads: [ann, bob]\n"


def _make(root: Path, prompt: str = "Reply to") -> None:
    write_project(
        root,
        WF.replace("PROMPT", prompt),
        data={"data/a.jsonl": rows(5)},
        agac_yml=GROUPS,
        workflow_file="pa.yml",
    )


def _waiting(root: Path, store: Store | None = None) -> str:
    """Run, expecting the wait for the pilot's approval; the proposal's id."""
    with pytest.raises(Paused) as caught:
        api.run("pa", root, progress=False, store=store)
    found = re.search(r"proposal (\w+)", str(caught.value))
    assert found is not None, str(caught.value)
    return found.group(1)


def _pilots(root: Path) -> list[dict[str, object]]:
    return [p for p in api.approvals_list("pa", root, every=True) if p["action"] == "(pilot)"]


def test_i38_4_a_run_waits_for_the_pilots_approval_then_reuses_its_answers(
    tmp_path: Path,
) -> None:
    _make(tmp_path)

    proposal = _waiting(tmp_path)

    (shown,) = _pilots(tmp_path)
    assert (shown["id"], shown["state"]) == (proposal, "pending")
    arguments = shown["arguments"]
    assert isinstance(arguments, dict)
    assert (arguments["sample"], arguments["of"]) == (2, 5)
    assert set(arguments["projected_usd"]) == {"batch", "flex", "online"}
    assert arguments["checks"] == {} and len(arguments["answers_digest"]) == 64
    # Asked again before a decision: the same proposal waits, no second pilot is run.
    assert _waiting(tmp_path) == proposal and len(_pilots(tmp_path)) == 1
    with pytest.raises(NotAnApprover):
        api.approve(proposal, tmp_path, who="eve")

    api.approve(proposal, tmp_path, who="ann")
    full = api.run("pa", tmp_path, progress=False)

    summary = full.summary.to_dict()
    assert summary["state"] == "succeeded"
    assert summary["actions"]["draft"]["answered"] == 5
    assert summary["actions"]["draft"]["reused"] == 2  # the pilot's two answers
    (used,) = _pilots(tmp_path)
    assert used["used_by"] == full.run_id
    # The next full run needs a pilot of its own approved: a used approval admits none.
    again = _waiting(tmp_path)
    assert again != proposal and len(_pilots(tmp_path)) == 2


def test_i38_4_the_approval_is_bound_to_the_workflow_and_a_rejection_refuses(
    tmp_path: Path,
) -> None:
    _make(tmp_path)
    proposal = _waiting(tmp_path)
    api.approve(proposal, tmp_path, who="bob")
    _make(tmp_path, prompt="Answer")  # the prompt changed after the approval

    changed = _waiting(tmp_path)  # a new pilot of the changed workflow, proposed again

    assert changed != proposal
    assert [p["state"] for p in _pilots(tmp_path)] == ["superseded", "pending"]
    api.reject(changed, "the answers are too long", tmp_path, who="ann")
    with pytest.raises(RefusedError, match="rejected by ann: the answers are too long"):
        api.run("pa", tmp_path, progress=False)


def test_i38_4_a_pilot_needs_its_approvers(tmp_path: Path) -> None:
    write_project(
        tmp_path,
        WF.replace("PROMPT", "Reply").replace(", approvers: [leads]", ""),
        data={"data/a.jsonl": rows(2)},
        workflow_file="pa.yml",
    )

    workflow, problems = api.validate("pa", tmp_path)

    assert workflow is None
    (problem,) = [p for p in problems if "pilot" in str(p)]
    assert "pilot.approve needs approvers: who may approve the pilot" in str(problem)


def test_i38_4_an_expired_or_unbound_approval_admits_no_run(
    project: Path, clocked: tuple[ManualClock, Store]
) -> None:
    clock, st = clocked
    _make(project)
    first = _waiting(project, store=st)
    api.approve(first, project, who="ann", store=st)
    clock.advance(3601)  # past expires_in: a new pilot is proposed, nothing admitted

    second = _waiting(project, store=st)

    assert second != first
    assert [p["state"] for p in _pilots(project)] == ["expired", "pending"]
    api.approve(second, project, who="ann", store=st)
    # The pilot's answers changed in the store after the approval: what was approved no
    # longer holds, so a new pilot is proposed (its answers are the stored ones again).
    (pilot_run,) = {p["run_id"] for p in _pilots(project) if p["id"] == second}
    with st.engine.begin() as conn:
        conn.execute(
            t.outcomes.update()
            .where(t.outcomes.c.run_id == pilot_run)
            .values(output=json.dumps("edited"))
        )

    third = _waiting(project, store=st)

    assert third not in (first, second)
    # Three pilots ran, and no full run was admitted.
    assert [bool(r.settings.overrides.get("pilot")) for r in st.list_runs("pa")] == [True] * 3
