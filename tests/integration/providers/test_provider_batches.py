"""The provider contract (docs/providers.md; docs/guarantees.md, Batches), batch half: submit, poll to the end, read
results and per-item errors; find a batch by our key (B2); cancel (B8); unknown
statuses (B9); failed, expired and cancelled ends (B7); records left out (B6).
Gemini runs twice: inline requests and an uploaded JSONL file.
"""

from __future__ import annotations

import time
from typing import Any

import jsonschema
import pytest
from provider_support import BATCH_SECONDS, SCHEMA, make_request, poll_until

from agac.errors import BatchNotEnded, FatalError, RetryableError
from agac.providers.base import Result

#: (provider, adapter options) per batch variant.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai": ("openai", {}),
    "anthropic": ("anthropic", {}),
    "gemini-inline": ("gemini", {"batch_input": "inline"}),
    "gemini-file": ("gemini", {"batch_input": "file"}),
    "groq": ("groq", {}),
}
#: Providers whose batches can end failed or expired (Anthropic's only end is `ended`).
NOT_ANTHROPIC = [v for v in VARIANTS if v != "anthropic"]


def _requests(name: str, count: int = 4, prefix: str = "r") -> list[Any]:
    return [
        make_request(name, f"Review {i}: works fine.", custom_id=f"{prefix}{i}")
        for i in range(count)
    ]


async def _results(provider: Any, handle: Any) -> dict[str, Result]:
    results: dict[str, Result] = {}
    async for result in provider.batch_results(handle):
        assert result.custom_id not in results, "a custom_id came back twice"
        results[result.custom_id] = result
    return results


@pytest.fixture(params=list(VARIANTS))
def variant(request: pytest.FixtureRequest, make_provider: Any) -> tuple[str, Any]:
    name, options = VARIANTS[request.param]
    return name, make_provider(name, **options)


