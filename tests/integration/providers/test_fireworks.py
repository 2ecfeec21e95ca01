"""Fireworks AI: live calls on both transports (the ``openai`` SDK pointed at Fireworks,
and the lean transport) and its batch inference jobs against the emulator's Fireworks
routes — the input as a dataset (created, then uploaded), a job whose id comes from
agac's batch key (found again by it), the output dataset read back by ``custom_id`` from
signed URLs (without the API key), and an expired job's finished rows read."""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import make_request, poll_until

from agac.errors import RetryableError, UnsupportedError, WaitError
from agac.providers.fireworks import FIREWORKS_STATES, fireworks_status, job_id
from agac.providers.registry import batch_providers, provider_spec

MODEL = "accounts/fireworks/models/llama-v3p1-8b-instruct"


async def test_fireworks_live_answer_on_both_transports(make_provider: Any, emulator: Any) -> None:
    """A chat completion at ``/inference/v1/chat/completions``, the limit as
    ``max_tokens``; an unknown finish reason is ``unexpected``."""
    provider = make_provider("fireworks")
    response = await provider.complete(make_request("fireworks"))
    assert (response.stop_reason, response.raw_stop) == ("end", "stop")
    assert isinstance(response.parsed, dict)
    [chat] = [e for e in emulator.requests() if e["op"] == "chat"]
    assert chat["path"] == "/fireworks/inference/v1/chat/completions"
    assert chat["body"]["max_tokens"] == 256 and chat["body"]["model"] == MODEL

    emulator.add_fault(
        {"provider": "fireworks", "op": "chat", "fault": {"reply": {"stop": "abort"}}}
    )
    odd = await provider.complete(make_request("fireworks"))
    assert (odd.stop_reason, odd.raw_stop) == ("unexpected", "abort")


async def test_fireworks_batch_dataset_job_and_output_by_custom_id(
    make_provider: Any, emulator: Any
) -> None:
    """A dataset is created and uploaded, a job made over it under the key's id; the
    output dataset's rows come back by ``custom_id`` (an errored one as an error) from
    signed URLs read without the key; the job is found again by its key."""
    emulator.add_fault(
        {
            "provider": "fireworks",
            "op": "batch.create",
            "match": {"custom_id": "r2"},
            "fault": {"http": 400, "message": "bad request"},
        }
    )
    provider = make_provider("fireworks")
    requests = [make_request("fireworks", f"review {i}", custom_id=f"r{i}") for i in range(3)]
    handle = await provider.submit_batch(requests, "run1:classify:a.jsonl:0")
    assert handle.id == job_id("run1:classify:a.jsonl:0")

    ops = [(e["op"], e["path"]) for e in emulator.requests()]
    account = "/fireworks/v1/accounts/emulator"
    assert ops[0][0] == "dataset.create" and ops[0][1] == f"{account}/datasets"
    assert ops[1][0] == "file.upload" and ops[1][1].endswith(":upload")
    assert ops[2] == ("batch.create", f"{account}/batchInferenceJobs")

    found = await provider.find_batch("run1:classify:a.jsonl:0")
    assert found is not None and (found.id, found.meta["request_count"]) == (handle.id, 3)
    assert await provider.find_batch("run1:classify:b.jsonl:0") is None

    emulator.advance(3600)
    status = await poll_until(provider, handle, ("ended",))
    assert (status.raw_status, status.completed, status.failed) == ("JOB_STATE_COMPLETED", 2, 1)
    by_id = {r.custom_id: r for r in [r async for r in provider.batch_results(handle)]}
    assert sorted(by_id) == ["r0", "r1", "r2"]
    assert by_id["r0"].type == "succeeded" and by_id["r0"].response is not None
    assert by_id["r2"].type == "errored"
    downloads = [e for e in emulator.requests() if e["op"] == "file.download"]
    assert len(downloads) == 2 and all("authorization" not in e["headers"] for e in downloads)


async def test_fireworks_expired_job_keeps_its_finished_rows(
    make_provider: Any, emulator: Any
) -> None:
    """Past its 24 hours a job ends ``JOB_STATE_EXPIRED`` with the rows it finished: they
    are read; the others are simply not returned (B6)."""
    emulator.add_fault(
        {
            "provider": "fireworks",
            "op": "batch.create",
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 2},
        }
    )
    provider = make_provider("fireworks")
    requests = [make_request("fireworks", f"r {i}", custom_id=f"r{i}") for i in range(4)]
    handle = await provider.submit_batch(requests, "k-expired")
    emulator.advance(3600)
    status = await poll_until(provider, handle, ("ended",))
    assert status.raw_status == "JOB_STATE_EXPIRED"
    results = [r async for r in provider.batch_results(handle)]
    assert len(results) == 2 and {r.type for r in results} == {"succeeded"}
    billed = await provider.billed_work(handle)
    assert billed.answered == 2 and billed.usage is not None and billed.usage.output_tokens > 0


async def test_fireworks_batch_needs_an_account(
    make_provider: Any, emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FIREWORKS_ACCOUNT_ID")
    provider = make_provider("fireworks")
    with pytest.raises(UnsupportedError, match="FIREWORKS_ACCOUNT_ID"):
        await provider.submit_batch([make_request("fireworks", custom_id="r0")], "k")
    assert not [e for e in emulator.requests() if e["op"] == "batch.create"]


def test_fireworks_every_job_state_has_a_rule() -> None:
    """Every ``JOB_STATE_*`` is mapped (an expired or early-stopped job is read: its rows
    are kept); an unknown one is running (B9)."""
    assert fireworks_status({"state": "JOB_STATE_EXPIRED"}).state == "ended"
    assert fireworks_status({"state": "JOB_STATE_FAILED"}).state == "failed"
    assert {s for s, v in FIREWORKS_STATES.items() if v == "ended"} == {
        "JOB_STATE_COMPLETED",
        "JOB_STATE_EXPIRED",
        "JOB_STATE_EARLY_STOPPED",
    }
    unknown = fireworks_status({"state": "JOB_STATE_THAWING"})
    assert (unknown.state, unknown.known) == ("running", False)


def test_fireworks_spec() -> None:
    spec = provider_spec("fireworks")
    assert spec.transports == ("lean", "sdk") and spec.sdk_module == "openai"
    assert spec.credential_env == ("FIREWORKS_API_KEY",) and "fireworks" in batch_providers()
    assert spec.batch is not None and spec.batch.max_bytes == 500 * 1024 * 1024


async def test_fireworks_capacity_error_is_a_wait_not_a_failure(
    make_provider: Any, emulator: Any
) -> None:
    """Fireworks out of capacity (429 with a retry-after, or 503) is waited out and asked
    again, live and on a batch create: never a failure of the record or the file."""
    chat = {"provider": "fireworks", "op": "chat", "times": 1}
    emulator.add_fault(
        {**chat, "fault": {"http": 429, "retry_after": 7}},
        {**chat, "fault": {"http": 503}},
        {"provider": "fireworks", "op": "batch.create", "times": 1, "fault": {"http": 503}},
    )
    provider = make_provider("fireworks")
    with pytest.raises(WaitError) as waited:
        await provider.complete(make_request("fireworks"))
    assert waited.value.retry_after == 7
    with pytest.raises(RetryableError):
        await provider.complete(make_request("fireworks"))
    with pytest.raises(RetryableError):
        await provider.submit_batch([make_request("fireworks", custom_id="r0")], "k-busy")
    assert await provider.find_batch("k-busy") is None  # nothing was created
