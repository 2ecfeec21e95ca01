"""A1-A3 crash tests: SIGKILL (AGAC_CRASH_AT) after a proposal is stored, after a decision
is stored, after an approved unit starts acting, and after an approved effect happened.
The next run loses nothing, asks nothing twice and never acts twice on one approval."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from agac.testing import write_project

WF = """
name: ap
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 1}
actions:
  - name: draft
    prompt: "Reply to {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [draft]
    max_concurrency: 1
    function: tools.mail:send
    effect: {idempotent: false}
    approval: {approvers: [leads]}
"""

TOOLS = """
import json

def send(inputs, ctx):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"key": ctx.idempotency_key, "record": ctx.record_key}) + "\\n")
    return {"sent": inputs["source"]["id"]}
"""


def _project(root: Path, n: int = 3) -> None:
    write_project(
        root,
        WF,
        workflow_file="ap.yml",
        agac_yml="groups:\n  leads: [ann, bob]\n",
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t {i}"} for i in range(n)]},
        files={"tools/__init__.py": "", "tools/mail.py": TOOLS},
    )


def _agac(root: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    if crash:
        env["AGAC_CRASH_AT"] = crash
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _calls(root: Path) -> list[dict[str, str]]:
    log = root / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _proposals(root: Path, every: bool = False) -> list[dict]:
    out = _agac(root, "approvals", "list", "ap", "--json", *(["--all"] if every else []))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _approve_all(root: Path) -> None:
    for p in _proposals(root):
        done = _agac(root, "approve", p["id"], "--as", "ann")
        assert done.returncode == 0, done.stderr


def test_a1_sigkill_after_a_proposal_is_stored(tmp_path: Path) -> None:
    _project(tmp_path, 5)
    crashed = _agac(tmp_path, "run", "ap", "--json", crash="approval_proposed:3")
    assert crashed.returncode == -signal.SIGKILL
    stored = _proposals(tmp_path)
    assert len(stored) == 3
    resumed = _agac(tmp_path, "run", "ap", "--json")
    assert resumed.returncode == 75, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["state"] == "awaiting_approval" and summary["actions"]["send"]["pending"] == 5
    listed = _proposals(tmp_path, every=True)
    assert len(listed) == 5 and sorted(p["record"] for p in listed) == [f"r{i}" for i in range(5)]
    assert {p["id"] for p in stored} <= {p["id"] for p in listed}  # reused, not asked again
    _approve_all(tmp_path)
    done = _agac(tmp_path, "run", "ap", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(c["record"] for c in _calls(tmp_path)) == [f"r{i}" for i in range(5)]


def test_a2_sigkill_after_a_decision_is_stored(tmp_path: Path) -> None:
    _project(tmp_path)
    assert _agac(tmp_path, "run", "ap").returncode == 75
    first = _proposals(tmp_path)[0]
    crashed = _agac(tmp_path, "approve", first["id"], "--as", "ann", crash="approval_decided:1")
    assert crashed.returncode == -signal.SIGKILL
    again = _agac(tmp_path, "approve", first["id"], "--as", "bob")
    assert again.returncode == 2 and "replayed" in again.stderr and "by ann" in again.stderr
    resumed = _agac(tmp_path, "run", "ap", "--json")
    assert resumed.returncode == 75, resumed.stderr
    assert [c["record"] for c in _calls(tmp_path)] == [first["record"]]
    _approve_all(tmp_path)
    assert _agac(tmp_path, "run", "ap").returncode == 0
    calls = _calls(tmp_path)
    assert len(calls) == 3 and len({c["key"] for c in calls}) == 3


def test_a3_sigkill_after_an_approved_unit_starts_acting(tmp_path: Path) -> None:
    _project(tmp_path)
    assert _agac(tmp_path, "run", "ap").returncode == 75
    _approve_all(tmp_path)
    crashed = _agac(tmp_path, "run", "ap", "--json", crash="approval_acting:2")
    assert crashed.returncode == -signal.SIGKILL
    before = len(_calls(tmp_path))  # the second unit recorded its use, then died
    assert before <= 1
    resumed = _agac(tmp_path, "run", "ap", "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["state"] == "succeeded" and summary["actions"]["send"]["answered"] == 3
    calls = _calls(tmp_path)
    assert sorted(c["record"] for c in calls) == ["r0", "r1", "r2"]  # each acted once
    listed = _proposals(tmp_path, every=True)
    assert len(listed) == 3 and {p["state"] for p in listed} == {"approved"}
    assert len({p["used_by"] for p in listed}) == 1


def test_a3_sigkill_after_an_approved_effect_happened(tmp_path: Path) -> None:
    _project(tmp_path)
    assert _agac(tmp_path, "run", "ap").returncode == 75
    _approve_all(tmp_path)
    crashed = _agac(tmp_path, "run", "ap", "--json", crash="effect_called:2")
    assert crashed.returncode == -signal.SIGKILL
    hit = _calls(tmp_path)[-1]
    resumed = _agac(tmp_path, "run", "ap", "--json")
    assert resumed.returncode == 75, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (
        summary["effects_unknown"] == [hit["key"].partition(":")[2]]
        and "awaiting_approval" not in summary
    )
    assert _proposals(tmp_path) == []  # the approval was used: nobody is asked again
    assert len(_calls(tmp_path)) == 3  # the unknown effect was not called again
    assert (
        _agac(
            tmp_path, "effects", "resolve", hit["key"].partition(":")[2][:12], "--done"
        ).returncode
        == 0
    )
    final = _agac(tmp_path, "run", "ap", "--json")
    assert final.returncode == 0, final.stderr
    calls = _calls(tmp_path)
    assert len(calls) == 3 and len({c["key"] for c in calls}) == 3
