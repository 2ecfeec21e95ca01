"""A1-A3: human approval. Each unit of an action with ``approval:`` waits, with a signed
proposal bound to its exact arguments, until a person approves, rejects or revises it;
refused decisions (stale, replayed, expired, altered, not an approver) exit 2; the run
acts on approved arguments only, checks the approver again and draws on its budget."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import rows, run

from agac import api
from agac.errors import RefusedError, UsageError
from agac.store import tables as t
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

AP = """
name: ap
input: {path: data/, id_field: id}
defaults: {model: mock/m1, retry: {max_attempts: 2, backoff: {initial: 10ms, max: 20ms}}}
DEADLINE
actions:
  - name: draft
    prompt: "Reply to {{ source.text }}"
  - name: tag
    prompt: "Tag {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [draft]
    function: tools.mail:send
    effect: {idempotent: false}
    approval: APPROVAL
  - name: after
    kind: tool
    dependencies: [send]
    function: tools.mail:after
"""

TOOLS = """
import json

def send(inputs, ctx):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"key": ctx.idempotency_key, "record": ctx.record_key,
                            "inputs": inputs}) + "\\n")
    return {"sent": inputs["source"]["id"]}

def after(inputs, ctx):
    return {"done": inputs["send"]["sent"]}
"""

GROUPS = "groups:\n  leads: [ann, bob]\n"


def make_ap(
    root: Path,
    approval: str = "{approvers: [leads], expires_in: 1h}",
    *,
    n: int = 3,
    deadline: str = "",
    agac_yml: str = GROUPS,
) -> None:
    write_project(
        root,
        AP.replace("APPROVAL", approval).replace("DEADLINE", deadline),
        data={"data/a.jsonl": rows(n)},
        agac_yml=agac_yml,
        files={"tools/__init__.py": "", "tools/mail.py": TOOLS},
        workflow_file="ap.yml",
    )


def calls(root: Path) -> list[dict[str, Any]]:
    log = root / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def pending(root: Path) -> dict[str, dict[str, Any]]:
    """Pending proposals by record key."""
    return {p["record"]: p for p in api.approvals_list("ap", root)}


def every(root: Path) -> list[dict[str, Any]]:
    return api.approvals_list("ap", root, every=True)


def store() -> Store:
    return Store(os.environ["AGAC_STORE"])


# -- A1 ---------------------------------------------------------------------------------------


def test_a1_each_unit_pauses_with_a_proposal_bound_to_its_arguments(project: Path) -> None:
    make_ap(project)
    first = run(project, "ap")
    s = first.summary
    assert first.exit_code == 75 and s["state"] == "awaiting_approval"
    assert s["actions"]["draft"]["answered"] == 3 and s["actions"]["tag"]["answered"] == 3
    assert s["actions"]["send"]["pending"] == 3 and s["actions"]["after"]["pending"] == 3
    assert s["awaiting_approval"]["units"] == 3 and s["next"] == "agac approvals list ap"
    assert calls(project) == []  # nothing acted
    listed = api.approvals_list("ap", project)
    assert len(listed) == 3
    for p in listed:
        assert {
            "id",
            "workflow",
            "action",
            "record",
            "arguments",
            "approvers",
            "expires_at",
            "state",
        } <= set(p)
        assert p["state"] == "pending" and p["approvers"] == ["leads"] and p["action"] == "send"
        assert p["arguments"]["source"] == {
            "id": p["record"],
            "text": f"text number {int(p['record'][1:])}",
        }
        assert set(p["arguments"]) == {"source", "draft"}
        assert time.time() + 3500 < p["expires_at"] <= time.time() + 3600
    kinds = [e["kind"] for e in api.events(s["run_id"], project)]
    assert kinds.count("approval_requested") == 3
    waits = [e for e in api.events(s["run_id"], project) if e["kind"] == "waiting"]
    assert [e["data"]["reason"] for e in waits] == ["approval"]
    shown = api.approvals_show(listed[0]["id"][:8], project)
    assert shown["verified"] is True and shown["id"] == listed[0]["id"]
    # the next invocation continues the same run and asks nothing twice; --wait does not
    # wait on people (B11)
    again = run(project, "ap", wait=True)
    assert again.exit_code == 75 and again.summary["run_id"] == s["run_id"]
    assert {p["id"] for p in every(project)} == {p["id"] for p in listed}


def test_a1_open_proposals_are_reused_by_a_new_run(project: Path) -> None:
    make_ap(project)
    first = run(project, "ap").summary
    ids = {k: p["id"] for k, p in pending(project).items()}
    wf = project / "ap.yml"
    wf.write_text(wf.read_text().replace("Tag {{", "Label {{"))  # another action changed
    with pytest.raises(UsageError):
        run(project, "ap")
    second = run(project, "ap", new=True).summary
    assert second["run_id"] != first["run_id"] and second["state"] == "awaiting_approval"
    now = pending(project)
    assert {k: p["id"] for k, p in now.items()} == ids  # same proposals, no duplicates
    assert {p["run_id"] for p in now.values()} == {second["run_id"]}
    assert len(every(project)) == 3


def test_a1_a_unit_that_would_not_act_needs_no_approval(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    for p in pending(project).values():
        api.approve(p["id"], project, who="ann")
    assert run(project, "ap").summary["state"] == "succeeded"
    # a new run of a changed workflow re-executes send, but every effect has its receipt
    wf = project / "ap.yml"
    wf.write_text(wf.read_text().replace("Tag {{", "Label {{"))
    s = run(project, "ap").summary
    assert s["state"] == "succeeded" and s["actions"]["send"]["reused"] == 3
    assert len(every(project)) == 3 and len(calls(project)) == 3


# -- A2: decisions -----------------------------------------------------------------------------


def test_a2_approve_acts_with_exactly_the_approved_arguments(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    proposals = pending(project)
    for p in proposals.values():
        assert api.approve(p["id"], project, who="ann")["state"] == "approved"
    done = run(project, "ap")
    assert done.exit_code == 0 and done.summary["state"] == "succeeded"
    log = calls(project)
    assert len(log) == 3
    for c in log:
        assert c["inputs"] == proposals[c["record"]]["arguments"]
    assert {p["used_by"] for p in every(project)} == {done.summary["run_id"]}
    assert [e["state"] for e in api.effects_list("ap", project)] == ["succeeded"] * 3


def test_a2_replayed_approval_refused(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    p = next(iter(pending(project).values()))
    api.approve(p["id"], project, who="ann")
    for decide in (
        lambda: api.approve(p["id"], project, who="bob"),
        lambda: api.reject(p["id"], "no", project, who="bob"),
        lambda: api.revise(p["id"], ["source.text=x"], project, who="bob"),
    ):
        with pytest.raises(RefusedError) as info:
            decide()
        assert info.value.exit_code == 2 and "replayed" in str(info.value)
    run(project, "ap")
    assert len(calls(project)) == 1  # acted once, on the one approval


def test_a2_revised_proposal_needs_a_new_approval(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    old = pending(project)["r00000"]
    new = api.revise(old["id"], ["source.text=a kinder text"], project, who="bob")
    assert new["revises"] == old["id"] and new["state"] == "pending" and new["proposed_by"] == "bob"
    assert new["arguments"]["source"]["text"] == "a kinder text"
    assert new["arguments"]["draft"] == old["arguments"]["draft"]
    with pytest.raises(RefusedError) as info:
        api.approve(old["id"], project, who="ann")
    assert "stale" in str(info.value) and new["id"] in str(info.value)
    for p in pending(project).values():
        if p["id"] != new["id"]:
            api.approve(p["id"], project, who="ann")
    assert run(project, "ap").exit_code == 75  # the revision still waits
    # The two approved sends run concurrently: their order is not part of the rule.
    assert sorted(c["record"] for c in calls(project)) == ["r00001", "r00002"]
    api.approve(new["id"], project, who="ann")
    assert run(project, "ap").summary["state"] == "succeeded"
    last = calls(project)[-1]
    assert last["record"] == "r00000" and last["inputs"]["source"]["text"] == "a kinder text"
    history = api.approvals_show(new["id"], project)["history"]
    assert [(h["id"], h["state"]) for h in history] == [
        (old["id"], "superseded"),
        (new["id"], "approved"),
    ]


def test_a2_revise_refuses_unknown_fields(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    p = next(iter(pending(project).values()))
    with pytest.raises(UsageError) as info:
        api.revise(p["id"], ["source.txt=x"], project, who="ann")
    assert "source.txt" in str(info.value)
    with pytest.raises(UsageError):
        api.revise(p["id"], ["no-equals-sign"], project, who="ann")
    assert pending(project)[p["record"]]["id"] == p["id"]  # nothing changed


def test_a2_rejection_fails_only_its_unit_and_retry_proposes_again(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    proposals = pending(project)
    api.reject(proposals["r00001"]["id"], "not this customer", project, who="bob")
    for key in ("r00000", "r00002"):
        api.approve(proposals[key]["id"], project, who="ann")
    s = run(project, "ap").summary
    assert s["state"] == "partial"
    assert s["actions"]["send"]["reasons"] == {"approval_rejected": 1}
    assert s["actions"]["after"]["reasons"] == {"upstream_failed": 1}
    session = api.record_session("r00001", project, workflow="ap")
    send = next(a for a in session["actions"] if a["action"] == "send")
    assert send["reason"] == "approval_rejected" and "not this customer" in send["detail"]
    retried = api.retry("ap", project)
    assert retried.exit_code == 75
    again = pending(project)
    assert list(again) == ["r00001"] and again["r00001"]["id"] != proposals["r00001"]["id"]
    api.approve(again["r00001"]["id"], project, who="ann")
    assert run(project, "ap").summary["state"] == "succeeded"
    assert sorted(c["record"] for c in calls(project)) == ["r00000", "r00001", "r00002"]


def test_a2_on_reject_fail_run_ends_the_run_failed(project: Path) -> None:
    make_ap(project, "{approvers: [leads], on_reject: fail_run}")
    run(project, "ap")
    proposals = pending(project)
    api.reject(proposals["r00001"]["id"], "stop everything", project, who="ann")
    result = run(project, "ap")
    s = result.summary
    assert s["state"] == "failed" and result.exit_code == 1
    assert s["actions"]["send"]["reasons"] == {"approval_rejected": 1, "run_ended": 2}
    assert all(a["pending"] == 0 for a in s["actions"].values())
    assert calls(project) == []
    with pytest.raises(RefusedError) as info:
        api.approve(proposals["r00000"]["id"], project, who="ann")
    assert "stale" in str(info.value)


def test_a2_expired_approval_refused(project: Path, clocked: tuple[ManualClock, Store]) -> None:
    clock, st = clocked
    make_ap(project, "{approvers: [leads], expires_in: 1s}")
    run(project, "ap", store=st)
    proposals = pending(project)
    clock.advance(1.2)
    with pytest.raises(RefusedError) as info:
        api.approve(proposals["r00000"]["id"], project, who="ann", store=st)
    assert "expired" in str(info.value) and info.value.exit_code == 2
    s = run(project, "ap", store=st).summary
    assert s["state"] == "partial"
    assert s["actions"]["send"]["reasons"] == {"approval_expired": 3}
    assert {p["state"] for p in every(project)} == {"expired"}
    assert calls(project) == []
    retried = api.retry("ap", project, store=st)  # R2: an expired unit is proposed again
    assert retried.exit_code == 75 and len(pending(project)) == 3
    assert {p["id"] for p in pending(project).values()}.isdisjoint(
        x["id"] for x in proposals.values()
    )


def test_a2_a_rejection_is_carried_by_a_new_run(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    proposals = pending(project)
    api.reject(proposals["r00002"]["id"], "no", project, who="ann")
    for key in ("r00000", "r00001"):
        api.approve(proposals[key]["id"], project, who="ann")
    assert run(project, "ap").summary["state"] == "partial"
    wf = project / "ap.yml"
    wf.write_text(wf.read_text().replace("Tag {{", "Label {{"))  # no fast path: units re-walk
    s = run(project, "ap").summary
    assert s["state"] == "partial" and s["actions"]["send"]["reasons"] == {"approval_rejected": 1}
    assert pending(project) == {} and len(every(project)) == 3  # R1 c: carried, not asked again
    assert len(calls(project)) == 2


def test_a2_on_expire_time_out_run_ends_the_run_timed_out(
    project: Path, clocked: tuple[ManualClock, Store]
) -> None:
    clock, st = clocked
    make_ap(project, "{approvers: [leads], expires_in: 1s, on_expire: time_out_run}")
    assert run(project, "ap", store=st).exit_code == 75
    clock.advance(1.2)
    s = run(project, "ap", store=st).summary
    assert s["state"] == "timed_out"
    send = s["actions"]["send"]
    assert send["failed"] >= 1 and send["reasons"]["approval_expired"] == send["failed"]
    assert send["failed"] + send.get("reasons", {}).get("run_ended", 0) == 3


def test_a2_altered_approval_refused(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    proposals = pending(project)
    victim = proposals["r00000"]["id"]
    st = store()
    try:
        with st.engine.begin() as conn:
            forged = dict(
                proposals["r00000"]["arguments"], source={"id": "r00000", "text": "pay me"}
            )
            conn.execute(
                t.approvals.update()
                .where(t.approvals.c.id == victim)
                .values(arguments=json.dumps(forged, sort_keys=True, separators=(",", ":")))
            )
    finally:
        st.close()
    with pytest.raises(RefusedError) as info:
        api.approve(victim, project, who="ann")
    assert "altered" in str(info.value)
    assert api.approvals_show(victim, project)["verified"] is False
    # a decision forged in the store (no decision signature) is never acted on either
    forged_ok = proposals["r00001"]["id"]
    st = store()
    try:
        with st.engine.begin() as conn:
            conn.execute(
                t.approvals.update()
                .where(t.approvals.c.id == forged_ok)
                .values(state="approved", decided_by="ann", decided_at=time.time())
            )
    finally:
        st.close()
    api.approve(proposals["r00002"]["id"], project, who="ann")
    s = run(project, "ap").summary
    assert s["state"] == "awaiting_approval"
    assert [c["record"] for c in calls(project)] == ["r00002"]
    states = {p["id"]: p["state"] for p in every(project)}
    assert states[victim] == "altered" and states[forged_ok] == "altered"
    fresh = pending(project)
    assert set(fresh) == {"r00000", "r00001"}
    assert fresh["r00000"]["arguments"]["source"]["text"] == "text number 0"  # re-rendered
    kinds = [e["kind"] for e in api.events(s["run_id"], project)]
    assert kinds.count("approval_altered") == 2


def test_a2_stale_approval_refused_after_cancel(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    proposals = pending(project)
    s = api.cancel("ap", project).summary
    assert s["state"] == "cancelled" and s["actions"]["send"]["reasons"] == {"cancelled": 3}
    with pytest.raises(RefusedError) as info:
        api.approve(proposals["r00000"]["id"], project, who="ann")
    assert "stale" in str(info.value) and "cancelled" in str(info.value)
    assert {p["state"] for p in every(project)} == {"withdrawn"}


def test_a2_deadline_skips_units_awaiting_approval(
    project: Path, clocked: tuple[ManualClock, Store]
) -> None:
    clock, st = clocked
    make_ap(project, deadline="deadline: 2s")
    assert run(project, "ap", store=st).exit_code == 75
    proposals = pending(project)
    clock.advance(2.2)
    s = run(project, "ap", store=st).summary
    assert s["state"] == "timed_out"
    assert s["actions"]["send"]["reasons"] == {"deadline": 3}
    with pytest.raises(RefusedError) as info:
        api.approve(proposals["r00002"]["id"], project, who="bob", store=st)
    assert "stale" in str(info.value)


def test_a2_not_an_approver_refused(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    p = pending(project)["r00000"]
    for decide in (
        lambda: api.approve(p["id"], project, who="mallory"),
        lambda: api.reject(p["id"], "no", project, who="mallory"),
        lambda: api.revise(p["id"], ["source.text=x"], project, who="mallory"),
    ):
        with pytest.raises(RefusedError) as info:
            decide()
        assert "mallory is not an approver" in str(info.value) and "leads" in str(info.value)
    assert pending(project)["r00000"]["state"] == "pending"


def test_a2_identity_is_required(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_ap(project)
    run(project, "ap")
    p = pending(project)["r00000"]
    with pytest.raises(UsageError) as info:
        api.approve(p["id"], project)
    assert "--as" in str(info.value) and "AGAC_USER" in str(info.value)
    monkeypatch.setenv("AGAC_USER", "bob")
    assert api.approve(p["id"], project)["decided_by"] == "bob"


def test_a2_concurrent_decisions_one_wins(project: Path) -> None:
    make_ap(project, n=4)
    run(project, "ap")
    for p in pending(project).values():
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def decide(
            kind: str,
            pid: str = p["id"],
            barrier: threading.Barrier = barrier,
            outcomes: list[str] = outcomes,
        ) -> None:
            barrier.wait()
            try:
                if kind == "approve":
                    api.approve(pid, project, who="ann")
                else:
                    api.reject(pid, "no", project, who="bob")
                outcomes.append(kind)
            except RefusedError:
                outcomes.append("refused")

        threads = [threading.Thread(target=decide, args=(k,)) for k in ("approve", "reject")]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(outcomes) in (["approve", "refused"], ["refused", "reject"])
        state = next(x for x in every(project) if x["id"] == p["id"])["state"]
        assert state == ("approved" if "approve" in outcomes else "rejected")


# -- A3 ---------------------------------------------------------------------------------------


def test_a3_approver_is_checked_again_before_acting(project: Path) -> None:
    make_ap(project)
    run(project, "ap")
    proposals = pending(project)
    api.approve(proposals["r00000"]["id"], project, who="bob")
    api.approve(proposals["r00001"]["id"], project, who="ann")
    (project / "agac.yml").write_text("groups:\n  leads: [ann]\n")  # bob left the group
    s = run(project, "ap").summary
    assert s["state"] == "awaiting_approval"
    assert [c["record"] for c in calls(project)] == ["r00001"]
    states = {p["id"]: p for p in every(project)}
    assert states[proposals["r00000"]["id"]]["state"] == "revoked"
    assert "bob is no longer an approver" in states[proposals["r00000"]["id"]]["reason"]
    again = pending(project)
    assert set(again) == {"r00000", "r00002"} and again["r00000"]["id"] != proposals["r00000"]["id"]
    with pytest.raises(RefusedError):
        api.approve(again["r00000"]["id"], project, who="bob")


ASK = """
name: ask
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_tokens: 16}
budget: {usd: BUDGET}
actions:
  - name: ask
    system: "You answer briefly."
    prompt: "Say {{ source.text }}"
    approval: {approvers: [ann]}
