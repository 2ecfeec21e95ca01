"""Claude on Vertex AI crash tests: ``agac run`` SIGKILLed while a Claude batch prediction
job is being created (before the create, and after Vertex accepted it but before the store
recorded it) and while its output is being read. The rerun finds the job by its display
name: never a second job, every record answered once, nothing ledgered twice. Against the
emulator's Vertex routes, token endpoint and Cloud Storage on loopback."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path

from crash_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

BUCKET = "agac-vertex-claude-crash"
WF = """
name: vclcrash
input: {path: data/, id_field: id}
defaults:
  model: vertex/claude-sonnet-4-5@20250929
  run_mode: batch
  max_tokens: 64
  retry: {max_attempts: 2}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema: {type: object, properties: {label: {enum: [a, b, c]}}, required: [label]}
"""


def _project(root: Path, records: int) -> None:
    prefix = f"gs://{BUCKET}/crash-{uuid.uuid4().hex[:8]}"
    agac_yml = f"providers:\n  vertex: {{batch_bucket: {prefix}}}\n"
    rows = {"data/a.jsonl": [{"id": f"r{j}", "text": f"t{j}"} for j in range(records)]}
    write_project(root, WF, workflow_file="vclcrash.yml", data=rows, agac_yml=agac_yml)


def _jobs(emu: RunningEmulator) -> list[dict[str, object]]:
    return [b for b in emu.stats()["batches"] if b["provider"] == "vertex"]


def _env(emu: RunningEmulator, folder: Path) -> dict[str, str]:
    folder.mkdir(exist_ok=True)
    return {**emu.env(), **emu.vertex_env(folder)}


def test_i41_vertex_claude_sigkill_during_job_creation_never_creates_it_twice(
    tmp_path: Path,
) -> None:
    for point in ("before_submit:1", "after_submit:1"):
        root = tmp_path / point.replace(":", "_")
        _project(root, 30)
        with RunningEmulator(batch_seconds=60) as emu:
            emu.hold_clock()
            env = _env(emu, tmp_path / "gcp")
            crashed = agac(root, {**env, "AGAC_CRASH_AT": point}, "run", "vclcrash")
            assert crashed.returncode == -signal.SIGKILL
            assert len(_jobs(emu)) == (1 if point.startswith("after") else 0)
            first = agac(root, env, "run", "vclcrash", "--json")
            assert first.returncode == 75, first.stderr
            emu.advance(120)
            done = agac(root, env, "run", "vclcrash", "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["actions"]["classify"]["answered"] == 30
            stats = emu.stats()
            [job] = _jobs(emu)  # found again by its name, never created twice
            assert job["status"] == "JOB_STATE_SUCCEEDED" and job["requests"] == 30
            assert stats["requests"]["vertex"]["batch.create"] == 1
            assert stats["duplicate_answers"] == 0 and stats["answered"] == 30
            cost = json.loads(agac(root, env, "cost", "vclcrash", "--json").stdout)
            assert sum(r["calls"] for r in cost["rows"]) == 30


def test_i41_vertex_claude_sigkill_while_reading_job_output_reads_nothing_twice(
    tmp_path: Path,
) -> None:
    _project(tmp_path, 1100)
    with RunningEmulator(batch_seconds=60) as emu:
        emu.hold_clock()
        env = _env(emu, tmp_path / "gcp")
        assert agac(tmp_path, env, "run", "vclcrash").returncode == 75
        emu.advance(120)
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": "mid_ingest:1"}, "run", "vclcrash")
        assert crashed.returncode == -signal.SIGKILL
        done = agac(tmp_path, env, "run", "vclcrash", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["actions"]["classify"]["answered"] == 1100
        cost = json.loads(agac(tmp_path, env, "cost", "vclcrash", "--json").stdout)
        assert sum(r["calls"] for r in cost["rows"]) == 1100  # none ledgered twice
        assert emu.stats()["requests"]["vertex"]["batch.create"] == 1
        assert emu.stats()["duplicate_answers"] == 0
