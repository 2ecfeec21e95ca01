"""Approvals (A1) hold in worker mode: a worker proposes and waits, acts on nothing until
a person decides, and a decision wakes the run's shards at once (NOTIFY)."""

from __future__ import annotations

import json
from pathlib import Path

from workers_support import agac, finish, start_worker, status, wait_for

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
    approval: {approvers: [support-leads], expires_in: 24h}
"""

TOOLS = """\
def send(inputs, ctx):
    with open("sent.log", "a") as f:
        f.write(inputs["source"]["id"] + "\\n")
    return {"sent": inputs["source"]["id"]}
"""


def test_a1_worker_waits_for_approval_and_a_decision_wakes_it(
    tmp_path: Path, fresh_pg_database: str
) -> None:
    write_project(
        tmp_path,
        WF,
        workflow_file="workflows/replies.yml",
        agac_yml="groups:\n  support-leads: [ann]\n",
        data={
            "data/a.jsonl": [
                {"id": "c1", "text": "late parcel"},
                {"id": "c2", "text": "wrong size"},
            ]
        },
        files={"tools/__init__.py": "", "tools/mail.py": TOOLS},
    )
    env = {"AGAC_STORE": fresh_pg_database}
    run_id = json.loads(agac(tmp_path, env, "submit", "replies", "--json").stdout)["run_id"]
    # a long poll: only the decision's NOTIFY can wake the worker in time
    w = start_worker(tmp_path, env, "--poll", "60", "--exit-when-done")

    def proposed() -> list[dict[str, object]]:
        done = agac(tmp_path, env, "approvals", "list", "replies", "--json")
        return list(json.loads(done.stdout)) if done.returncode == 0 else []

    wait_for(lambda: len(proposed()) == 2, 240, "two proposals", every=0.5)
    assert not (tmp_path / "sent.log").exists()  # nothing acted before a decision
    assert status(tmp_path, env, run_id)["actions"]["send"]["pending"] == 2
    for p in proposed():
        ok = agac(tmp_path, env, "approve", str(p["id"]), "--as", "ann")
        assert ok.returncode == 0, ok.stderr
    finish(w, timeout=240)
    assert status(tmp_path, env, run_id)["state"] == "succeeded"
    assert sorted((tmp_path / "sent.log").read_text().split()) == ["c1", "c2"]
