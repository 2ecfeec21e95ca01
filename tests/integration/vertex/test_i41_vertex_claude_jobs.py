"""Claude batch prediction jobs on Vertex AI against the emulator's Vertex routes and its
Cloud Storage over loopback: ``{"custom_id", "request"}`` lines (the request an Anthropic
body with ``anthropic_version: vertex-2023-10-16`` and no model) under the job's folder,
the job on Anthropic's publisher model named after agac's key (found again by that name,
never two), its states mapped as Gemini's, the output read back by ``custom_id`` (records
missing from it are not returned: B6), the project's limit of running Claude jobs paced
(B12: a configured most, and a create refused for the quota, both waits), and the input
deleted once the job has ended."""

from __future__ import annotations

import json
from typing import Any

import pytest
from claude_support import CLAUDE, claude_requests
from vertex_support import BUCKET, requests

from agac.errors import BatchNotEnded, FatalError, WaitError
from agac.providers.base import BatchHandle
from agac.providers.vertex import job_name
from agac.providers.vertex_claude import VERTEX_VERSION


def _objects(emulator: Any, prefix: str) -> list[str]:
    folder = prefix.removeprefix(f"gs://{BUCKET}/")
    state = emulator.state
    return sorted(k.split("/", 1)[1] for k in state.objects if k.startswith(f"{BUCKET}/{folder}"))


def _job_body(emulator: Any, handle: BatchHandle) -> dict[str, Any]:
    body: dict[str, Any] = emulator.state.batches[handle.id.rsplit("/", 1)[1]].info["body"]
    return body


async def _ended(provider: Any, emulator: Any, handle: BatchHandle) -> str:
    emulator.advance(3600)
    return str((await provider.poll_batch(handle)).raw_status)


async def test_i41_vertex_claude_job_lines_model_and_results_by_custom_id(
    vertex: Any, emulator: Any, prefix: str
) -> None:
    emulator.hold_clock()
    provider = vertex()
    handle = await provider.submit_batch(claude_requests(8), "agac_claude")
    folder = prefix.removeprefix(f"gs://{BUCKET}/") + "/" + job_name("agac_claude")
    raw = emulator.state.objects[f"{BUCKET}/{folder}/input/records.jsonl"][0]
    lines = [json.loads(x) for x in raw.splitlines()]
    assert [line["custom_id"] for line in lines] == [f"c{i}" for i in range(8)]
    first = lines[0]
    assert set(first) == {"custom_id", "request"}
    assert first["request"]["anthropic_version"] == VERTEX_VERSION
    assert "model" not in first["request"] and first["request"]["max_tokens"] == 256
    assert first["request"]["output_config"]["format"]["type"] == "json_schema"
    job = _job_body(emulator, handle)
    assert job["model"] == f"publishers/anthropic/models/{CLAUDE}"
    assert job["displayName"] == job_name("agac_claude")
    assert (await provider.poll_batch(handle)).state == "running"
    assert await _ended(provider, emulator, handle) == "JOB_STATE_SUCCEEDED"
    results = [r async for r in provider.batch_results(handle)]
    assert sorted(r.custom_id for r in results) == sorted(f"c{i}" for i in range(8))
    assert all(r.type == "succeeded" and r.response.service_tier == "batch" for r in results)
    assert all(isinstance(r.response.parsed, dict) for r in results)
    assert all(r.response.raw_stop == "end_turn" for r in results)
    billed = await provider.billed_work(handle)
    assert billed.answered == 8 and billed.usage is not None
    assert billed.usage.output_tokens == sum(r.response.usage.output_tokens for r in results)
    keys = _objects(emulator, prefix)
    assert f"{folder}/input/records.jsonl" not in keys  # deleted once the job ended
    assert any(k.startswith(f"{folder}/output/prediction-model-") for k in keys)


async def test_i41_vertex_claude_job_partially_succeeded_answers_what_it_processed(
    vertex: Any, emulator: Any
) -> None:
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "fault": {"batch_end": "expired", "answered": 4},
        }
    )
    provider = vertex()
    handle = await provider.submit_batch(claude_requests(6), "k-claude-partial")
    assert await _ended(provider, emulator, handle) == "JOB_STATE_PARTIALLY_SUCCEEDED"
    assert (await provider.poll_batch(handle)).state == "ended"
    results = [r async for r in provider.batch_results(handle)]
    assert len(results) == 4 and all(r.type == "succeeded" for r in results)


