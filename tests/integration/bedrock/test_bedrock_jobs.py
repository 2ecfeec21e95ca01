"""Bedrock batch through model invocation jobs, against the emulator's control plane and
moto's S3 over loopback: ``{recordId, modelInput}`` lines written under the job's folder,
the job created with a name and client token from agac's key (the same key is the same
job), every status mapped, the output read by recordId (missing records are not
returned: B6) and its manifest, the job quota as a wait (B12), the record limits, and the
input deleted once the job has ended (or kept)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bedrock_support import BUCKET, requests

from agac.errors import BatchNotEnded, FatalError, UnsupportedError, WaitError
from agac.providers.base import BatchHandle, batch_api
from agac.providers.bedrock import BEDROCK_STATES, client_token, job_name

STATES = sorted(BEDROCK_STATES)


def _objects(s3: Any, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix.split(f"{BUCKET}/", 1)[1])
    return sorted(str(o["Key"]) for o in listed.get("Contents") or ())


async def _status(provider: Any, handle: BatchHandle) -> str:
    return str((await provider.poll_batch(handle)).raw_status)


def test_bedrock_every_documented_status_is_mapped() -> None:
    import botocore.session

    model = botocore.session.get_session().get_service_model("bedrock")
    assert sorted(model.shape_for("ModelInvocationJobStatus").enum) == STATES


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("Submitted", "running"),
        ("Validating", "running"),
        ("Scheduled", "running"),
        ("InProgress", "running"),
        ("Completed", "ended"),
        ("PartiallyCompleted", "ended"),
        ("Failed", "failed"),
        ("Stopping", "cancelling"),
        ("Stopped", "cancelled"),
        ("Expired", "expired"),
        ("SomethingNew", "running"),  # B9: an unknown status is still running
    ],
)
async def test_bedrock_job_status_maps_onto_batch_rules(
    bedrock: Any, emulator: Any, status: str, state: str
) -> None:
    provider = bedrock()
    handle = await provider.submit_batch(requests(100), "k-status")
    emulator.add_fault(
        {"provider": "bedrock", "op": "batch.get", "fault": {"batch_status": status}}
    )
    got = await provider.poll_batch(handle)
    assert (got.state, got.raw_status, got.known) == (state, status, status in BEDROCK_STATES)


async def test_bedrock_job_lifecycle_submitted_to_completed_read_by_record_id(
    bedrock: Any, emulator: Any, aws: Any, prefix: str
) -> None:
    emulator.hold_clock()
    provider = bedrock()
    handle = await provider.submit_batch(requests(120), "agac_lifecycle")
    seen = [await _status(provider, handle)]
    for _ in range(12):
        emulator.advance(5)
        seen.append(await _status(provider, handle))
    assert [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]] == [
        "Submitted",
        "Validating",
        "Scheduled",
        "InProgress",
        "Completed",
    ]
    created = next(r for r in emulator.requests() if r["op"] == "batch.create")
    assert created["path"] == "/bedrock/model-invocation-job"
    import boto3

    job = boto3.client("bedrock").get_model_invocation_job(jobIdentifier=handle.id)
    assert job["jobName"] == job_name("agac_lifecycle")
    assert job["clientRequestToken"] == client_token("agac_lifecycle")
    assert job["modelInvocationType"] == "Converse"
    results = [r async for r in provider.batch_results(handle)]
    assert sorted(r.custom_id for r in results) == sorted(f"r{i}" for i in range(120))
    assert all(r.type == "succeeded" and r.response.service_tier == "batch" for r in results)
    assert all(isinstance(r.response.parsed, dict) for r in results)
    billed = await provider.billed_work(handle)
    assert billed.answered == 120 and billed.usage is not None
    assert billed.usage.output_tokens == sum(r.response.usage.output_tokens for r in results)
    keys = _objects(aws, prefix)
    folder = f"{prefix.split(BUCKET + '/')[1]}/{job_name('agac_lifecycle')}"
    job_id = handle.id.rsplit("/", 1)[1]
    assert f"{folder}/output/{job_id}/records.jsonl.out" in keys
    assert f"{folder}/output/{job_id}/manifest.json.out" in keys
    assert f"{folder}/input/records.jsonl" not in keys  # deleted once the job ended


async def test_bedrock_input_kept_by_option(
    bedrock: Any, emulator: Any, aws: Any, prefix: str
) -> None:
    provider = bedrock(batch_input="keep")
    handle = await provider.submit_batch(requests(100), "k-keep")
    line = json.loads(
        aws.get_object(Bucket=BUCKET, Key=_objects(aws, prefix)[0])["Body"].read().splitlines()[0]
    )
    assert set(line) == {"recordId", "modelInput"} and line["recordId"] == "r0"
    assert "modelId" not in line["modelInput"] and line["modelInput"]["messages"]
    emulator.advance(3600)
    assert (await provider.poll_batch(handle)).state == "ended"
    assert any(k.endswith("/input/records.jsonl") for k in _objects(aws, prefix))


async def test_bedrock_create_twice_with_one_key_is_one_job_found_by_name(
    bedrock: Any, emulator: Any
) -> None:
    """The client token makes a repeated create the same job; the name finds it (B2)."""
    provider = bedrock()
    first = await provider.submit_batch(requests(100), "agac_0123abcd")
    again = await provider.submit_batch(requests(100), "agac_0123abcd")
    assert first.id == again.id
    found = await provider.find_batch("agac_0123abcd")
    assert found is not None and found.id == first.id
    assert await provider.find_batch("agac_other") is None
    assert len([b for b in emulator.stats()["batches"] if b["provider"] == "bedrock"]) == 1


async def test_bedrock_job_failed_reads_nothing(bedrock: Any, emulator: Any) -> None:
    emulator.add_fault(
        {"provider": "bedrock", "op": "batch.create", "fault": {"batch_end": "failed"}}
    )
    provider = bedrock()
    handle = await provider.submit_batch(requests(100), "k-failed")
    emulator.advance(3600)
    assert (await provider.poll_batch(handle)).raw_status == "Failed"
    with pytest.raises(BatchNotEnded):
        [r async for r in provider.batch_results(handle)]


async def test_bedrock_job_expired_reads_nothing(bedrock: Any, emulator: Any) -> None:
    emulator.add_fault(
        {"provider": "bedrock", "op": "batch.create", "fault": {"batch_end": "expired"}}
    )
    provider = bedrock()
    handle = await provider.submit_batch(requests(100), "k-expired")
    emulator.advance(3600)
    status = await provider.poll_batch(handle)
    assert (status.state, status.raw_status) == ("expired", "Expired")
    with pytest.raises(BatchNotEnded):
        [r async for r in provider.batch_results(handle)]


async def test_bedrock_job_partially_completed_answers_what_it_processed(
    bedrock: Any, emulator: Any
) -> None:
    """PartiallyCompleted ends the job: what it processed is read, the rest are missing
    from the output (B6 sends them again)."""
    emulator.add_fault(
        {
            "provider": "bedrock",
            "op": "batch.create",
            "fault": {"batch_end": "expired", "answered": 70},
        }
    )
    provider = bedrock()
    handle = await provider.submit_batch(requests(100), "k-partial")
    emulator.advance(3600)
    status = await provider.poll_batch(handle)
    assert (status.state, status.raw_status) == ("ended", "PartiallyCompleted")
    results = [r async for r in provider.batch_results(handle)]
    assert len(results) == 70 and all(r.type == "succeeded" for r in results)


async def test_bedrock_job_stopped_after_stopping(bedrock: Any, emulator: Any) -> None:
    emulator.hold_clock()
    provider = bedrock()
    handle = await provider.submit_batch(requests(100), "k-stop")
    emulator.advance(20)
    await provider.cancel_batch(handle)
    assert (await provider.poll_batch(handle)).state == "cancelling"
    emulator.advance(3600)
    status = await provider.poll_batch(handle)
    assert (status.state, status.raw_status) == ("cancelled", "Stopped")


async def test_bedrock_missing_records_are_not_returned(bedrock: Any, emulator: Any) -> None:
    """B6: a record absent from the output is not returned (the engine sends it again)."""
    emulator.add_fault(
        {"provider": "bedrock", "op": "batch.create", "fault": {"batch_drop_records": 3}}
    )
    provider = bedrock()
    handle = await provider.submit_batch(requests(100), "k-missing")
    emulator.advance(3600)
    results = [r async for r in provider.batch_results(handle)]
    assert len(results) == 97
    dropped = next(b["dropped"] for b in emulator.stats()["batches"] if b["provider"] == "bedrock")
    assert not {r.custom_id for r in results} & set(dropped)


async def test_bedrock_errored_record_is_classified(bedrock: Any, emulator: Any) -> None:
    emulator.add_fault(
        {
            "provider": "bedrock",
            "op": "batch.create",
            "match": {"custom_id": "r7"},
            "fault": {"http": 400, "message": "Malformed input request"},
        }
    )
    provider = bedrock()
    handle = await provider.submit_batch(requests(100), "k-errored")
    emulator.advance(3600)
    results = {r.custom_id: r async for r in provider.batch_results(handle)}
    bad = results["r7"]
    assert bad.type == "errored" and isinstance(bad.error, FatalError)
    assert "Malformed input request" in str(bad.error)
    assert sum(r.type == "succeeded" for r in results.values()) == 99


async def test_bedrock_job_quota_refusal_on_create_is_a_wait(bedrock: Any, emulator: Any) -> None:
    """B12: the account's quota of jobs in flight is a wait, never a refusal of the file."""
    emulator.add_fault(
        {
            "provider": "bedrock",
            "op": "batch.create",
            "times": 1,
            "fault": {
                "http": 400,
                "code": "ServiceQuotaExceededException",
                "message": "Too many jobs in progress",
            },
        }
    )
    provider = bedrock()
    with pytest.raises(WaitError) as caught:
        await provider.submit_batch(requests(100), "k-quota")
    assert caught.value.retry_after and "quota of batch jobs" in str(caught.value)
    handle = await provider.submit_batch(requests(100), "k-quota")
    assert handle.id.startswith("arn:aws:bedrock:")


