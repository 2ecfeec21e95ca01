"""Mistral: what differs from OpenAI's protocol, on both transports against the emulator's
Mistral routes (the ``mistralai`` SDK for the SDK transport and for batches) — the seed as
``random_seed``, a Magistral model's thinking chunks kept out of the answer, Mistral's flat
error body, ``{custom_id, body}`` batch lines in a batch job that names its model, and every
job status the SDK documents mapped."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest
from provider_support import make_request, poll_until

from agac.errors import FatalError, RetryableError
from agac.providers.base import BatchHandle
from agac.providers.mistral import MISTRAL_STATES, mistral_status
from agac.providers.registry import provider_spec


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [e for e in emulator.requests() if e["op"] == "chat"]


async def test_mistral_live_sends_random_seed_and_max_tokens(
    make_provider: Any, emulator: Any
) -> None:
    """The seed goes as ``random_seed`` (Mistral has no ``seed``), the limit as
    ``max_tokens``, the schema as ``json_schema``; the key as a bearer token."""
    request = dataclasses.replace(make_request("mistral"), seed=7, max_tokens=99)
    response = await make_provider("mistral").complete(request)
    assert response.stop_reason == "end" and isinstance(response.parsed, dict)
    [chat] = _chats(emulator)
    assert chat["path"] == "/mistral/v1/chat/completions"
    assert chat["headers"]["authorization"] == "Bearer emulator-key"
    body = chat["body"]
    assert body["random_seed"] == 7 and "seed" not in body
    assert body["max_tokens"] == 99 and "max_completion_tokens" not in body
    assert body["response_format"]["type"] == "json_schema"


async def test_mistral_magistral_thinking_chunks_stay_out_of_the_answer(
    make_provider: Any, emulator: Any
) -> None:
    """A Magistral model answers in chunks: the ``thinking`` chunk is reasoning, the
    ``text`` chunk the answer, which parses."""
    request = dataclasses.replace(make_request("mistral"), model="magistral-medium-latest")
    response = await make_provider("mistral").complete(request)
    assert response.stop_reason == "end"
    assert isinstance(response.parsed, dict) and "Hmm." not in response.text
    assert response.usage.reasoning_tokens > 0
    [chat] = _chats(emulator)
    assert chat["body"]["model"] == "magistral-medium-latest"


@pytest.mark.parametrize(
    ("status", "raised"),
    [(400, FatalError), (401, FatalError), (429, RetryableError), (503, RetryableError)],
)
async def test_mistral_flat_error_body_is_translated(
    make_provider: Any, emulator: Any, status: int, raised: type[Exception]
) -> None:
    """Mistral's errors are a flat ``{object: error, message, type, code}``: translated at
    the adapter with the message kept, on both transports."""
    emulator.add_fault(
        {
            "provider": "mistral",
            "op": "chat",
            "times": 1,
            "fault": {"http": status, "message": "Mistral says no"},
        }
    )
    with pytest.raises(raised) as caught:
        await make_provider("mistral").complete(make_request("mistral"))
    assert "Mistral says no" in str(caught.value)
    assert caught.value.status == status  # type: ignore[attr-defined]


async def test_mistral_batch_lines_are_custom_id_and_body_in_a_job_naming_the_model(
    make_provider: Any, emulator: Any
) -> None:
    """The file uploaded with purpose ``batch`` holds ``{custom_id, body}`` lines (no
    method or url); the job names the endpoint, the model, ``timeout_hours`` and our key;
    results come back by ``custom_id`` once the job is ``SUCCESS``."""
    provider = make_provider("mistral", batch_input="file")
    requests = [make_request("mistral", f"review {i}", custom_id=f"r{i}") for i in range(3)]
    handle = await provider.submit_batch(requests, "mistral-key-1")

    [upload] = [e for e in emulator.requests() if e["op"] == "file.upload"]
    [create] = [e for e in emulator.requests() if e["op"] == "batch.create"]
    assert upload["path"] == "/mistral/v1/files" and create["path"] == "/mistral/v1/batch/jobs"
    stored = emulator.stats()["batches"]
    assert [b["requests"] for b in stored] == [3]
    content = [json.loads(line) for line in _file_content(emulator, handle).splitlines()]
    assert [sorted(line) for line in content] == [["body", "custom_id"]] * 3
    assert [line["body"]["model"] for line in content] == ["mistral-small-latest"] * 3

    status = await poll_until(provider, handle, ("running",))
    assert status.raw_status in ("QUEUED", "RUNNING")
    emulator.advance(3600)
    status = await poll_until(provider, handle, ("ended",))
    assert (status.raw_status, status.request_count, status.completed) == ("SUCCESS", 3, 3)
    results = {r.custom_id: r async for r in provider.batch_results(handle)}
    assert sorted(results) == ["r0", "r1", "r2"]
    assert all(r.type == "succeeded" and r.response is not None for r in results.values())
    assert {r.response.service_tier for r in results.values() if r.response} == {"batch"}

    found = await provider.find_batch("mistral-key-1")
    assert found is not None and (found.id, found.meta["request_count"]) == (handle.id, 3)
    assert await provider.find_batch("no-such-key") is None


async def test_mistral_small_batch_goes_inline_and_reads_its_results_inline(
    make_provider: Any, emulator: Any
) -> None:
    """A small batch (``batch_input: auto``) is not uploaded: the job carries its
    ``requests`` inline, with the model, endpoint and key; its results, on no file, are
    asked for inline (``outputs``) and read by ``custom_id``: a record the job left out is
    not returned (B6), an errored one is its error."""
    emulator.add_fault(
        {"provider": "mistral", "op": "batch.create", "fault": {"batch_drop_records": 1}},
        {
            "provider": "mistral",
            "op": "batch.create",
            "match": {"custom_id": "r2"},
            "fault": {"http": 400, "message": "bad request r2"},
        },
    )
    provider = make_provider("mistral")
    requests = [make_request("mistral", f"review {i}", custom_id=f"r{i}") for i in range(4)]
    handle = await provider.submit_batch(requests, "mistral-inline-1")

    assert not [e for e in emulator.requests() if e["op"] == "file.upload"]
    [create] = [e for e in emulator.requests() if e["op"] == "batch.create"]
    assert create["path"] == "/mistral/v1/batch/jobs"
    assert handle.meta["input_file_id"] == "" and handle.meta["request_count"] == 4
    emulator.advance(3600)
    status = await poll_until(provider, handle, ("ended",))
    assert status.raw_status == "SUCCESS"
    results = {r.custom_id: r async for r in provider.batch_results(handle)}
    gets = [e for e in emulator.requests() if e["op"] == "batch.get"]
    assert any("inline=true" in str(e["query"]) for e in gets)
    assert len(results) == 3  # one, chosen by the emulator, left out by the job
    for custom_id, result in results.items():
        if custom_id == "r2":
            assert result.type == "errored" and "bad request r2" in str(result.error)
        else:
            assert result.type == "succeeded" and result.response is not None
    found = await provider.find_batch("mistral-inline-1")
    assert found is not None and found.id == handle.id


def _file_content(emulator: Any, handle: BatchHandle) -> str:
    """The input file of the job, as the emulator stored it."""
    import urllib.request

    url = emulator.env()["MISTRAL_BASE_URL"] + "/v1/files/" + handle.meta["input_file_id"]
    with urllib.request.urlopen(url + "/content") as answer:
        return str(answer.read().decode())


def test_mistral_every_documented_job_status_has_a_rule() -> None:
    """Every status the SDK documents is mapped: ``TIMEOUT_EXCEEDED`` is expired (B7),
    ``CANCELLATION_REQUESTED`` still cancelling (B8); an unknown one is running (B9)."""
    from mistralai.client.models import BatchJobStatus

    documented = {a for a in typing.get_args(typing.get_args(BatchJobStatus)[0])}
    assert documented == set(MISTRAL_STATES)
    assert mistral_status({"status": "TIMEOUT_EXCEEDED"}).state == "expired"
    assert mistral_status({"status": "CANCELLATION_REQUESTED"}).state == "cancelling"
    assert mistral_status({"status": "SUCCESS"}).state == "ended"
    unknown = mistral_status({"status": "REBALANCING", "total_requests": 4})
    assert (unknown.state, unknown.known, unknown.raw_status) == ("running", False, "REBALANCING")
    assert unknown.request_count == 4


def test_mistral_spec() -> None:
    """Both transports on the mistralai SDK, its own key, a file batch API of a million
    requests and 512 MB, images and PDFs on its vision models only."""
    spec = provider_spec("mistral")
    assert spec.transports == ("lean", "sdk") and spec.sdk_module == "mistralai.client"
    assert spec.credential_env == ("MISTRAL_API_KEY",) and spec.extra == "mistral"
    assert spec.batch is not None and spec.batch.input == "file"
    assert (spec.batch.max_requests, spec.batch.max_bytes) == (1_000_000, 512 * 1024 * 1024)
    assert spec.flex is None and spec.attachments is not None
    assert spec.attachments.kinds == {"image", "pdf"}
    assert spec.attachments.refusal("mistral", "pixtral-large-latest", "pdf") is None
    assert spec.attachments.refusal("mistral", "codestral-latest", "image") is not None
