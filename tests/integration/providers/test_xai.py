"""xAI: live calls on both transports (the ``openai`` SDK pointed at xAI, and the lean
transport) and its open-ended Batch API against the emulator's xAI routes — a batch created
empty and filled in chunks, no status but counters (agac decides when it has ended or
expired), results read page by page, a submission whose answer was lost found again by
its name, and a half-filled batch never adopted."""

from __future__ import annotations

import time
from typing import Any

import pytest
from provider_support import make_request, poll_until

from agac.errors import FatalError, RetryableError, WaitError
from agac.providers.registry import batch_providers, provider_spec
from agac.providers.xai import batch_name, xai_status


async def test_xai_live_answer_on_both_transports(make_provider: Any, emulator: Any) -> None:
    """A chat completion at ``/xai/v1/chat/completions``, the limit as ``max_tokens``;
    ``stop`` answers, an unknown finish reason is ``unexpected``."""
    provider = make_provider("xai")
    response = await provider.complete(make_request("xai"))
    assert (response.stop_reason, response.raw_stop) == ("end", "stop")
    assert isinstance(response.parsed, dict) and response.usage.output_tokens > 0
    [chat] = [e for e in emulator.requests() if e["op"] == "chat"]
    assert chat["path"] == "/xai/v1/chat/completions"
    assert chat["body"]["max_tokens"] == 256 and chat["body"]["model"] == "grok-3-mini"
    assert chat["headers"]["authorization"] == "Bearer emulator-key"

    emulator.add_fault({"provider": "xai", "op": "chat", "fault": {"reply": {"stop": "halt"}}})
    odd = await provider.complete(make_request("xai"))
    assert (odd.stop_reason, odd.raw_stop) == ("unexpected", "halt")


async def test_xai_batch_is_filled_in_chunks_and_read_page_by_page(
    make_provider: Any, emulator: Any
) -> None:
    """120 requests go in three add calls of at most 50 (``add_chunk``); the batch
    ends when nothing is pending and its results come in two pages of at most 100."""
    provider = make_provider("xai", add_chunk=50)
    requests = [make_request("xai", f"review {i}", custom_id=f"r{i}") for i in range(120)]
    handle = await provider.submit_batch(requests, "run1:classify:a.jsonl:0")

    adds = [e for e in emulator.requests() if e["op"] == "batch.add"]
    assert [e["path"] for e in adds] == [f"/xai/v1/batches/{handle.id}/requests"] * 3
    [made] = emulator.stats()["batches"]
    assert (made["id"], made["requests"]) == ("agac-run1:classify:a.jsonl:0-120", 120)
    assert (await provider.poll_batch(handle)).state == "running"

    emulator.advance(3600)
    status = await poll_until(provider, handle, ("ended",))
    assert (status.request_count, status.completed, status.raw_status) == (
        120,
        120,
        "0 of 120 pending",
    )
    results = [r async for r in provider.batch_results(handle)]
    assert sorted(r.custom_id for r in results) == sorted(f"r{i}" for i in range(120))
    assert all(r.type == "succeeded" and r.response is not None for r in results)
    assert {r.response.service_tier for r in results if r.response} == {"batch"}
    pages = [e for e in emulator.requests() if e["op"] == "batch.results"]
    assert len(pages) == 2 and "pagination_token=100" in pages[1]["query"]


async def test_xai_batch_found_again_by_name_only_when_complete(
    make_provider: Any, emulator: Any
) -> None:
    """A lost answer to the create: the batch is found by its name and adopted when it
    holds all its requests; one found short of them (its adds never all landed) is
    cancelled and not adopted."""
    provider = make_provider("xai")
    requests = [make_request("xai", f"r {i}", custom_id=f"r{i}") for i in range(3)]
    handle = await provider.submit_batch(requests, "k-whole")
    found = await provider.find_batch("k-whole")
    assert found is not None and (found.id, found.meta["request_count"]) == (handle.id, 3)
    assert await provider.find_batch("k-other") is None

    # The second add call is refused: the half-filled batch is cancelled at once.
    emulator.add_fault({"provider": "xai", "op": "batch.add", "nth": 2, "fault": {"http": 400}})
    chunked = make_provider("xai", add_chunk=2)
    with pytest.raises(FatalError):
        await chunked.submit_batch(requests, "k-half")
    cancels = [e for e in emulator.requests() if e["op"] == "batch.cancel"]
    assert len(cancels) == 1
    assert await chunked.find_batch("k-half") is None


