"""SIGKILL at lifecycle points (after admission, before finalization) and just before an
effect is called: the next run ends with every unit accounted for (S4), pays for no answer
twice, and never calls a non-idempotent effect whose outcome it cannot know."""

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
name: life
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [classify]
    max_concurrency: 1
    function: tools.fx:send
    effect: {idempotent: false}
"""

TOOLS = """
import json

def send(inputs, ctx):
    with open("calls.log", "a") as f:
        f.write(json.dumps({"key": ctx.idempotency_key}) + "\\n")
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


def _project(root: Path) -> None:
    write_project(
        root,
        WF,
        workflow_file="life.yml",
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t {i}"} for i in range(8)]},
        files={"tools/__init__.py": "", "tools/fx.py": TOOLS},
    )


def _calls(root: Path) -> int:
    log = root / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.parametrize("point", ["after_admit:1", "before_finalize:1"])
def test_s4_sigkill_at_a_lifecycle_point_loses_nothing(tmp_path: Path, point: str) -> None:
    _project(tmp_path)
    crashed = _agac(tmp_path, "run", "life", "--json", env={"AGAC_CRASH_AT": point})
    assert crashed.returncode == -signal.SIGKILL
    resumed = _agac(tmp_path, "run", "life", "--json")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["state"] == "succeeded"
    for a in summary["actions"].values():
        assert a["answered"] == 8 and a["pending"] == 0
    assert summary["actions"]["classify"]["calls"] == 8  # nothing asked twice
    assert _calls(tmp_path) == 8  # every effect once


def test_e2_sigkill_after_the_intent_before_the_call_is_unknown(tmp_path: Path) -> None:
    _project(tmp_path)
    crashed = _agac(tmp_path, "run", "life", "--json", env={"AGAC_CRASH_AT": "effect_started:2"})
    assert crashed.returncode == -signal.SIGKILL
    assert _calls(tmp_path) == 1
    resumed = _agac(tmp_path, "run", "life", "--json")
    assert resumed.returncode == 75, resumed.stderr
    summary = json.loads(resumed.stdout)
    (key,) = summary["effects_unknown"]
    assert _calls(tmp_path) == 7  # the unknown one is not called: agac cannot know
    assert _agac(tmp_path, "effects", "resolve", key, "--not-done").returncode == 0
    final = _agac(tmp_path, "run", "life", "--json")
    assert final.returncode == 0, final.stderr
    assert _calls(tmp_path) == 8
    for a in json.loads(final.stdout)["actions"].values():
        assert a["answered"] == 8 and a["pending"] == 0
