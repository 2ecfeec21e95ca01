"""Bedrock batches through ``agac run``: the engine with the adapter, the emulator's
control plane and moto's S3 over loopback. A file split into jobs by the records-per-job
quota (B1) with none left below the minimum, one job partially completed (its missing
records sent again, B6), a file below the minimum sent live or held, and a create refused
for the job quota waited out (B12) — every record answered once, nothing billed twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bedrock_support import MODEL, ROLE

from agac import api
from agac.testing import write_project

WORKFLOW = "bed"


def _project(root: Path, prefix: str, files: dict[str, int], **options: Any) -> None:
    settings = {"batch_bucket": prefix, "role_arn": ROLE, **options}
    agac_yml = "providers:\n  bedrock: " + json.dumps(settings) + "\n"
    workflow = "\n".join(
        [
            f"name: {WORKFLOW}",
            "input: {path: data/, id_field: id}",
            "defaults:",
            f"  model: bedrock/{MODEL}",
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


def _run(root: Path) -> Any:
    return api.run(WORKFLOW, root)


def _ops(emulator: Any) -> dict[str, int]:
    return dict(emulator.stats()["requests"].get("bedrock", {}))


def _jobs(emulator: Any) -> list[dict[str, Any]]:
    return [b for b in emulator.stats()["batches"] if b["provider"] == "bedrock"]


def _answered(root: Path) -> dict[str, str]:
    return {
        r["key"]: r["status"] for r in api.export_rows(WORKFLOW, "classify", root, run_ref=None)
    }


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aws: Any, emulator: Any) -> Path:
    emulator.hold_clock()  # jobs move only when the test advances them
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def test_bedrock_b1_split_by_max_records_none_below_minimum_one_partially_completed(
    project: Path, prefix: str, emulator: Any
) -> None:
    """1,050 records with a quota of 500 a job: 500, 450 and 100 (the last job takes
    records from the one before rather than fall below the minimum). The second job ends
    PartiallyCompleted with 300 processed: its 150 missing records go again in a retry
    job (B6). Every record is answered once; the ledger holds one call per answer the
    emulator billed."""
    _project(project, prefix, {"a": 1050}, batch_max_records=500)
    emulator.add_fault(
        {
            "provider": "bedrock",
            "op": "batch.create",
            "nth": 2,
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 300},
        }
    )
    first = _run(project)
    assert first.exit_code == 75, first.notes
    assert sorted(j["requests"] for j in _jobs(emulator)) == [100, 450, 500]
    emulator.advance(3600)
    second = _run(project)
    assert second.exit_code == 75, second.notes  # the retry job of the missing records
    assert sorted(j["status"] for j in _jobs(emulator)) == [
        "Completed",
        "Completed",
        "PartiallyCompleted",
        "Scheduled",
    ]
    assert sorted(j["requests"] for j in _jobs(emulator)) == [100, 150, 450, 500]
    emulator.advance(3600)
    done = _run(project)
    assert done.exit_code == 0, done.notes
    rows = _answered(project)
    assert len(rows) == 1050 and set(rows.values()) == {"answered"}
    stats = emulator.stats()
    assert stats["duplicate_answers"] == 0 and stats["answered"] == 1050
    assert _ops(emulator)["batch.create"] == 4 and "chat" not in _ops(emulator)
    cost = api.cost(WORKFLOW, project)
    assert sum(r["calls"] for r in cost["rows"]) == 1050


def test_bedrock_file_below_minimum_goes_live(project: Path, prefix: str, emulator: Any) -> None:
    """``below_minimum: live`` (the default): a file of 30 records is answered by live
    Converse calls; the file of 120 goes as a job."""
    _project(project, prefix, {"a": 120, "b": 30})
    first = _run(project)
    assert first.exit_code == 75, first.notes
    assert [j["requests"] for j in _jobs(emulator)] == [120]
    assert _ops(emulator)["chat"] == 30
    below = [e for e in api.events(WORKFLOW, project) if e["kind"] == "batch_below_minimum"]
    assert len(below) == 1 and below[0]["data"]["requests"] == 30
    emulator.advance(3600)
    done = _run(project)
    assert done.exit_code == 0, done.notes
    assert set(_answered(project).values()) == {"answered"} and len(_answered(project)) == 150
    assert emulator.stats()["duplicate_answers"] == 0


def test_bedrock_file_below_minimum_waits_when_asked(
    project: Path, prefix: str, emulator: Any
) -> None:
    """``below_minimum: wait``: the file stays unsent and the run waits, naming it and
    the setting; nothing of it is sent live."""
    _project(project, prefix, {"a": 40}, below_minimum="wait")
    first = _run(project)
    assert first.exit_code == 75
    said = " ".join(first.notes)
    assert (
        "a.jsonl has 40 requests left to send, fewer than the 100" in said
        and "below_minimum" in said
    )
    assert "chat" not in _ops(emulator) and not _jobs(emulator)
    again = _run(project)
    assert again.exit_code == 75 and not _jobs(emulator)


def test_bedrock_b12_job_quota_refusal_waits_then_creates(
    project: Path, prefix: str, emulator: Any
) -> None:
    """The account's quota of jobs in flight refuses a create: the run waits (no attempt
    spent, the file never refused) and creates the job once there is room."""
    _project(project, prefix, {"a": 100})
    emulator.add_fault(
        {
            "provider": "bedrock",
            "op": "batch.create",
            "times": 1,
            "fault": {
                "http": 400,
                "code": "ServiceQuotaExceededException",
                "retry_after": 1,
                "message": "Too many batch inference jobs in progress",
            },
        }
    )
    first = _run(project)
    assert first.exit_code == 75, first.notes
    assert _ops(emulator)["batch.create"] == 2 and len(_jobs(emulator)) == 1
    waits = [e for e in api.events(WORKFLOW, project) if e["kind"] == "waiting"]
    assert waits and waits[0]["data"]["reason"] == "provider_limit"
    emulator.advance(3600)
    assert _run(project).exit_code == 0


def _below(root: Path) -> list[dict[str, Any]]:
    return [e["data"] for e in api.events(WORKFLOW, root) if e["kind"] == "batch_below_minimum"]


def test_i41_jobs_rebalanced_when_the_quota_is_below_twice_the_minimum(
    project: Path, prefix: str, emulator: Any
) -> None:
    """At most 120 records a job and at least 100: 530 records go as jobs of 120, 110,
    100, 100 and 100 — the jobs before the last each give it what they can spare — and
    every job is one Bedrock takes (none fails its validation)."""
    _project(project, prefix, {"a": 530}, batch_max_records=120)
    first = _run(project)
    assert first.exit_code == 75, first.notes
    assert sorted(j["requests"] for j in _jobs(emulator)) == [100, 100, 100, 110, 120]
    assert not _below(project) and "chat" not in _ops(emulator)
    emulator.advance(3600)
    done = _run(project)
    assert done.exit_code == 0, done.notes
    assert {j["status"] for j in _jobs(emulator)} == {"Completed"}
    rows = _answered(project)
    assert len(rows) == 530 and set(rows.values()) == {"answered"}
    assert emulator.stats()["duplicate_answers"] == 0


def test_i41_remainder_that_makes_no_job_goes_live_never_a_refused_job(
    project: Path, prefix: str, emulator: Any
) -> None:
    """250 records at 100 to 120 a job make no set of jobs: two jobs of 120 go, and the
    10 left are sent as live Converse calls (``below_minimum: live``) rather than as a job
    Bedrock would fail. Every record is answered once; the ledger holds one call each."""
    _project(project, prefix, {"a": 250}, batch_max_records=120)
    first = _run(project)
    assert first.exit_code == 75, first.notes
    assert [j["requests"] for j in _jobs(emulator)] == [120, 120]
    assert _ops(emulator)["chat"] == 10
    below = _below(project)
    assert [b["requests"] for b in below] == [10]
    emulator.advance(3600)
    done = _run(project)
    assert done.exit_code == 0, done.notes
    rows = _answered(project)
    assert len(rows) == 250 and set(rows.values()) == {"answered"}
    assert emulator.stats()["duplicate_answers"] == 0 and emulator.stats()["answered"] == 250
    assert sum(r["calls"] for r in api.cost(WORKFLOW, project)["rows"]) == 250


def test_i41_remainder_that_makes_no_job_waits_when_asked(
    project: Path, prefix: str, emulator: Any
) -> None:
    """With ``below_minimum: wait`` the two jobs go and the 10 left stay unsent: the run
    waits, naming them, the file and the setting; nothing is sent live."""
    _project(project, prefix, {"a": 250}, batch_max_records=120, below_minimum="wait")
    first = _run(project)
    assert first.exit_code == 75, first.notes
    assert [j["requests"] for j in _jobs(emulator)] == [120, 120]
    said = " ".join(first.notes)
    assert "a.jsonl has 10 requests left to send, fewer than the 100" in said, said
    assert "below_minimum" in said and "chat" not in _ops(emulator)


def test_i41_missing_records_below_the_minimum_go_live_not_as_a_retry_job(
    project: Path, prefix: str, emulator: Any
) -> None:
    """A job of 200 ends PartiallyCompleted with 160 processed: the 40 it did not process
    are fewer than a job takes, so they are sent again as live calls (B6), never as a
    retry job of 40 that Bedrock would fail."""
    _project(project, prefix, {"a": 200})
    emulator.add_fault(
        {
            "provider": "bedrock",
            "op": "batch.create",
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 160},
        }
    )
    assert _run(project).exit_code == 75
    emulator.advance(3600)
    done = _run(project)
    assert done.exit_code == 0, done.notes
    assert [(j["requests"], j["status"]) for j in _jobs(emulator)] == [(200, "PartiallyCompleted")]
    assert _ops(emulator)["chat"] == 40 and _ops(emulator)["batch.create"] == 1
    assert [b["requests"] for b in _below(project)] == [40]
    rows = _answered(project)
    assert len(rows) == 200 and set(rows.values()) == {"answered"}
    assert emulator.stats()["duplicate_answers"] == 0 and emulator.stats()["answered"] == 200
    assert sum(r["calls"] for r in api.cost(WORKFLOW, project)["rows"]) == 200