async def test_bedrock_min_records_per_job(bedrock: Any, emulator: Any) -> None:
    """Fewer than the minimum is never sent (the engine sends them live or holds them); a
    lower quota the user configured is the adapter's minimum, and a job Bedrock still
    refuses for it fails at validation."""
    with pytest.raises(UnsupportedError) as caught:
        await bedrock().submit_batch(requests(99), "k-few")
    assert caught.value.code == "batch_too_small"
    provider = bedrock(batch_min_records=10)
    api = batch_api(provider)
    assert api is not None and (api.min_requests, api.below_minimum) == (10, "live")
    handle = await provider.submit_batch(requests(10), "k-ten")
    emulator.advance(3600)
    assert (await provider.poll_batch(handle)).raw_status == "Failed"


async def test_bedrock_max_records_per_job_is_the_split_limit(bedrock: Any) -> None:
    """B1: 50,000 records a job by default (the engine splits above), or as configured."""
    api = batch_api(bedrock())
    assert api is not None and (api.min_requests, api.max_requests) == (100, 50_000)
    smaller = batch_api(bedrock(batch_max_records=500, below_minimum="wait"))
    assert smaller is not None and (smaller.max_requests, smaller.below_minimum) == (500, "wait")
    with pytest.raises(UnsupportedError) as caught:
        await bedrock(batch_max_records=150).submit_batch(requests(151), "k-many")
    assert caught.value.code == "batch_too_large"


async def test_bedrock_batch_needs_bucket_and_role(bedrock: Any) -> None:
    from agac.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        await bedrock(role_arn="").submit_batch(requests(100), "k-role")
    assert "role_arn" in str(caught.value)
    with pytest.raises(ConfigError):
        await bedrock(batch_bucket="bucket-without-scheme").submit_batch(requests(100), "k-b")


async def test_i41_min_records_above_max_records_is_refused_at_setup(bedrock: Any) -> None:
    """A minimum above the maximum leaves no job Bedrock takes: said when the provider is
    set up, naming both options, before anything is staged."""
    from agac.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        bedrock(batch_min_records=200, batch_max_records=150)
    said = str(caught.value)
    assert "batch_min_records (200)" in said and "batch_max_records (150)" in said
