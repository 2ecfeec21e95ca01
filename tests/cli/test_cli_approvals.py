"""Approvals through the CLI (A1-A3): the README's worked example — run -> 75, list,
approve --as, run again -> done — plus refusals (exit 2, a clear message) and status."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project

WF = """\
name: replies
input: {path: data/, id_field: id}
defaults: {model: mock/m}
actions:
  - name: draft
    prompt: "Draft a reply to: {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [draft]
    function: tools.mail:send
    effect: {idempotent: true}
    approval: {approvers: [support-leads], expires_in: 24h, policy_version: "2024-06"}
"""

TOOLS = """\
def send(inputs, ctx):
    with open("sent.log", "a") as f:
        f.write(inputs["source"]["id"] + " " + inputs["draft"]["text"] + "\\n")
    return {"sent": inputs["source"]["id"]}
"""


def _project(root: Path) -> None:
    write_project(
        root,
        WF,
        workflow_file="workflows/replies.yml",
        agac_yml="groups:\n  support-leads: [ann, bob]\n",
        data={
            "data/a.jsonl": [
                {"id": "c1", "text": "late parcel"},
                {"id": "c2", "text": "wrong size"},
            ]
        },
        files={"tools/__init__.py": "", "tools/mail.py": TOOLS},
    )


def test_a1_a2_worked_example(tmp_path: Path) -> None:
    _project(tmp_path)
    first = agac("run", "replies", "--json", cwd=tmp_path)
    assert first.code == 75, first
    summary = first.json()
    assert (
        summary["state"] == "awaiting_approval" and summary["next"] == "agac approvals list replies"
    )
    assert summary["actions"]["send"]["pending"] == 2
    status = agac("status", "replies", cwd=tmp_path)
    assert status.code == 0 and "awaiting approval: 2 units (send 2)" in status.out, status
    listed = agac("approvals", "list", "replies", "--json", cwd=tmp_path)
    assert listed.code == 0, listed
    proposals = listed.json()
    assert [p["record"] for p in proposals] == ["c1", "c2"]
    for p in proposals:
        assert {
            "id",
            "workflow",
            "action",
            "record",
            "arguments",
            "approvers",
            "expires_at",
        } <= set(p)
        assert p["approvers"] == ["support-leads"] and p["policy_version"] == "2024-06"
    text = agac("approvals", "list", cwd=tmp_path)
    assert proposals[0]["id"] in text.out and "agac approve ID" in text.out
    shown = agac("approvals", "show", proposals[0]["id"], cwd=tmp_path)
    assert shown.code == 0 and "signatures verified" in shown.out
    ok = agac("approve", proposals[0]["id"], "--as", "ann", cwd=tmp_path)
    assert ok.code == 0 and "approved by ann" in ok.out, ok
    revised = agac(
        "revise",
        proposals[1]["id"],
        "--set",
        "draft.text=Sorry, a new one is on its way",
        "--as",
        "bob",
        "--json",
        cwd=tmp_path,
    )
    assert revised.code == 0, revised
    new_id = revised.json()["id"]
    assert agac("approve", new_id, "--json", cwd=tmp_path, env={"AGAC_USER": "ann"}).code == 0
    done = agac("run", "replies", "--json", cwd=tmp_path)
    assert done.code == 0, done
    assert done.json()["state"] == "succeeded"
    # the two approved sends run concurrently: compare them in key order
    sent = sorted((tmp_path / "sent.log").read_text().splitlines())
    assert len(sent) == 2 and sent[0].startswith("c1 ")
    assert sent[1] == "c2 Sorry, a new one is on its way"
    assert oct((tmp_path / ".agac" / "secret").stat().st_mode & 0o777) == "0o600"


def test_a2_refusals_exit_2_with_a_clear_message(tmp_path: Path) -> None:
    _project(tmp_path)
    assert agac("run", "replies", cwd=tmp_path).code == 75
    pid = agac("approvals", "list", "--json", cwd=tmp_path).json()[0]["id"]
    nobody = agac("approve", pid, cwd=tmp_path)
    assert nobody.code == 2 and "--as" in nobody.err and "AGAC_USER" in nobody.err
    stranger = agac("approve", pid, "--as", "mallory", "--json", cwd=tmp_path)
    assert stranger.code == 2 and stranger.json()["ok"] is False
    assert "mallory is not an approver" in stranger.json()["error"]["message"]
    no_reason = agac("reject", pid, "--as", "ann", cwd=tmp_path)
    assert no_reason.code == 2 and "--reason" in no_reason.err
    assert agac("reject", pid, "--as", "ann", "--reason", "too curt", cwd=tmp_path).code == 0
    replayed = agac("approve", pid, "--as", "bob", cwd=tmp_path)
    assert replayed.code == 2 and "replayed" in replayed.err
    unknown = agac("approve", "ffffffff", "--as", "bob", cwd=tmp_path)
    assert unknown.code == 2 and "agac approvals list" in unknown.err
