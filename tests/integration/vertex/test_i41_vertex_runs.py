"""Vertex AI (Gemini) batches through ``agac run`` as a user runs it: the console command in
a process of its own, its environment the one ``RunningEmulator.vertex_env`` gives (a
service account key whose token endpoint and Cloud Storage are the emulator's), against
the emulator's Vertex routes over loopback. The emulator's clock is held: jobs move only
when the test advances it, so nothing hangs on the machine's speed.

A file split into jobs by ``batch_max_records`` (B1) with one job ending
``JOB_STATE_PARTIALLY_SUCCEEDED`` (its unanswered records sent again in a job of their
own and answered, B6), a create refused 429 for the project's quota of concurrent jobs
waited out (an emulator fault that clears: B12), and jobs that end ``FAILED`` or
``EXPIRED`` failing their records with a reason that ``agac status`` and ``agac export``
show. Every record is answered once, and the ledger is what the emulator billed: one call
per answer, and the tokens of the answers the jobs wrote to Cloud Storage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from vertex_support import BUCKET, MODEL

from agac.errors import ConfigError
from agac.testing import write_project

WORKFLOW = "vtx"


def _project(root: Path, prefix: str, files: dict[str, int], **options: Any) -> None:
    agac_yml = "providers:\n  vertex: " + json.dumps({"batch_bucket": prefix, **options}) + "\n"
    workflow = "\n".join(
        [
            f"name: {WORKFLOW}",
            "input: {path: data/, id_field: id}",
            "defaults:",
            f"  model: vertex/{MODEL}",
            "  run_mode: batch",
            "  max_tokens: 64",
            "  retry: {max_attempts: 2, backoff: {initial: 10ms, max: 20ms}}",
            "actions:",
            "  - name: classify",
            '    prompt: "Classify: {{ source.text }}"',
            (
                "    schema: {type: object, properties: {label: {type: string, enum: [a, b]}},"
                " required: [label], additionalProperties: false}"
            ),
        ]
    )
    data = {
        f"data/{stem}.jsonl": [{"id": f"{stem}{i}", "text": f"item {stem}{i}"} for i in range(n)]
        for stem, n in files.items()
    }
    write_project(root, workflow + "\n", data=data, agac_yml=agac_yml)


def _agac(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agac ARGS`` in ``root`` as a process of its own, in this test's environment (the
    emulator's variables and the Vertex user's, set by the fixtures)."""
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,  # a guard against a hang only
        check=False,
    )


def _run(root: Path) -> dict[str, Any]:
    done = _agac(root, "run", WORKFLOW, "--json")
    assert done.stdout, done.stderr
    return {"code": done.returncode, **json.loads(done.stdout)}


def _jobs(emulator: Any) -> list[dict[str, Any]]:
    return [b for b in emulator.stats()["batches"] if b["provider"] == "vertex"]


def _states(emulator: Any) -> list[str]:
    return sorted(
        str(emulator.state.status_names["vertex"](b, emulator.state.phase(b)))
        for b in emulator.state.batches.values()
        if b.provider == "vertex"
    )


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    done = _agac(root, "export", WORKFLOW, "--action", "classify", "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    return {r["key"]: r for r in map(json.loads, done.stdout.splitlines())}


def _ledger(root: Path) -> dict[str, int]:
    done = _agac(root, "cost", WORKFLOW, "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    return {
        "calls": sum(int(r["calls"]) for r in rows),
        "input_tokens": sum(int(r["input_tokens"]) for r in rows),
        "output_tokens": sum(int(r["output_tokens"]) for r in rows),
    }


def _billed(emulator: Any) -> dict[str, int]:
    """What the emulator's jobs answered, read from the output they wrote: one call and
    its usage per line with a response."""
    calls = prompt = output = 0
    for name, (data, _) in emulator.state.objects.items():
        if not name.startswith(f"{BUCKET}/") or not name.endswith("predictions.jsonl"):
            continue
        for line in map(json.loads, data.splitlines()):
            usage = (line.get("response") or {}).get("usageMetadata")
            if usage is None or line.get("status"):
                continue
            calls += 1
            prompt += int(usage.get("promptTokenCount") or 0)
            output += int(usage.get("candidatesTokenCount") or 0)
            output += int(usage.get("thoughtsTokenCount") or 0)
    return {"calls": calls, "input_tokens": prompt, "output_tokens": output}


@pytest.fixture
def project(tmp_path: Path, gcp: Any, emulator: Any) -> Path:
    emulator.hold_clock()  # jobs move only when the test advances them
    root = tmp_path / "proj"
    root.mkdir()
    return root


def test_i41_vertex_run_b1_split_into_jobs_one_partially_succeeded_resent_once(
    project: Path, prefix: str, emulator: Any
) -> None:
    """100 records at most 40 a job: three jobs. The second ends PARTIALLY_SUCCEEDED with
    25 of its 40 answered; the 15 it left go again in a job of their own (B6). Every
    record is answered once, and the ledger is the emulator's bill."""
    _project(project, prefix, {"a": 100}, batch_max_records=40)
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "nth": 2,
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 25},
        }
    )
    first = _run(project)
    assert first["code"] == 75, first
    assert sorted(j["requests"] for j in _jobs(emulator)) == [20, 40, 40]
    emulator.advance(3600)
    second = _run(project)
    assert second["code"] == 75, second  # the job of the 15 records left unanswered
    assert _states(emulator) == [
        "JOB_STATE_PARTIALLY_SUCCEEDED",
        "JOB_STATE_PENDING",
        "JOB_STATE_SUCCEEDED",
        "JOB_STATE_SUCCEEDED",
    ]
    assert sorted(j["requests"] for j in _jobs(emulator)) == [15, 20, 40, 40]
    emulator.advance(3600)
    done = _run(project)
    assert done["code"] == 0, done
    assert done["actions"]["classify"]["answered"] == 100
    rows = _rows(project)
    assert len(rows) == 100 and {r["status"] for r in rows.values()} == {"answered"}
    stats = emulator.stats()
    assert stats["answered"] == 100 and stats["duplicate_answers"] == 0
    assert stats["requests"]["vertex"]["batch.create"] == 4
    assert "generate" not in stats["requests"]["vertex"]  # nothing went live
    billed = _billed(emulator)
    assert billed["calls"] == 100
    assert _ledger(project) == billed


