"""Claude batches on Vertex AI through ``agac run``: the engine with the adapter, the
emulator's Vertex routes and Cloud Storage over loopback. A create refused for the
project's quota of Claude jobs is waited out (B12), one job ends PARTIALLY_SUCCEEDED and
another leaves a record out of its output (both sets of missing records sent again, B6):
every record is answered once, the input objects are gone, and the ledger equals what the
jobs' output bills, priced at Vertex's batch rate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from claude_support import CLAUDE
from vertex_support import BUCKET

from agac import api
from agac.providers.base import Usage
from agac.providers.pricing import PriceLibrary, cost_usd
from agac.testing import write_project

WORKFLOW = "vcl"


def _project(root: Path, prefix: str, files: dict[str, int], mode: str = "batch") -> None:
    agac_yml = "providers:\n  vertex: " + json.dumps({"batch_bucket": prefix}) + "\n"
    workflow = "\n".join(
        [
            f"name: {WORKFLOW}",
            "input: {path: data/, id_field: id}",
            "defaults:",
            f"  model: vertex/{CLAUDE}",
            f"  run_mode: {mode}",
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


def _jobs(emulator: Any) -> list[dict[str, Any]]:
    return [b for b in emulator.stats()["batches"] if b["provider"] == "vertex"]


def _billed(emulator: Any) -> dict[str, int]:
    """What the jobs' output says Vertex answered and billed, summed over every job."""
    total = {"records": 0, "input_tokens": 0, "output_tokens": 0}
    for key, (data, _) in emulator.state.objects.items():
        if key.startswith(f"{BUCKET}/") and key.endswith("predictions.jsonl"):
            for line in data.splitlines():
                usage = json.loads(line)["response"]["usage"]
                total["records"] += 1
                total["input_tokens"] += usage["input_tokens"]
                total["output_tokens"] += usage["output_tokens"]
    return total


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gcp: Any, emulator: Any) -> Path:
    emulator.hold_clock()  # jobs move only when the test advances them
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def test_i41_vertex_claude_run_quota_wait_partial_job_missing_record_ledger_is_the_bill(
    project: Path, prefix: str, emulator: Any
) -> None:
    _project(project, prefix, {"a": 30, "b": 20})
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "times": 1,
            "fault": {"http": 429, "retry_after": 1, "message": "Quota exceeded"},
        },
        {
            "provider": "vertex",
            "op": "batch.create",
            "nth": 2,
            "times": 1,
            "fault": {"batch_drop_records": 1},
        },
        {
            "provider": "vertex",
            "op": "batch.create",
            "nth": 3,
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 5},
        },
    )
    first = api.run(WORKFLOW, project)
    assert first.exit_code == 75, first.notes
    waits = [e for e in api.events(WORKFLOW, project) if e["kind"] == "waiting"]
    assert waits and waits[0]["data"]["reason"] == "provider_limit"
    assert sorted(j["requests"] for j in _jobs(emulator)) == [20, 30]
    emulator.advance(3600)
    second = api.run(WORKFLOW, project)
    assert second.exit_code == 75, second.notes  # the job of the missing records
    ended = {j["requests"]: j["status"] for j in _jobs(emulator)}
    assert ended[30] == "JOB_STATE_SUCCEEDED"  # with one record left out of its output
    assert ended[20] == "JOB_STATE_PARTIALLY_SUCCEEDED"  # 5 of 20 answered
    assert sorted(ended) == [1, 15, 20, 30]  # each file's missing records in a new job
    emulator.advance(3600)
    done = api.run(WORKFLOW, project)
    assert done.exit_code == 0, done.notes
    rows = list(api.export_rows(WORKFLOW, "classify", project, run_ref=None))
    assert len(rows) == 50 and {r["status"] for r in rows} == {"answered"}
    stats = emulator.stats()
    assert stats["duplicate_answers"] == 0 and stats["answered"] == 50
    assert stats["requests"]["vertex"]["batch.create"] == 5  # one refused, four jobs
    assert "chat" not in stats["requests"]["vertex"]
    inputs = [k for k in emulator.state.objects if k.endswith("/input/records.jsonl")]
    assert inputs == []  # deleted once each job ended
    bill = _billed(emulator)
    cost = api.cost(WORKFLOW, project)
    ledger = [r for r in cost["rows"] if r["provider"] == "vertex"]
    assert sum(r["calls"] for r in ledger) == bill["records"] == 50
    assert sum(r["input_tokens"] for r in ledger) == bill["input_tokens"]
    assert sum(r["output_tokens"] for r in ledger) == bill["output_tokens"]
    price = PriceLibrary(cache_dir=None).lookup("vertex", CLAUDE)
    assert price is not None
    usage = Usage(input_tokens=bill["input_tokens"], output_tokens=bill["output_tokens"])
    expected = cost_usd(price, usage, "batch", provider="vertex")
    assert expected == pytest.approx(cost_usd(price, usage, "live") / 2)
    assert sum(r["cost_usd"] for r in ledger) == pytest.approx(expected, rel=1e-6)


def test_i41_vertex_claude_run_live_ledger_is_priced_at_vertex_rates(
    project: Path, prefix: str, emulator: Any
) -> None:
    """Live, through ``agac run``: every record one rawPredict call, the ledger's tokens
    the answers' and its cost Vertex's live price for the model."""
    _project(project, prefix, {"a": 6}, mode="online")
    done = api.run(WORKFLOW, project)
    assert done.exit_code == 0, done.notes
    calls = [r for r in emulator.requests() if r["op"] == "chat"]
    assert len(calls) == 6 and all(c["path"].endswith(f"/{CLAUDE}:rawPredict") for c in calls)
    stats = emulator.stats()
    assert stats["answered"] == 6 and stats["duplicate_answers"] == 0
    [row] = [r for r in api.cost(WORKFLOW, project)["rows"] if r["provider"] == "vertex"]
    assert row["calls"] == 6 and row["input_tokens"] > 0 and row["output_tokens"] > 0
    price = PriceLibrary(cache_dir=None).lookup("vertex", CLAUDE)
    assert price is not None
    usage = Usage(input_tokens=row["input_tokens"], output_tokens=row["output_tokens"])
    assert row["cost_usd"] == pytest.approx(cost_usd(price, usage, "live"), rel=1e-6)
