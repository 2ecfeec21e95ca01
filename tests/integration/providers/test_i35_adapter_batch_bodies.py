"""Issue 35, "Silent successes on real provider responses", in batches: the recorded bodies
(tests/fixtures/recorded/) served as batch items by the emulator's ``reply: {body}`` fault on
``batch.create``, read through each adapter's ``batch_results`` (and ``billed_work``) by the
same rules as live answers. Nothing is mocked: the adapters talk to the emulator over loopback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from provider_support import BATCH_SECONDS, poll_until

from agac.providers.base import BatchHandle, Message, Request, Result

RECORDED = Path(__file__).parents[2] / "fixtures" / "recorded"


def recorded(name: str) -> dict[str, Any]:
    return dict(json.loads((RECORDED / name).read_text(encoding="utf-8")))


def _request(provider: str, model: str, custom_id: str = "r0") -> Request:
    return Request(
        provider=provider,
        model=model,
        messages=(Message("user", "Answer the question."),),
        max_tokens=2048,
        custom_id=custom_id,
    )


async def _batch_of_one(
    emulator: Any, provider: Any, model: str, body: dict[str, Any]
) -> tuple[BatchHandle, Result]:
    """Submit one request whose item the emulator answers with ``body``; its one result."""
    emulator.add_fault(
        {"provider": provider.name, "op": "batch.create", "fault": {"reply": {"body": body}}}
    )
    handle = await provider.submit_batch([_request(provider.name, model)], "i35-key")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))
    (result,) = [r async for r in provider.batch_results(handle)]
    return handle, result


async def test_i35_3_groq_batch_lines_ask_for_reasoning_apart_and_results_split_it(
    emulator: Any, make_provider: Any
) -> None:
    import groq

    inline = recorded("groq_deepseek_r1_think_inline.json")
    provider = make_provider("groq")
    handle, result = await _batch_of_one(
        emulator, provider, "deepseek-r1-distill-llama-70b", inline
    )

    # The line the batch was made of asks for the reasoning apart.
    client = groq.AsyncGroq(
        api_key=os.environ["GROQ_API_KEY"], base_url=os.environ["GROQ_BASE_URL"], max_retries=0
    )
    try:
        content = await client.files.content(handle.meta["input_file_id"])
        (line,) = [json.loads(x) for x in (await content.read()).splitlines() if x.strip()]
    finally:
        await client.close()
    assert line["body"]["reasoning_format"] == "parsed"
    # A server that inlines it anyway: split off, counted as reasoning.
    assert result.type == "succeeded" and result.response is not None
    content_text = inline["choices"][0]["message"]["content"]
    assert result.response.text == content_text.split("</think>", 1)[1].lstrip()
    usage = result.response.usage
    assert usage.output_tokens == inline["usage"]["completion_tokens"]
    assert 0 < usage.reasoning_tokens < usage.output_tokens


@pytest.mark.parametrize("transport", ["sdk"], indirect=True)
async def test_i35_4_gemini_batch_function_call_with_stop_is_unexpected_stop(
    emulator: Any, make_provider: Any
) -> None:
    call = recorded("gemini_function_call_stop.json")
    provider = make_provider("gemini")
    _, result = await _batch_of_one(emulator, provider, "gemini-2.0-flash", call)

    assert result.type == "succeeded" and result.response is not None
    assert result.response.stop_reason == "unexpected"
    assert "get_user_country" in str(result.response.stop_detail)


@pytest.mark.parametrize("transport", ["sdk"], indirect=True)
async def test_i35_5_gemini_batch_grounding_prompt_tokens_are_billed_input(
    emulator: Any, make_provider: Any
) -> None:
    grounded = recorded("gemini_grounding_usage.json")
    meta = grounded["usageMetadata"]
    provider = make_provider("gemini")
    handle, result = await _batch_of_one(emulator, provider, "gemini-2.5-pro", grounded)

    assert result.response is not None
    billed_input = meta["promptTokenCount"] + meta["toolUsePromptTokenCount"]
    assert result.response.usage.input_tokens == billed_input
    # What a batch agac gives up bills, read without its answers, counts them too.
    work = await provider.billed_work(handle)
    assert work.usage is not None and work.usage.input_tokens == billed_input


@pytest.mark.parametrize("transport", ["sdk"], indirect=True)
async def test_i35_5_anthropic_batch_compaction_iterations_are_what_is_billed(
    emulator: Any, make_provider: Any
) -> None:
    compacted = recorded("anthropic_compaction_iterations.json")
    provider = make_provider("anthropic")
    _, result = await _batch_of_one(emulator, provider, "claude-sonnet-4-5", compacted)

    assert result.type == "succeeded" and result.response is not None
    usage = result.response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_write_tokens) == (
        329,
        136,
        55_096,
    )
    assert result.response.text == "Hello!"
