"""Issue 35 item 11, "A batch left out for good": a SIGKILL at each point of the collect
path — mid-read, after the last result is stored but before the batch is marked collected,
right after it is marked — leaves nothing out: the next run marks a batch whose items are
all settled collected, ends "succeeded" with no batch reported out, and `agac retry` is
not refused because of it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from crash_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: bleft
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch, retry: {max_attempts: 1}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""


@pytest.mark.parametrize(
    ("point", "records"),
    [("mid_ingest:1", 1001), ("before_collected:1", 3), ("after_collected:1", 3)],
)
def test_i35_11_a_crash_in_the_collect_path_leaves_no_batch_out(
    tmp_path: Path, point: str, records: int
) -> None:
    rows = {"data/a.jsonl": [{"id": f"r{j}", "text": f"t{j}"} for j in range(records)]}
    write_project(tmp_path, WF, workflow_file="bleft.yml", data=rows)
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()  # batches progress only when advanced
        env = emu.env()
        assert agac(tmp_path, env, "run", "bleft").returncode == 75
        emu.advance(120)
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "bleft")
        assert crashed.returncode == -signal.SIGKILL
        done = agac(tmp_path, env, "run", "bleft", "--json")
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["state"] == "succeeded"
        assert summary["actions"]["classify"]["answered"] == records
        assert summary["actions"]["classify"]["batches_out"] == 0  # nothing reported out
        batches = json.loads(agac(tmp_path, env, "batch", "list", "--json").stdout)
        assert [b["state"] for b in batches] == ["collected"], batches
        retried = agac(tmp_path, env, "retry", "bleft", "--dry-run", "--json")
        assert retried.returncode == 0, retried.stderr  # not refused for a batch "still out"
        assert json.loads(retried.stdout)["units"] == []
        cost = json.loads(agac(tmp_path, env, "cost", "bleft", "--json").stdout)
        assert sum(r["calls"] for r in cost["rows"]) == records  # nothing ledgered twice
        assert emu.stats()["requests"]["openai"]["batch.create"] == 1
