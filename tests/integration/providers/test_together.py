"""Together AI: what differs from OpenAI's protocol, on both transports against the
emulator's Together routes (the ``together`` SDK for the SDK transport and for batches) —
``eos`` as an answer, ``{custom_id, body}`` lines uploaded with purpose ``batch-api`` under
a name that finds the batch again (Together's batches carry no metadata), the per-model
enqueued-token cap as a wait, what an expired batch billed counted from its output file,
and every batch status the SDK documents mapped."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from provider_support import make_request, poll_until

from agac.errors import FatalError, WaitError
from agac.providers.registry import provider_spec
from agac.providers.together import TOGETHER_STATES, batch_file_name, together_status


async def test_together_eos_is_an_answer(make_provider: Any, emulator: Any) -> None:
    """``eos`` (the model's end-of-sequence token) answers; the limit goes as
    ``max_tokens`` to ``/v1/chat/completions``."""
    emulator.add_fault({"provider": "together", "op": "chat", "fault": {"reply": {"stop": "eos"}}})
    response = await make_provider("together").complete(make_request("together"))
    assert (response.stop_reason, response.raw_stop) == ("end", "eos")
    assert isinstance(response.parsed, dict)
    [chat] = [e for e in emulator.requests() if e["op"] == "chat"]
    assert chat["path"] == "/together/v1/chat/completions"
    assert chat["body"]["max_tokens"] == 256 and "max_completion_tokens" not in chat["body"]


async def test_together_batch_file_is_named_after_its_key_and_found_by_it(
    make_provider: Any, emulator: Any
) -> None:
    """The upload is the SDK's three steps (form, PUT, preprocess) with purpose
    ``batch-api``; the file's name carries the key and line count, and ``find_batch``
    finds the batch by it; results come back by ``custom_id``."""
    provider = make_provider("together")
    requests = [make_request("together", f"review {i}", custom_id=f"r{i}") for i in range(3)]
    handle = await provider.submit_batch(requests, "run1:classify:a.jsonl:0")

    paths = [(e["method"], e["path"]) for e in emulator.requests()]
    assert ("POST", "/together/v1/files") in paths
    assert ("POST", "/together/v1/batches") in paths
    assert any(m == "PUT" and p.startswith("/together/_upload/") for m, p in paths)
    assert any(p.endswith("/preprocess") for _, p in paths)

    found = await provider.find_batch("run1:classify:a.jsonl:0")
    assert found is not None and (found.id, found.meta["request_count"]) == (handle.id, 3)
    assert await provider.find_batch("run1:classify:b.jsonl:0") is None
    assert batch_file_name("run1:classify:a.jsonl:0", 3) == "agac-run1_classify_a.jsonl_0-3.jsonl"

    emulator.advance(3600)
    status = await poll_until(provider, handle, ("ended",))
    assert status.raw_status == "COMPLETED"
    results = [r async for r in provider.batch_results(handle)]
    assert sorted(r.custom_id for r in results) == ["r0", "r1", "r2"]
    assert all(r.type == "succeeded" for r in results)


async def test_together_enqueued_token_cap_on_create_is_a_wait(
    make_provider: Any, emulator: Any
) -> None:
    """A create refused for the model's enqueued-token cap is a wait (B2), never a fatal
    refusal of the file; another 400 on create is a refusal."""
    provider = make_provider("together")
    message = "Batch would exceed the enqueued token limit for this model"
    emulator.add_fault(
        {
            "provider": "together",
            "op": "batch.create",
            "times": 1,
            "fault": {"http": 400, "message": message},
        },
        {
            "provider": "together",
            "op": "batch.create",
            "times": 1,
            "fault": {"http": 400, "message": "endpoint is not supported"},
        },
    )
    requests = [make_request("together", custom_id="r0")]
    with pytest.raises(WaitError) as waited:
        await provider.submit_batch(requests, "k1")
    assert waited.value.retry_after == 300.0 and "enqueued" in str(waited.value)
    with pytest.raises(FatalError):
        await provider.submit_batch(requests, "k2")


async def test_together_expired_batch_bills_what_its_output_file_holds(
    make_provider: Any, emulator: Any
) -> None:
    """Together reports a progress percentage, no counts: the answers an expired batch
    billed are counted from its output file, and none is read as a result (B7)."""
    emulator.add_fault(
        {
            "provider": "together",
            "op": "batch.create",
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 2},
        }
    )
    provider = make_provider("together")
    requests = [make_request("together", f"r {i}", custom_id=f"r{i}") for i in range(4)]
    handle = await provider.submit_batch(requests, "k-expired")
    emulator.advance(3600)
    status = await poll_until(provider, handle, ("expired",))
    assert status.raw_status == "EXPIRED"
    billed = await provider.billed_work(handle)
    assert (billed.status.state, billed.answered, billed.usage) == ("expired", 2, None)


def test_together_every_documented_status_has_a_rule() -> None:
    """Every status the SDK documents is mapped; an unknown one is running (B9)."""
    from together.types.batch_job import BatchJob

    annotation = BatchJob.model_fields["status"].annotation
    documented = set(typing.get_args(typing.get_args(annotation)[0]))
    assert documented == set(TOGETHER_STATES)
    assert together_status({"status": "EXPIRED"}).state == "expired"
    unknown = together_status({"status": "QUEUED_FOR_GPU"})
    assert (unknown.state, unknown.known) == ("running", False)


def test_together_spec() -> None:
    spec = provider_spec("together")
    assert spec.transports == ("lean", "sdk") and spec.sdk_module == "together"
    assert spec.credential_env == ("TOGETHER_API_KEY",) and spec.extra == "together"
    assert spec.batch is not None
    assert (spec.batch.max_requests, spec.batch.max_bytes) == (50_000, 100 * 1024 * 1024)
