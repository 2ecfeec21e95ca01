"""Claude on Vertex AI, live, against the emulator over loopback on both transports: agac's
lean rawPredict call and Anthropic's own Vertex client (``AsyncAnthropicVertex``), both on
the service account's token from the emulator's token endpoint. The body is Anthropic's
with the model in the path and ``anthropic_version: vertex-2023-10-16``; stops, usage,
prompt caching, attachments, the structured-output fallback and errors read as the direct
API's."""

from __future__ import annotations

import math
from typing import Any

import pytest
from claude_support import CLAUDE, PREDICT, claude_request

from agac.errors import AttachmentError, FatalError, RetryableError, WaitError
from agac.providers.base import CacheHint, Message, Request
from agac.providers.registry import provider_spec
from agac.providers.vertex_claude import VERTEX_VERSION, is_claude

TRANSPORTS = ["lean", "sdk"]
SYSTEM = "You label product reviews."
STATIC = "Read the review below and label its sentiment, score and tags. " * 70
MARKED = math.ceil((len(SYSTEM) + len(STATIC)) / 4)
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if r["op"] == "chat" and r["provider"] == "vertex"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_claude_live_raw_predict_with_vertex_version_and_no_model(
    vertex: Any, emulator: Any, transport: str
) -> None:
    answer = await vertex(transport).complete(claude_request())
    assert (answer.stop_reason, answer.raw_stop) == ("end", "end_turn")
    assert isinstance(answer.parsed, dict) and set(answer.parsed) == {"label"}
    assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0
    assert answer.model == CLAUDE
    [chat] = _chats(emulator)
    assert chat["path"] == PREDICT
    body = chat["body"]
    assert "model" not in body and body["anthropic_version"] == VERTEX_VERSION
    assert body["system"] == "You label reviews."
    assert body["output_config"]["format"]["schema"] == claude_request().schema
    assert chat["headers"]["authorization"].startswith("Bearer ya29.emulator-")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_claude_live_and_gemini_share_one_token(
    vertex: Any, emulator: Any, transport: str
) -> None:
    from vertex_support import request

    provider = vertex(transport)
    await provider.complete(claude_request("one"))
    await provider.complete(request("two"))
    await provider.complete(claude_request("three"))
    bearers = {c["headers"]["authorization"] for c in _chats(emulator)}
    assert len(_chats(emulator)) == 3 and len(bearers) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_claude_live_stops_read_as_anthropic(
    vertex: Any, emulator: Any, transport: str
) -> None:
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "chat",
            "times": 1,
            "fault": {"reply": {"stop": "max_tokens"}},
        },
        {
            "provider": "vertex",
            "op": "chat",
            "times": 1,
            "fault": {
                "reply": {
                    "stop": "refusal",
                    "content": None,
                    "stop_details": {"type": "refusal", "category": "cyber", "explanation": "no"},
                }
            },
        },
    )
    provider = vertex(transport)
    cut = await provider.complete(claude_request("one"))
    assert (cut.stop_reason, cut.raw_stop) == ("max_tokens", "max_tokens")
    refused = await provider.complete(claude_request("two"))
    assert refused.stop_reason == "refusal" and refused.refusal
    assert "cyber" in (refused.stop_detail or "")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_claude_live_prompt_cache_marked_written_then_read(
    vertex: Any, emulator: Any, transport: str
) -> None:
    provider = vertex(transport)
    hint = CacheHint(static_chars=len(STATIC), key="agac-k1")

    def ask(rest: str) -> Request:
        messages = (Message("system", SYSTEM), Message("user", STATIC + rest))
        return Request("vertex", CLAUDE, messages, max_tokens=64, cache=hint)

    first = await provider.complete(ask("Review: works well."))
    body = _chats(emulator)[-1]["body"]
    assert body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert (first.usage.cache_write_tokens, first.usage.cached_tokens) == (MARKED, 0)
    second = await provider.complete(ask("Review: too loud."))
    assert (second.usage.cache_write_tokens, second.usage.cached_tokens) == (0, MARKED)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_claude_live_image_goes_as_an_anthropic_block(
    vertex: Any, emulator: Any, transport: str, tmp_path: Any
) -> None:
    from agac.media import describe_file
    from agac.samplefiles import png_bytes

    path = tmp_path / "photo.png"
    path.write_bytes(png_bytes())
    att = describe_file(str(path))
    request = Request("vertex", CLAUDE, (Message("user", "What is this?", (att,)),), max_tokens=64)
    answer = await vertex(transport).complete(request)
    assert answer.stop_reason == "end"
    [block] = [
        b for b in _chats(emulator)[-1]["body"]["messages"][0]["content"] if b["type"] == "image"
    ]
    assert block["source"]["type"] == "base64" and block["source"]["media_type"] == "image/png"


