"""Vertex AI batch prediction jobs (Gemini) against the emulator's Vertex routes and its
Cloud Storage over loopback: ``{"request"}`` lines written under the job's folder with
agac's key and a digest of the text in the request's labels, the job created with a
display name from agac's key (the same key is the same job, found again by name), every
JOB_STATE_* mapped onto the batch rules, the output read back by key (records missing from
it are not returned: B6), a mismatched echo an error of its record, the concurrent-job
quota a wait (B12), and the input deleted once the job has ended (or kept)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from vertex_support import BUCKET, MODEL, requests

from agac.errors import BatchNotEnded, ConfigError, FatalError, WaitError
from agac.providers._gemini_wire import BATCH_STATES
from agac.providers.base import BatchHandle
from agac.providers.vertex import job_name, request_digest

JOB_STATES = sorted(s for s in BATCH_STATES if s.startswith("JOB_STATE_"))


def _objects(emulator: Any, prefix: str) -> list[str]:
    folder = prefix.removeprefix(f"gs://{BUCKET}/")
    state = emulator.state
    return sorted(k.split("/", 1)[1] for k in state.objects if k.startswith(f"{BUCKET}/{folder}"))


async def _state(provider: Any, handle: BatchHandle) -> str:
    return str((await provider.poll_batch(handle)).raw_status)


def test_vertex_every_job_state_of_the_sdk_is_mapped() -> None:
    from google.genai import types

    sdk = {s.value for s in types.JobState} - {"JOB_STATE_UNSPECIFIED"}
    assert sdk == set(JOB_STATES)


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("JOB_STATE_QUEUED", "running"),
        ("JOB_STATE_PENDING", "running"),
        ("JOB_STATE_RUNNING", "running"),
        ("JOB_STATE_UPDATING", "running"),
        ("JOB_STATE_PAUSED", "running"),
        ("JOB_STATE_SUCCEEDED", "ended"),
        ("JOB_STATE_PARTIALLY_SUCCEEDED", "ended"),
        ("JOB_STATE_FAILED", "failed"),
        ("JOB_STATE_CANCELLING", "cancelling"),
        ("JOB_STATE_CANCELLED", "cancelled"),
        ("JOB_STATE_EXPIRED", "expired"),
        ("JOB_STATE_SOMETHING_NEW", "running"),  # B9: an unknown state is still running
    ],
)
async def test_vertex_job_state_maps_onto_batch_rules(
    vertex: Any, emulator: Any, raw: str, state: str
) -> None:
    provider = vertex()
    handle = await provider.submit_batch(requests(3), "k-state")
    emulator.add_fault({"provider": "vertex", "op": "batch.get", "fault": {"batch_status": raw}})
    got = await provider.poll_batch(handle)
    assert (got.state, got.raw_status, got.known) == (state, raw, raw in BATCH_STATES)


async def test_vertex_job_lifecycle_queued_to_succeeded_read_by_key(
    vertex: Any, emulator: Any, prefix: str
) -> None:
    emulator.hold_clock()
    provider = vertex()
    handle = await provider.submit_batch(requests(12), "agac_lifecycle")
    folder = prefix.removeprefix(f"gs://{BUCKET}/") + "/" + job_name("agac_lifecycle")
    lines = emulator.state.objects[f"{BUCKET}/{folder}/input/records.jsonl"][0].splitlines()
    first = json.loads(lines[0])
    assert set(first) == {"request"}
    labels = first["request"]["labels"]
    assert labels == {"agac_key": "r0", "agac_digest": request_digest(first["request"])}
    seen = [await _state(provider, handle)]
    for _ in range(12):
        emulator.advance(5)
        seen.append(await _state(provider, handle))
    assert [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]] == [
        "JOB_STATE_QUEUED",
        "JOB_STATE_PENDING",
        "JOB_STATE_RUNNING",
        "JOB_STATE_SUCCEEDED",
    ]
    [create] = [r for r in emulator.requests() if r["op"] == "batch.create"]
    assert create["path"].endswith("/locations/us-central1/batchPredictionJobs")
    results = [r async for r in provider.batch_results(handle)]
    assert sorted(r.custom_id for r in results) == sorted(f"r{i}" for i in range(12))
    assert all(r.type == "succeeded" and r.response.service_tier == "batch" for r in results)
    assert all(isinstance(r.response.parsed, dict) for r in results)
    billed = await provider.billed_work(handle)
    assert billed.answered == 12 and billed.usage is not None
    assert billed.usage.output_tokens == sum(r.response.usage.output_tokens for r in results)
    keys = _objects(emulator, prefix)
    assert f"{folder}/input/records.jsonl" not in keys  # deleted once the job ended
    assert any(k.startswith(f"{folder}/output/prediction-model-") for k in keys)


async def test_vertex_input_kept_by_option(vertex: Any, emulator: Any, prefix: str) -> None:
    provider = vertex(batch_input="keep")
    handle = await provider.submit_batch(requests(2), "k-keep")
    emulator.advance(3600)
    assert (await provider.poll_batch(handle)).state == "ended"
    assert any(k.endswith("/input/records.jsonl") for k in _objects(emulator, prefix))


async def test_vertex_submit_twice_with_one_key_is_one_job_found_by_name(
    vertex: Any, emulator: Any
) -> None:
    """Vertex has no client token: a submit looks for the job by its display name first,
    so a repeated submit is the same job (B2)."""
    provider = vertex()
    first = await provider.submit_batch(requests(3), "agac_0123abcd")
    again = await provider.submit_batch(requests(3), "agac_0123abcd")
    assert first.id == again.id
    found = await provider.find_batch("agac_0123abcd")
    assert found is not None and found.id == first.id
    assert await provider.find_batch("agac_other") is None
    assert len([b for b in emulator.stats()["batches"] if b["provider"] == "vertex"]) == 1


async def test_vertex_job_failed_reads_nothing(vertex: Any, emulator: Any) -> None:
    emulator.add_fault(
        {"provider": "vertex", "op": "batch.create", "fault": {"batch_end": "failed"}}
    )
    provider = vertex()
    handle = await provider.submit_batch(requests(3), "k-failed")
    emulator.advance(3600)
    status = await provider.poll_batch(handle)
    assert (status.state, status.raw_status) == ("failed", "JOB_STATE_FAILED")
    with pytest.raises(BatchNotEnded):
        [r async for r in provider.batch_results(handle)]


async def test_vertex_job_expired_reads_nothing(vertex: Any, emulator: Any) -> None:
    emulator.add_fault(
        {"provider": "vertex", "op": "batch.create", "fault": {"batch_end": "expired"}}
    )
    provider = vertex()
    handle = await provider.submit_batch(requests(3), "k-expired")
    emulator.advance(3600)
    status = await provider.poll_batch(handle)
    assert (status.state, status.raw_status) == ("expired", "JOB_STATE_EXPIRED")
    with pytest.raises(BatchNotEnded):
        [r async for r in provider.batch_results(handle)]


async def test_vertex_job_partially_succeeded_answers_what_it_processed(
    vertex: Any, emulator: Any
) -> None:
    """PARTIALLY_SUCCEEDED ends the job: what it answered is read, the rest are missing
    from the output (B6 sends them again)."""
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "fault": {"batch_end": "expired", "answered": 7},
        }
    )
    provider = vertex()
    handle = await provider.submit_batch(requests(10), "k-partial")
    emulator.advance(3600)
    status = await provider.poll_batch(handle)
    assert (status.state, status.raw_status) == ("ended", "JOB_STATE_PARTIALLY_SUCCEEDED")
    results = [r async for r in provider.batch_results(handle)]
    assert len(results) == 7 and all(r.type == "succeeded" for r in results)


async def test_vertex_job_cancelled_after_cancelling(vertex: Any, emulator: Any) -> None:
    emulator.hold_clock()
    provider = vertex()
    handle = await provider.submit_batch(requests(3), "k-cancel")
    emulator.advance(20)
    await provider.cancel_batch(handle)
    assert (await provider.poll_batch(handle)).state == "cancelling"
    emulator.advance(3600)
    status = await provider.poll_batch(handle)
    assert (status.state, status.raw_status) == ("cancelled", "JOB_STATE_CANCELLED")


async def test_vertex_missing_records_are_not_returned(vertex: Any, emulator: Any) -> None:
    """B6: a record absent from the output is not returned (the engine sends it again)."""
    emulator.add_fault(
        {"provider": "vertex", "op": "batch.create", "fault": {"batch_drop_records": 3}}
    )
    provider = vertex()
    handle = await provider.submit_batch(requests(10), "k-missing")
    emulator.advance(3600)
    results = [r async for r in provider.batch_results(handle)]
    assert len(results) == 7
    dropped = next(b["dropped"] for b in emulator.stats()["batches"] if b["provider"] == "vertex")
    assert not {r.custom_id for r in results} & set(dropped)


async def test_vertex_errored_record_is_classified(vertex: Any, emulator: Any) -> None:
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "batch.create",
            "match": {"custom_id": "r7"},
            "fault": {"http": 400, "message": "Unable to submit request"},
        }
    )
    provider = vertex()
    handle = await provider.submit_batch(requests(10), "k-errored")
    emulator.advance(3600)
    results = {r.custom_id: r async for r in provider.batch_results(handle)}
    bad = results["r7"]
    assert bad.type == "errored" and isinstance(bad.error, FatalError)
    assert "Unable to submit request" in str(bad.error)
    assert sum(r.type == "succeeded" for r in results.values()) == 9


async def test_vertex_output_line_whose_echo_does_not_match_is_its_records_error(
    vertex: Any, emulator: Any
) -> None:
    """The key travels in the labels; the digest of the text checks the echo: a line
    whose text is not what agac sent under that key answers no record."""
    provider = vertex()
    handle = await provider.submit_batch(requests(3), "k-echo")
    emulator.advance(3600)
    assert (await provider.poll_batch(handle)).state == "ended"
    [key] = [k for k in emulator.state.objects if k.endswith("predictions.jsonl")]
    data, when = emulator.state.objects[key]
    lines = [json.loads(x) for x in data.splitlines()]
    for line in lines:
        if line["request"]["labels"]["agac_key"] == "r1":
            line["request"]["contents"][0]["parts"][0]["text"] = "someone else's review"
    emulator.state.objects[key] = (b"".join(json.dumps(x).encode() + b"\n" for x in lines), when)
    results = {r.custom_id: r async for r in provider.batch_results(handle)}
    assert results["r1"].type == "errored" and results["r1"].error.code == "output_mismatch"
    assert results["r0"].type == results["r2"].type == "succeeded"


async def test_vertex_concurrent_job_quota_on_create_is_a_wait(vertex: Any, emulator: Any) -> None:
    """B12: a create refused 429 (the project's concurrent jobs) waits, never fails."""
    emulator.add_fault(
        {"provider": "vertex", "op": "batch.create", "times": 1, "fault": {"http": 429}}
    )
    provider = vertex()
    with pytest.raises(WaitError) as caught:
        await provider.submit_batch(requests(3), "k-quota")
    assert caught.value.retry_after and "concurrent batch jobs" in str(caught.value)
    handle = await provider.submit_batch(requests(3), "k-quota")
    assert "/batchPredictionJobs/" in handle.id


async def test_vertex_batch_needs_a_gs_bucket(vertex: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        await vertex(batch_bucket="").submit_batch(requests(1), "k-b")
    assert "batch_bucket" in str(caught.value.problems[0].hint)
    with pytest.raises(ConfigError):
        await vertex(batch_bucket="s3://not-gcs").submit_batch(requests(1), "k-b")


async def test_vertex_job_names_the_model_and_the_output_prefix(
    vertex: Any, emulator: Any, prefix: str
) -> None:
    handle = await vertex().submit_batch(requests(1), "k-model")
    job = emulator.state.batches[handle.id.rsplit("/", 1)[1]].info["body"]
    assert job["model"] == f"publishers/google/models/{MODEL}"
    assert job["inputConfig"]["gcsSource"]["uris"] == [
        f"{prefix}/{job_name('k-model')}/input/records.jsonl"
    ]
    assert job["outputConfig"]["gcsDestination"]["outputUriPrefix"] == (
        f"{prefix}/{job_name('k-model')}/output"
    )
