"""The newcomer's path: ``agac status`` says when a run marked ``running`` has no live
process (its lease's holder was killed), and how to resume it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from crash_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: slow
input: {path: data/, id_field: id}
defaults: {model: mock/m}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""


def test_i43_6_status_says_a_running_run_has_no_live_process(tmp_path: Path) -> None:
    write_project(
        tmp_path,
        WORKFLOW,
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t {i}"} for i in range(6)]},
    )
    killed = agac(tmp_path, {"AGAC_CRASH_AT": "after_checkpoint:1"}, "run", "slow")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    status = agac(tmp_path, {}, "status", "slow", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["state"] == "running"
    assert doc["process"]["live"] is False and doc["process"]["pid"] is not None, doc
    text = agac(tmp_path, {}, "status", "slow")
    assert "no live process is running it" in text.stdout, text.stdout
    assert "`agac run slow` resumes it" in text.stdout
    resumed = agac(tmp_path, {}, "run", "slow")
    assert resumed.returncode == 0, resumed.stderr
    done = json.loads(agac(tmp_path, {}, "status", "slow", "--json").stdout)
    assert done["state"] == "succeeded" and "process" not in done