"""
PRICED = "prices: {mock/m1: {input: 1000, output: 1000}}\n"


def test_a3_approved_llm_units_draw_on_the_same_budget(project: Path) -> None:
    write_project(
        project,
        ASK.replace("BUDGET", "0.15"),
        data={"data/a.jsonl": rows(10)},
        agac_yml=PRICED,
        workflow_file="ask.yml",
    )
    first = api.run("ask", project, allow_over_estimate=True)
    assert first.exit_code == 75 and first.summary["cost_usd"] == 0
    proposals = api.approvals_list("ask", project)
    assert proposals[0]["arguments"] == {
        "model": "mock/m1",
        "system": "You answer briefly.",
        "prompt": "Say text number 0",
        "max_tokens": 16,
        "temperature": None,
    }
    for p in proposals:
        api.approve(p["id"], project, who="ann")
    s = api.run("ask", project).summary
    assert s["state"] == "exhausted"
    ask = s["actions"]["ask"]
    assert ask["answered"] > 0 and ask["reasons"].get("budget_exhausted", 0) > 0
    assert ask["calls"] == ask["answered"]
    assert 0 < s["budget"]["spent_usd"] <= 0.15 + 1e-9


def test_a2_revised_llm_request_is_what_is_sent(project: Path) -> None:
    write_project(
        project,
        ASK.replace("BUDGET", "100"),
        data={"data/a.jsonl": rows(2)},
        agac_yml=PRICED,
        workflow_file="ask.yml",
    )
    api.run("ask", project)
    first, second = api.approvals_list("ask", project)
    with pytest.raises(UsageError):
        api.revise(first["id"], ["model=openai/gpt-4o"], project, who="ann")
    revised = api.revise(
        first["id"], {"prompt": "Say hello politely", "max_tokens": 8}, project, who="ann"
    )
    api.approve(revised["id"], project, who="ann")
    api.approve(second["id"], project, who="ann")
    s = api.run("ask", project).summary
    assert s["state"] == "succeeded" and s["actions"]["ask"]["calls"] == 2
    st = store()
    try:
        (outcome,) = [
            o for o in st.unit_outcomes(s["run_id"], first["record"]) if o.action == "ask"
        ]
        request = json.loads(st.get_answer(outcome.fingerprint, tenant="default").request)
    finally:
        st.close()
    assert request["max_tokens"] == 8
    assert [m["content"] for m in request["messages"]] == [
        "You answer briefly.",
        "Say hello politely",
    ]