async def test_full_batch_cycle_reads_answers_and_item_errors(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    emulator.add_fault(
        {
            "provider": name,
            "op": "batch.create",
            "match": {"custom_id": "r2"},
            "fault": {"http": 400},
        }
    )
    handle = await provider.submit_batch(_requests(name), "key-cycle")
    assert handle.provider == name and handle.key == "key-cycle"
    status = await provider.poll_batch(handle)
    assert status.state == "running" and status.known

    emulator.advance(BATCH_SECONDS + 1)
    status = await poll_until(provider, handle, ("ended",))
    assert status.known

    results = await _results(provider, handle)
    assert set(results) == {"r0", "r1", "r2", "r3"}
    errored = results.pop("r2")
    assert errored.type == "errored" and isinstance(errored.error, FatalError)
    for result in results.values():
        assert result.type == "succeeded", result
        assert result.response is not None
        jsonschema.validate(result.response.parsed, SCHEMA)
        assert result.response.service_tier == "batch"
        assert result.response.stop_reason == "end"
        assert result.response.usage.input_tokens > 0
        # Batch latency is end to end: at least the emulator time the batch took.
        assert result.response.latency_ms >= BATCH_SECONDS * 1000 / 2


async def test_find_batch_recovers_a_submission_by_key(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    started = time.time()
    other = await provider.submit_batch(_requests(name, 2, "o"), "key-other")
    handle = await provider.submit_batch(_requests(name, 3), "key-find")
    finished = time.time()
    if name == "anthropic":
        # No metadata on Anthropic batches: the intent's window and request count.
        found = await provider.find_batch(
            "key-find", created_after=started, created_before=finished, request_count=3
        )
        assert found is not None and found.id == handle.id and found.key == "key-find"
        assert await provider.find_batch("key-find") is None  # no window: nothing certain
        assert (
            await provider.find_batch(
                "key-find", created_after=started, created_before=finished, request_count=5
            )
            is None
        )
        await provider.submit_batch(_requests(name, 3, "x"), "key-twin")
        assert (
            await provider.find_batch(  # two candidates: ambiguous
                "key-find", created_after=started, created_before=time.time(), request_count=3
            )
            is None
        )
    else:
        found = await provider.find_batch("key-find")
        assert found is not None and found.id == handle.id
        assert (await provider.find_batch("key-other")).id == other.id  # type: ignore[union-attr]
        assert await provider.find_batch("key-missing") is None


async def test_cancel_batch(variant: tuple[str, Any], emulator: Any) -> None:
    name, provider = variant
    handle = await provider.submit_batch(_requests(name), "key-cancel")
    emulator.advance(BATCH_SECONDS / 2)  # running, some items done
    await provider.cancel_batch(handle)
    status = await provider.poll_batch(handle)
    assert status.state in ("cancelling", "running"), status
    emulator.advance(BATCH_SECONDS)
    if name == "anthropic":
        # Canceled while running, an Anthropic batch ends with a result per request (B8).
        await poll_until(provider, handle, ("ended",))
        results = await _results(provider, handle)
        assert set(results) == {"r0", "r1", "r2", "r3"}
        assert {r.type for r in results.values()} <= {"succeeded", "canceled"}
        assert any(r.type == "canceled" for r in results.values())
    else:
        status = await poll_until(provider, handle, ("cancelled",))
        assert status.known


async def test_batch_stuck_cancelling_has_not_ended(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    handle = await provider.submit_batch(_requests(name), "key-stuck")
    emulator.add_fault(
        {"provider": name, "op": "batch.cancel", "fault": {"batch_stuck_cancelling": True}}
    )
    await provider.cancel_batch(handle)
    emulator.advance(BATCH_SECONDS * 3)
    status = await provider.poll_batch(handle)
    assert status.state in ("cancelling", "running") and status.state != "ended"


async def test_unknown_batch_status_is_running_and_unknown(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    handle = await provider.submit_batch(_requests(name), "key-odd")
    emulator.add_fault(
        {"provider": name, "op": "batch.get", "fault": {"batch_status": "BATCH_STATE_MYSTERY"}}
    )
    status = await provider.poll_batch(handle)
    assert status.state == "running"
    assert status.known is False
    assert "MYSTERY" in status.raw_status


@pytest.mark.parametrize("variant", NOT_ANTHROPIC, indirect=True)
@pytest.mark.parametrize("end", ["failed", "expired", "cancelled"])
async def test_batch_end_faults_map_to_states(
    variant: tuple[str, Any], end: str, emulator: Any
) -> None:
    name, provider = variant
    emulator.add_fault({"provider": name, "op": "batch.create", "fault": {"batch_end": end}})
    handle = await provider.submit_batch(_requests(name), f"key-{end}")
    emulator.advance(BATCH_SECONDS + 1)
    status = await poll_until(provider, handle, (end,))
    assert status.known


@pytest.mark.parametrize("variant", ["anthropic"], indirect=True)
async def test_anthropic_expired_batch_ends_with_expired_items(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    emulator.add_fault(
        {"provider": name, "op": "batch.create", "fault": {"batch_end": "expired", "answered": 1}}
    )
    handle = await provider.submit_batch(_requests(name), "key-expired")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))
    kinds = sorted(r.type for r in (await _results(provider, handle)).values())
    assert kinds == ["expired", "expired", "expired", "succeeded"]


@pytest.mark.parametrize("variant", ["openai", "groq"], indirect=True)
async def test_b7_expired_openai_style_batch_is_not_read_and_bills_what_it_answered(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    emulator.add_fault(
        {"provider": name, "op": "batch.create", "fault": {"batch_end": "expired", "answered": 2}}
    )
    handle = await provider.submit_batch(_requests(name), "key-expired")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("expired",))
    with pytest.raises(BatchNotEnded) as raised:
        await _results(provider, handle)
    assert (raised.value.state, raised.value.raw_status) == ("expired", "expired")
    work = await provider.billed_work(handle)
    assert (work.status.state, work.answered) == ("expired", 2)
    if name == "openai":  # OpenAI reports a batch's total usage; Groq does not
        assert work.usage is not None and work.usage.output_tokens > 0
    else:
        assert work.usage is None
    assert ops(emulator.stats(), name).get("file.download", 0) == 0


#: The status a provider reports for a batch that turned bad, as its API spells it.
TURNED = {
    "openai": "expired",
    "groq": "failed",
    "gemini": "BATCH_STATE_CANCELLED",
    "anthropic": "canceling",
}
TURNED_STATE = {
    "openai": "expired",
    "groq": "failed",
    "gemini": "cancelled",
    "anthropic": "cancelling",
}


async def test_b7_results_are_read_only_from_a_batch_ended_when_fetched_right_before_reading(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    handle = await provider.submit_batch(_requests(name), "key-turned")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))  # the poll saw it ended
    emulator.add_fault(
        {"provider": name, "op": "batch.get", "times": 1, "fault": {"batch_status": TURNED[name]}}
    )
    reads = {
        op: n
        for op, n in ops(emulator.stats(), name).items()
        if op in ("file.download", "batch.results")
    }

    with pytest.raises(BatchNotEnded) as raised:
        await _results(provider, handle)

    assert raised.value.state == TURNED_STATE[name] and handle.id in str(raised.value)
    assert {
        op: n
        for op, n in ops(emulator.stats(), name).items()
        if op in ("file.download", "batch.results")
    } == reads  # nothing was read
    assert len(await _results(provider, handle)) == 4  # once it is ended again, it is read


def ops(stats: dict[str, Any], provider: str) -> dict[str, int]:
    return dict(stats["requests"].get(provider, {}))


async def test_records_left_out_are_not_returned(variant: tuple[str, Any], emulator: Any) -> None:
    name, provider = variant
    emulator.add_fault({"provider": name, "op": "batch.create", "fault": {"batch_drop_records": 1}})
    handle = await provider.submit_batch(_requests(name), "key-drop")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))
    results = await _results(provider, handle)
    dropped = [d for b in emulator.stats()["batches"] for d in b["dropped"]]
    assert len(results) == 3 and len(dropped) == 1
    assert dropped[0] not in results


