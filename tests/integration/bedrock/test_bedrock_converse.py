"""Bedrock live calls through boto3's Converse against the emulator's runtime over
loopback: one body for every family, a schema as the forced ``answer`` tool, images as
Converse image blocks, cache points and the cache read/write tokens of its usage, every
stop reason read per the stop table, and its errors in agac's taxonomy."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from bedrock_support import MODEL, request

from agac.errors import ConfigError, FatalError, RetryableError
from agac.media import describe_file
from agac.providers._converse_wire import CONVERSE_STOPS
from agac.providers.base import CacheHint, Message, Request, ToolDef
from agac.providers.registry import provider_spec
from agac.providers.stops import STOP_TABLES
from agac.samplefiles import png_bytes


def _chat(emulator: Any) -> dict[str, Any]:
    [chat] = [r for r in emulator.requests() if r["op"] == "chat"]
    return chat


async def test_bedrock_converse_one_body_schema_as_forced_answer_tool(
    bedrock: Any, emulator: Any
) -> None:
    answer = await bedrock().complete(request())
    assert answer.stop_reason == "end" and answer.raw_stop == "tool_use"
    assert isinstance(answer.parsed, dict) and set(answer.parsed) == {"label"}
    chat = _chat(emulator)
    assert chat["path"] == f"/bedrock-runtime/model/{MODEL}/converse"
    body = chat["body"]
    assert body["system"] == [{"text": "You label reviews."}]
    assert body["inferenceConfig"] == {"maxTokens": 256}
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "answer"}}
    assert "authorization" in chat["headers"]  # SigV4, by botocore
    assert chat["headers"]["authorization"].startswith("AWS4-HMAC-SHA256")


async def test_bedrock_converse_usage_reads_cache_read_and_write_tokens(
    bedrock: Any, emulator: Any
) -> None:
    """``inputTokens`` already leaves cache reads and writes out; both are kept apart."""
    emulator.add_fault(
        {
            "provider": "bedrock",
            "op": "chat",
            "fault": {"reply": {"usage": {"cache_read_tokens": 3, "cache_write_tokens": 2}}},
        }
    )
    hint = CacheHint(mode="on", static_chars=9, prefix_tokens=4)
    answer = await bedrock().complete(request("Classify: the rest of it", cache=hint))
    usage = answer.usage
    assert (usage.cached_tokens, usage.cache_write_tokens) == (3, 2)
    assert usage.input_tokens >= 0 and usage.output_tokens > 0
    body = _chat(emulator)["body"]
    assert body["system"][-1] == {"cachePoint": {"type": "default"}}
    first = body["messages"][0]["content"]
    assert first == [
        {"text": "Classify:"},
        {"cachePoint": {"type": "default"}},
        {"text": " the rest of it"},
    ]


async def test_bedrock_cache_points_only_for_families_that_cache(
    bedrock: Any, emulator: Any
) -> None:
    """Llama on Bedrock refuses a cache point: none is sent for it."""
    hint = CacheHint(mode="on", static_chars=9)
    llama = Request(
        "bedrock", "meta.llama3-70b-instruct-v1:0", (Message("user", "Classify: it"),), cache=hint
    )
    await bedrock().complete(llama)
    assert "cachePoint" not in str(_chat(emulator)["body"])


@pytest.mark.parametrize("stop", CONVERSE_STOPS)
async def test_bedrock_converse_stop_reason_read_per_table(
    bedrock: Any, emulator: Any, stop: str
) -> None:
    emulator.add_fault({"provider": "bedrock", "op": "chat", "fault": {"reply": {"stop": stop}}})
    plain = Request("bedrock", MODEL, (Message("user", "hello"),))
    answer = await bedrock().complete(plain)
    rule = STOP_TABLES["bedrock"][stop]
    expected = {"tool": "unexpected"}.get(rule, rule)  # no tool call came: never an answer
    assert (answer.stop_reason, answer.raw_stop) == (expected, stop)


async def test_bedrock_converse_unknown_stop_is_unexpected(bedrock: Any, emulator: Any) -> None:
    emulator.add_fault(
        {"provider": "bedrock", "op": "chat", "fault": {"reply": {"stop": "new_reason"}}}
    )
    answer = await bedrock().complete(Request("bedrock", MODEL, (Message("user", "hi"),)))
    assert answer.stop_reason == "unexpected" and "new_reason" in (answer.stop_detail or "")


async def test_bedrock_converse_image_as_image_block(
    bedrock: Any, emulator: Any, tmp_path: Path
) -> None:
    path = tmp_path / "cat.png"
    path.write_bytes(png_bytes())
    image = describe_file(str(path))
    msg = Message("user", "What is it?", (image,), "before")
    await bedrock().complete(Request("bedrock", MODEL, (msg,)))
    [block, text] = _chat(emulator)["body"]["messages"][0]["content"]
    assert text == {"text": "What is it?"}
    assert block["image"]["format"] == "png"
    assert base64.b64decode(block["image"]["source"]["bytes"]) == png_bytes()
    assert "image" in (provider_spec("bedrock").attachments or None).kinds  # type: ignore[union-attr]


async def test_bedrock_converse_tool_calls_and_results(bedrock: Any, emulator: Any) -> None:
    """An action's tools go as tool specs; a call comes back as a ``tool_use`` turn, and
    its result goes back in a user turn's ``toolResult``."""
    tool = ToolDef("lookup", "Look an order up.", {"type": "object", "properties": {}})
    first = Request(
        "bedrock",
        MODEL,
        (Message("user", "[[emulator calls: lookup]] where is my order?"),),
        tools=(tool,),
    )
    turn = await bedrock().complete(first)
    assert turn.stop_reason == "tool_use"
    [call] = turn.tool_calls
    follow = Request(
        "bedrock",
        MODEL,
        (
            *first.messages,
            Message("assistant", "", tool_calls=turn.tool_calls),
            Message("tool", "shipped", tool_call_id=call.id, name=call.name),
        ),
        tools=(tool,),
    )
    answer = await bedrock().complete(follow)
    assert answer.stop_reason == "end" and "shipped" in answer.text
    last = [r for r in emulator.requests() if r["op"] == "chat"][-1]["body"]
    result = last["messages"][-1]["content"][0]["toolResult"]
    assert result == {"toolUseId": call.id, "content": [{"text": "shipped"}]}
    body = next(r for r in emulator.requests() if r["op"] == "chat")["body"]
    assert body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "lookup"


@pytest.mark.parametrize(
    ("status", "kind"), [(429, RetryableError), (503, RetryableError), (400, FatalError)]
)
async def test_bedrock_converse_errors_translated(
    bedrock: Any, emulator: Any, status: int, kind: type[Exception]
) -> None:
    emulator.add_fault({"provider": "bedrock", "op": "chat", "fault": {"http": status}})
    with pytest.raises(kind) as caught:
        await bedrock().complete(request())
    assert "bedrock: HTTP" in str(caught.value)


async def test_bedrock_without_region_names_the_fix(
    bedrock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(ConfigError) as caught:
        bedrock()
    assert "region" in str(caught.value)


async def test_bedrock_without_credentials_names_the_fix(
    bedrock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(ConfigError) as caught:
        bedrock()
    assert "missing_credentials" in str(caught.value)