def test_i41_vertex_run_b12_quota_refusal_on_create_waited_out(
    project: Path, prefix: str, emulator: Any
) -> None:
    """The project's quota of concurrent jobs refuses the create twice (429): the run
    waits as the provider asks (no attempt spent, the file never refused), creates the
    job once the refusals stop, and its records are answered once."""
    _project(project, prefix, {"a": 12})
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "times": 2,
            "fault": {"http": 429, "retry_after": 0.01, "message": "Quota exceeded"},
        }
    )
    first = _run(project)
    assert first["code"] == 75, first
    assert emulator.stats()["requests"]["vertex"]["batch.create"] == 3
    assert len(_jobs(emulator)) == 1
    events = _agac(project, "events", WORKFLOW, "--json")
    waits = [
        e["data"]
        for e in json.loads(events.stdout)
        if e["kind"] == "waiting" and e["data"]["reason"] == "provider_limit"
    ]
    assert [w["seconds"] for w in waits] == [0.01, 0.01]  # as long as Vertex asked
    emulator.advance(3600)
    done = _run(project)
    assert done["code"] == 0, done
    rows = _rows(project)
    assert len(rows) == 12 and {r["status"] for r in rows.values()} == {"answered"}
    assert emulator.stats()["duplicate_answers"] == 0
    assert _ledger(project) == _billed(emulator)


def test_i41_vertex_run_failed_and_expired_jobs_fail_their_records_with_reasons(
    project: Path, prefix: str, emulator: Any
) -> None:
    """The job of a.jsonl ends FAILED and that of b.jsonl EXPIRED with nothing answered:
    nothing is read from them (B7), their records fail ``batch_failed`` and
    ``batch_expired`` (the job's state in the detail), counted in ``agac status`` and
    given as each row's reason in ``agac export``; nothing was billed, nothing is in the
    ledger."""
    _project(project, prefix, {"a": 5, "b": 4})
    for nth, end in ((1, "failed"), (2, "expired")):
        emulator.add_fault(
            {
                "provider": "vertex",
                "op": "batch.create",
                "nth": nth,
                "times": 1,
                "fault": {"batch_end": end},
            }
        )
    first = _run(project)
    assert first["code"] == 75, first
    emulator.advance(3600)
    ended = _run(project)
    assert ended["code"] == 1, ended
    assert ended["actions"]["classify"]["reasons"] == {"batch_failed": 5, "batch_expired": 4}
    rows = _rows(project)
    assert len(rows) == 9 and {r["status"] for r in rows.values()} == {"failed"}
    assert {k: r["reason"] for k, r in rows.items()} == {
        **{f"a{i}": "batch_failed" for i in range(5)},
        **{f"b{i}": "batch_expired" for i in range(4)},
    }
    assert "JOB_STATE_FAILED" in rows["a0"]["detail"]
    assert "JOB_STATE_EXPIRED" in rows["b0"]["detail"]
    status = _agac(project, "status", WORKFLOW, "--json")
    said = json.loads(status.stdout)["actions"]["classify"]
    assert (said["failed"], said["reasons"]) == (9, {"batch_failed": 5, "batch_expired": 4})
    plain = _agac(project, "status", WORKFLOW).stdout
    assert "batch_failed" in plain and "batch_expired" in plain, plain
    assert emulator.stats()["answered"] == 0
    assert _ledger(project)["calls"] == 0


def test_i41_vertex_run_batch_max_records_above_vertex_limit_is_refused(vertex: Any) -> None:
    """A job of more than the 200,000 records Vertex takes would fail at Vertex: the
    setting is refused when the adapter starts, naming it."""
    with pytest.raises(ConfigError) as caught:
        vertex(batch_max_records=200_001)
    problem = caught.value.problems[0]
    assert "batch_max_records (200001)" in problem.message and "200,000" in problem.message
    assert "batch_max_records" in str(problem.hint)
    assert vertex(batch_max_records=200_000).max_records == 200_000
