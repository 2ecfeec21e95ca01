"""E2 crash tests: SIGKILL between an effect's intent and its receipt (``effect_called``).
A non-idempotent effect is then never called again automatically: the run waits on a
person (exit 75) until ``agac effects resolve``; an idempotent one is called again with
the same idempotency key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agac.testing import write_project

WF = """
name: fx
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 1}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [classify]
    max_concurrency: 1
    function: tools.fx:send
    effect: {idempotent: IDEMPOTENT}
"""

TOOLS = """
import json

def send(inputs, ctx):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"key": ctx.idempotency_key, "record": ctx.record_key}) + "\\n")
    return {"sent": inputs["source"]["id"]}
"""


def _agac(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        check=False,
        cwd=root,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _calls(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "calls.log").read_text().splitlines()]


@pytest.mark.parametrize("idempotent", [False, True])
def test_e2_sigkill_between_effect_and_receipt(tmp_path: Path, idempotent: bool) -> None:
    write_project(
        tmp_path,
        WF.replace("IDEMPOTENT", str(idempotent).lower()),
        workflow_file="fx.yml",
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t {i}"} for i in range(6)]},
        files={"tools/__init__.py": "", "tools/fx.py": TOOLS},
    )
    crashed = _agac(tmp_path, "run", "fx", "--json", env={"AGAC_CRASH_AT": "effect_called:3"})
    assert crashed.returncode == -signal.SIGKILL
    assert len(_calls(tmp_path)) == 3
    hit = _calls(tmp_path)[-1]

    resumed = _agac(tmp_path, "run", "fx", "--json")
    if idempotent:
        assert resumed.returncode == 0, resumed.stderr
        log = _calls(tmp_path)
        assert len(log) == 7 and [c["key"] for c in log].count(hit["key"]) == 2
        assert len({c["key"] for c in log}) == 6  # never a different key for the same effect
        return
    assert resumed.returncode == 75, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["effects_unknown"] == [hit["key"].partition(":")[2]]
    assert summary["actions"]["send"]["pending"] == 1
    listed = json.loads(_agac(tmp_path, "effects", "list", "fx", "--json").stdout)
    assert [e["state"] for e in listed if e["key"] == hit["key"]] == ["unknown"]
    status = json.loads(_agac(tmp_path, "status", "fx", "--json").stdout)
    assert status["effects_unknown"] == [hit["key"].partition(":")[2]]
    assert len(_calls(tmp_path)) == 6  # the others ran; the unknown one was not called again
    resolved = _agac(tmp_path, "effects", "resolve", hit["key"].partition(":")[2][:12], "--done")
    assert resolved.returncode == 0, resolved.stderr
    final = _agac(tmp_path, "run", "fx", "--json")
    assert final.returncode == 0, final.stderr
    assert json.loads(final.stdout)["state"] == "succeeded"
    assert len(_calls(tmp_path)) == 6 and len({c["key"] for c in _calls(tmp_path)}) == 6
