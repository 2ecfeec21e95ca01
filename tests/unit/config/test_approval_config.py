"""A1: ``approval:`` on an action, checked with file, line and a stable code; approvers
against the groups of agac.yml."""

from __future__ import annotations

from pathlib import Path

import pytest

BASE = "input: {path: data.jsonl}\nactions:\n"
ACTION = "  - name: a\n    model: mock/m\n    prompt: x\n    approval: "


def test_a1_approval_defaults(wf) -> None:
    checked = wf.check(BASE + ACTION + "{approvers: [ann]}\n")
    assert checked.problems == []
    spec = checked.workflow.actions[0].approval
    assert spec.approvers == ("ann",) and spec.expires_in == 24 * 3600
    assert (
        spec.policy_version == "1"
        and spec.on_reject == "fail_unit"
        and spec.on_expire == "fail_unit"
    )


def test_a1_approval_values(wf) -> None:
    checked = wf.check(
        BASE + ACTION + "{approvers: ann, expires_in: 90m, policy_version: 2.1, "
        "on_reject: fail_run, on_expire: time_out_run}\n"
    )
    assert checked.problems == []
    spec = checked.workflow.actions[0].approval
    assert spec.approvers == ("ann",) and spec.expires_in == 5400
    assert spec.policy_version == "2.1" and spec.on_reject == "fail_run"
    assert spec.on_expire == "time_out_run"


@pytest.mark.parametrize(
    "body, code",
    [
        ("{expires_in: 1h}", "missing_key"),
        ("{approvers: []}", "invalid_value"),
        ("{approvers: [ann], expires_in: soon}", "invalid_expires_in"),
        ("{approvers: [ann], expires_in: 0}", "invalid_expires_in"),
        ("{approvers: [ann], on_reject: fail_everything}", "invalid_value"),
        ("{approvers: [ann], on_expire: fail_run}", "invalid_value"),
        ("{approvers: [ann], expire: 1h}", "unknown_key"),
        ("yes", "invalid_value"),
    ],
)
def test_a1_bad_approval_values_are_located(wf, body: str, code: str) -> None:
    checked = wf.check(BASE + ACTION + body + "\n")
    assert checked.one(code).line == 6


def test_a1_did_you_mean_for_approval_keys_and_policies(wf) -> None:
    checked = wf.check(BASE + ACTION + "{approvers: [ann], on_rejct: fail_run}\n")
    assert "on_reject" in (checked.one("unknown_key").hint or "")
    checked = wf.check(BASE + ACTION + "{approvers: [ann], on_reject: fail_rn}\n")
    assert "fail_run" in (checked.one("invalid_value").hint or "")


def test_a1_approvers_are_groups_or_their_users(wf, in_tmp_project: Path) -> None:
    (in_tmp_project / "agac.yml").write_text("groups:\n  support-leads: [ann, bob]\n")
    assert wf.check(BASE + ACTION + "[support-leads]\n").problems != []  # not a mapping
    ok = wf.check(BASE + ACTION + "{approvers: [support-leads, bob]}\n")
    assert ok.problems == []
    bad = wf.check(BASE + ACTION + "{approvers: [support-lead, carol]}\n")
    found = [p for p in bad.problems if p.code == "unknown_approver"]
    assert [p.line for p in found] == [6, 6]
    assert "support-leads" in (found[0].hint or "")
    assert "carol" in found[1].message


def test_a1_without_groups_approvers_are_users(wf) -> None:
    assert wf.check(BASE + ACTION + "{approvers: [anyone]}\n").problems == []


def test_a1_approval_is_per_action_not_a_default(wf) -> None:
    checked = wf.check(
        "input: {path: data.jsonl}\ndefaults:\n  approval: {approvers: [ann]}\n"
        "actions:\n  - {name: a, model: mock/m, prompt: x}\n"
    )
    assert checked.one("unknown_key").line == 3


def test_a1_approval_with_a_memory_store_is_not_durable(wf, in_tmp_project: Path) -> None:
    (in_tmp_project / "agac.yml").write_text("store: memory\n")
    checked = wf.check(BASE + ACTION + "{approvers: [ann]}\n")
    assert checked.one("not_durable").line == 6


def test_a1_approval_round_trips_through_the_run_snapshot(wf) -> None:
    from agac.config.model import Workflow

    checked = wf.check(BASE + ACTION + "{approvers: [ann, bob], policy_version: v7}\n")
    assert Workflow.from_snapshot(checked.workflow.snapshot()) == checked.workflow
    plain = wf.check(BASE + "  - {name: a, model: mock/m, prompt: x}\n").workflow
    assert "approval" not in plain.snapshot()["actions"][0]  # config hashes stay as they were