async def test_truncated_batch_answers_stop_with_max_tokens(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    emulator.add_fault({"provider": name, "op": "batch.create", "fault": {"answer": "truncated"}})
    handle = await provider.submit_batch(_requests(name, 2), "key-trunc")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))
    results = await _results(provider, handle)
    assert {r.response.stop_reason for r in results.values() if r.response} == {"max_tokens"}


async def test_batch_items_are_billed_once(variant: tuple[str, Any], emulator: Any) -> None:
    name, provider = variant
    handle = await provider.submit_batch(_requests(name, 3), "key-billed")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))
    await _results(provider, handle)
    await _results(provider, handle)  # reading twice costs nothing
    stats = emulator.stats()
    assert stats["answered"] == 3 and stats["duplicate_answers"] == 0
    assert stats["requests"][name]["batch.create"] == 1


#: The call that reads a finished batch's results, per variant.
RESULTS_OP = {
    "openai": "file.download",
    "anthropic": "batch.results",
    "gemini-inline": "batch.get",
    "gemini-file": "file.download",
    "groq": "file.download",
}


@pytest.mark.parametrize("fault", [{"http": 503}, {"drop_connection": True}], ids=["503", "drop"])
async def test_reading_results_that_fail_is_retryable(
    variant: tuple[str, Any], fault: dict[str, Any], emulator: Any, request: pytest.FixtureRequest
) -> None:
    name, provider = variant
    handle = await provider.submit_batch(_requests(name, 2), "key-read")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))
    op = RESULTS_OP[request.node.callspec.params["variant"]]
    # aiohttp (google-genai's transport) re-sends an idempotent request once when a reused
    # keep-alive connection closes (RFC 9112 §9.3.1): a GET needs two drops to fail.
    times = 2 if name == "gemini" and "drop_connection" in fault else 1
    emulator.add_fault({"provider": name, "op": op, "times": times, "fault": fault})
    with pytest.raises(RetryableError):
        await _results(provider, handle)
    emulator.clear_faults()
    assert len(await _results(provider, handle)) == 2  # the next read gets everything


async def test_billed_work_counts_what_an_ended_batch_answered_without_taking_the_answers(
    variant: tuple[str, Any], emulator: Any
) -> None:
    name, provider = variant
    handle = await provider.submit_batch(_requests(name), "key-billed")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))

    work = await provider.billed_work(handle)

    assert (work.status.state, work.answered) == ("ended", 4)
    if name in ("openai", "gemini"):  # the batch's usage, or its responses'
        assert work.usage is not None and work.usage.input_tokens > 0
        assert work.usage.output_tokens > 0
    else:  # Groq and Anthropic report counts only
        assert work.usage is None