async def test_i41_vertex_claude_attachment_over_claudes_limit_is_refused_before_sending(
    vertex: Any, emulator: Any, tmp_path: Any
) -> None:
    """Vertex's Gemini limits (7 MB an image) are not Claude's (3.75 MB of file): an image
    between them fails its record before any call."""
    from agac.media import describe_file
    from agac.samplefiles import png_bytes

    path = tmp_path / "big.png"
    path.write_bytes(png_bytes() + b"\0" * (5 * 1024 * 1024))
    att = describe_file(str(path))
    request = Request("vertex", CLAUDE, (Message("user", "What?", (att,)),), max_tokens=64)
    with pytest.raises(AttachmentError):
        await vertex().complete(request)
    assert _chats(emulator) == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_claude_live_schema_refused_falls_back_to_a_forced_tool(
    vertex: Any, emulator: Any, transport: str
) -> None:
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "chat",
            "times": 1,
            "fault": {"http": 400, "message": "output_config: Extra inputs are not permitted"},
        }
    )
    provider = vertex(transport)
    await provider.complete(claude_request())
    refused, retried = (c["body"] for c in _chats(emulator))
    assert "output_config" in refused and "output_config" not in retried
    assert retried["tool_choice"] == {"type": "tool", "name": "answer"}
    assert retried["tools"][0]["input_schema"] == claude_request().schema
    await provider.complete(claude_request("again"))  # remembered: the tool at once
    assert len(_chats(emulator)) == 3 and "tool_choice" in _chats(emulator)[-1]["body"]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("status", "kind"), [(400, FatalError), (429, WaitError), (529, RetryableError)]
)
async def test_i41_vertex_claude_live_errors_translated(
    vertex: Any, emulator: Any, transport: str, status: int, kind: type[Exception]
) -> None:
    fault: dict[str, Any] = {"http": status}
    if status == 429:
        fault["retry_after"] = 7
    emulator.add_fault({"provider": "vertex", "op": "chat", "fault": fault})
    with pytest.raises(kind) as caught:
        await vertex(transport).complete(claude_request())
    assert caught.value.status == status  # type: ignore[attr-defined]
    assert str(caught.value).startswith("vertex")
    if status == 429:
        assert caught.value.retry_after == 7  # type: ignore[attr-defined]


def test_i41_vertex_claude_models_and_their_cache_minimum() -> None:
    spec = provider_spec("vertex")
    assert is_claude("claude-haiku-4-5@20251001") and is_claude(
        "publishers/anthropic/models/claude-opus-4-1@20250805"
    )
    assert not is_claude("gemini-2.5-flash")
    assert "marker" in spec.cache_kinds and "implicit" in spec.cache_kinds
    assert spec.minimum_for("claude-sonnet-4-5@20250929") == 1024
    assert spec.minimum_for("claude-haiku-4-5@20251001") == 4096
    assert spec.minimum_for("gemini-2.5-flash") == provider_spec("gemini").minimum_for(
        "gemini-2.5-flash"
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("status", "google", "kind"),
    [
        (429, "RESOURCE_EXHAUSTED", WaitError),
        (403, "PERMISSION_DENIED", FatalError),
        (503, "UNAVAILABLE", RetryableError),
    ],
)
async def test_i41_vertex_claude_live_google_shaped_refusals_translated(
    vertex: Any, emulator: Any, transport: str, status: int, google: str, kind: type[Exception]
) -> None:
    """Vertex's own refusals (quota, a model not enabled in Model Garden, an outage) come
    as Google's error body in a list, not Anthropic's: classified by status with Google's
    code, a RetryInfo delay waited."""
    message = f"Emulated {google} for publishers/anthropic/models/{CLAUDE}"
    error: dict[str, Any] = {"code": status, "message": message, "status": google}
    if status == 429:
        error["details"] = [{"@type": RETRY_INFO, "retryDelay": "7s"}]
    body = {"error": error}
    emulator.add_fault(
        {"provider": "vertex", "op": "chat", "fault": {"http": status, "body": [body]}}
    )
    with pytest.raises(kind) as caught:
        await vertex(transport).complete(claude_request())
    assert caught.value.status == status  # type: ignore[attr-defined]
    assert message in str(caught.value)
    assert caught.value.code == google  # type: ignore[attr-defined]
    if status == 429:
        assert caught.value.retry_after == 7  # type: ignore[attr-defined]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_claude_live_paused_turn_is_continued(
    vertex: Any, emulator: Any, transport: str
) -> None:
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "chat",
            "times": 1,
            "fault": {"reply": {"stop": "pause_turn", "blocks": ["server_tool_use"]}},
        }
    )
    answer = await vertex(transport).complete(claude_request())
    assert answer.stop_reason == "end" and len(answer.legs) == 1
    first, second = (c["body"] for c in _chats(emulator))
    assert len(second["messages"]) == len(first["messages"]) + 1
    assert second["messages"][-1]["role"] == "assistant"
    assert second["messages"][-1]["content"][0]["type"] == "server_tool_use"
    assert second["anthropic_version"] == VERTEX_VERSION and "model" not in second


async def test_i41_vertex_claude_both_transports_send_the_same_request(
    vertex: Any, emulator: Any
) -> None:
    """P1: the lean rawPredict and Anthropic's Vertex client send one path, one body
    (cache markers, temperature, schema and the Vertex version string included) and the
    same bearer token."""
    hint = CacheHint(static_chars=len(STATIC), key="agac-k1")
    messages = (Message("system", SYSTEM), Message("user", STATIC + "Review: fine."))
    request = Request(
        "vertex",
        CLAUDE,
        messages,
        max_tokens=64,
        temperature=0.2,
        schema=claude_request().schema,
        cache=hint,
    )
    for transport in TRANSPORTS:
        await vertex(transport).complete(request)
    lean, sdk = _chats(emulator)
    assert lean["path"] == sdk["path"] == PREDICT
    assert lean["body"] == sdk["body"]
    assert lean["body"]["temperature"] == 0.2
    assert lean["headers"]["authorization"].startswith("Bearer ya29.emulator-")
    assert sdk["headers"]["authorization"].startswith("Bearer ya29.emulator-")