@pytest.mark.parametrize(
    ("end", "raw", "state"),
    [("failed", "JOB_STATE_FAILED", "failed"), ("expired", "JOB_STATE_EXPIRED", "expired")],
)
async def test_i41_vertex_claude_job_failed_or_expired_reads_nothing(
    vertex: Any, emulator: Any, end: str, raw: str, state: str
) -> None:
    emulator.add_fault({"provider": "vertex", "op": "batch.create", "fault": {"batch_end": end}})
    provider = vertex()
    handle = await provider.submit_batch(claude_requests(3), f"k-claude-{end}")
    assert await _ended(provider, emulator, handle) == raw
    assert (await provider.poll_batch(handle)).state == state
    with pytest.raises(BatchNotEnded):
        [r async for r in provider.batch_results(handle)]


async def test_i41_vertex_claude_job_missing_records_are_not_returned(
    vertex: Any, emulator: Any
) -> None:
    emulator.add_fault(
        {"provider": "vertex", "op": "batch.create", "fault": {"batch_drop_records": 2}}
    )
    provider = vertex()
    handle = await provider.submit_batch(claude_requests(7), "k-claude-missing")
    await _ended(provider, emulator, handle)
    results = [r async for r in provider.batch_results(handle)]
    assert len(results) == 5
    dropped = next(b["dropped"] for b in emulator.stats()["batches"] if b["provider"] == "vertex")
    assert len(dropped) == 2 and not {r.custom_id for r in results} & set(dropped)


async def test_i41_vertex_claude_job_errored_record_is_classified(
    vertex: Any, emulator: Any
) -> None:
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "match": {"custom_id": "c2"},
            "fault": {"http": 400, "message": "messages: roles must alternate"},
        }
    )
    provider = vertex()
    handle = await provider.submit_batch(claude_requests(4), "k-claude-errored")
    await _ended(provider, emulator, handle)
    results = {r.custom_id: r async for r in provider.batch_results(handle)}
    bad = results["c2"]
    assert bad.type == "errored" and isinstance(bad.error, FatalError)
    assert "roles must alternate" in str(bad.error) and bad.error.status == 400
    assert sum(r.type == "succeeded" for r in results.values()) == 3


async def test_i41_vertex_claude_submit_twice_with_one_key_is_one_job(
    vertex: Any, emulator: Any
) -> None:
    provider = vertex()
    first = await provider.submit_batch(claude_requests(3), "agac_claude_once")
    again = await provider.submit_batch(claude_requests(3), "agac_claude_once")
    found = await provider.find_batch("agac_claude_once")
    assert first.id == again.id and found is not None and found.id == first.id
    assert emulator.stats()["requests"]["vertex"]["batch.create"] == 1


async def test_i41_vertex_claude_quota_refusal_on_create_is_a_wait(
    vertex: Any, emulator: Any
) -> None:
    """B12: a create refused 429 (the project's quota of Claude batch jobs) waits."""
    emulator.add_fault(
        {"provider": "vertex", "op": "batch.create", "times": 1, "fault": {"http": 429}}
    )
    provider = vertex()
    with pytest.raises(WaitError) as caught:
        await provider.submit_batch(claude_requests(2), "k-claude-quota")
    assert caught.value.retry_after and "concurrent batch jobs" in str(caught.value)
    handle = await provider.submit_batch(claude_requests(2), "k-claude-quota")
    assert "/batchPredictionJobs/" in handle.id


async def test_i41_vertex_claude_batch_jobs_most_running_at_once_waits(
    vertex: Any, emulator: Any
) -> None:
    """B12: with ``claude_batch_jobs: 2`` and two Claude jobs running, a third waits
    without a create; a Gemini job does not count; once one has ended, it goes."""
    emulator.hold_clock()
    provider = vertex(claude_batch_jobs=2)
    first = await provider.submit_batch(claude_requests(2), "k-slot-1")
    await provider.submit_batch(requests(2), "k-slot-gemini")
    await provider.submit_batch(claude_requests(2, 2), "k-slot-2")
    with pytest.raises(WaitError) as caught:
        await provider.submit_batch(claude_requests(2, 4), "k-slot-3")
    assert caught.value.code == "claude_batch_jobs" and caught.value.retry_after
    assert "claude_batch_jobs: 2" in str(caught.value)
    assert emulator.stats()["requests"]["vertex"]["batch.create"] == 3
    await provider.cancel_batch(first)
    emulator.advance(3600)  # every job has ended
    third = await provider.submit_batch(claude_requests(2, 4), "k-slot-3")
    assert "/batchPredictionJobs/" in third.id