async def test_xai_expired_batch_bills_what_it_answered(make_provider: Any, emulator: Any) -> None:
    """Past its ``expire_time`` with requests still pending, a batch is expired (B7: no
    result read); what it billed is its ``num_success``."""
    emulator.add_fault(
        {
            "provider": "xai",
            "op": "batch.create",
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 2},
        }
    )
    provider = make_provider("xai")
    requests = [make_request("xai", f"r {i}", custom_id=f"r{i}") for i in range(4)]
    handle = await provider.submit_batch(requests, "k-expired")
    emulator.advance(3600)
    status = await poll_until(provider, handle, ("expired",))
    assert status.raw_status == "2 of 4 pending"
    billed = await provider.billed_work(handle)
    assert (billed.status.state, billed.answered, billed.usage) == ("expired", 2, None)


async def test_xai_errored_result_is_classified_by_its_grpc_code(
    make_provider: Any, emulator: Any
) -> None:
    """A request xAI refused (gRPC 3, INVALID_ARGUMENT) is a fatal error of that record."""
    emulator.add_fault(
        {
            "provider": "xai",
            "op": "batch.create",
            "match": {"custom_id": "r1"},
            "fault": {"http": 400, "message": "bad"},
        }
    )
    provider = make_provider("xai")
    requests = [make_request("xai", f"r {i}", custom_id=f"r{i}") for i in range(2)]
    handle = await provider.submit_batch(requests, "k-errors")
    emulator.advance(3600)
    await poll_until(provider, handle, ("ended",))
    by_id = {r.custom_id: r for r in [r async for r in provider.batch_results(handle)]}
    assert by_id["r0"].type == "succeeded"
    assert by_id["r1"].type == "errored" and isinstance(by_id["r1"].error, FatalError)


def test_xai_status_is_decided_from_the_counters() -> None:
    """Nothing pending: ended (cancelled after a cancel); pending past ``expire_time``:
    expired; xAI's own cancel: failed; an empty batch is still running."""
    past, future = "2020-01-01T00:00:00Z", "2999-01-01T00:00:00Z"

    def state(counts: dict[str, int], **extra: Any) -> str:
        batch = {"state": counts, "expire_time": future, **extra}
        return xai_status(batch, time.time()).state

    assert state({"num_requests": 2, "num_pending": 0, "num_success": 2}) == "ended"
    assert state({"num_requests": 2, "num_pending": 1}) == "running"
    assert state({"num_requests": 0, "num_pending": 0}) == "running"
    assert state({"num_requests": 2, "num_pending": 1}, expire_time=past) == "expired"
    assert state({"num_requests": 2, "num_pending": 1}, cancel_time=past) == "cancelling"
    assert state({"num_requests": 2, "num_pending": 0}, cancel_time=past) == "cancelled"
    assert state({"num_requests": 2}, cancel_by_xai_message="invalid") == "failed"
    assert batch_name("run:a b", 3) == "agac-run:a_b-3"


def test_xai_spec() -> None:
    spec = provider_spec("xai")
    assert spec.transports == ("lean", "sdk") and spec.sdk_module == "openai"
    assert spec.credential_env == ("XAI_API_KEY",) and "xai" in batch_providers()
    assert spec.batch is not None and spec.batch.input == "inline"


async def test_xai_capacity_error_is_a_wait_not_a_failure(
    make_provider: Any, emulator: Any
) -> None:
    """xAI out of capacity (429 with a retry-after, or 503) is waited out and asked
    again: never a failure of the record."""
    emulator.add_fault(
        {"provider": "xai", "op": "chat", "times": 1, "fault": {"http": 429, "retry_after": 7}},
        {"provider": "xai", "op": "chat", "times": 1, "fault": {"http": 503}},
    )
    provider = make_provider("xai")
    with pytest.raises(WaitError) as waited:
        await provider.complete(make_request("xai"))
    assert waited.value.retry_after == 7
    with pytest.raises(RetryableError):
        await provider.complete(make_request("xai"))
    assert (await provider.complete(make_request("xai"))).stop_reason == "end"
