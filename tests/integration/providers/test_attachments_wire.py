"""Issue 22 items 3 and 4: every provider's image and PDF parts, live on both transports
(the official SDK and agac's lean HTTP client) and in its batch API, against the
emulator over loopback — which journals each attachment's media type, size and hash
(never its bytes), answers naming what it saw, and holds each provider to its limits
with that provider's own error."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from provider_support import BATCH_SECONDS, MODELS, poll_until

from agac.errors import AttachmentError, FatalError
from agac.media import describe_file
from agac.providers.base import Message, Request
from agac.samplefiles import pdf_bytes, png_bytes, png_of_size

VISION = {**MODELS, "groq": "meta-llama/llama-4-scout-17b-16e-instruct", "ollama": "llava"}
TAKES_PDF = ("openai", "anthropic", "gemini")


def _file(tmp_path: Path, name: str, data: bytes) -> Any:
    path = tmp_path / name
    path.write_bytes(data)
    return describe_file(str(path))


def _request(
    provider: str,
    attachments: tuple[Any, ...],
    *,
    position: str = "before",
    custom_id: str | None = None,
    text: str = "What is in this file?",
) -> Request:
    return Request(
        provider=provider,
        model=VISION[provider],
        custom_id=custom_id,
        messages=(Message("user", text, attachments, position),),  # type: ignore[arg-type]
        max_tokens=256,
        timeout=10.0,
    )


def _said(att: Any) -> str:
    return f"{att.media_type} {att.size} bytes sha256:{att.sha256[:16]}"


def _last_chat(emulator: Any) -> dict[str, Any]:
    chats = [r for r in emulator.requests() if r["op"] == "chat"]
    assert chats, emulator.requests()
    body: dict[str, Any] = chats[-1]["body"]
    return body


def _parts(provider: str, body: dict[str, Any]) -> list[Any]:
    """The user turn's parts as sent, in order."""
    if provider == "gemini":
        return list(body["contents"][-1]["parts"])
    if provider == "ollama":
        return [*body["messages"][-1].get("images", []), {"text": body["messages"][-1]["content"]}]
    return list(body["messages"][-1]["content"])


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "groq", "ollama"])
async def test_i22_3_an_image_goes_in_the_providers_native_part(
    provider: str, make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    image = _file(tmp_path, "photo.png", png_bytes(20, 10, seed=4))
    adapter = make_provider(provider)
    answer = await adapter.complete(_request(provider, (image,)))
    assert _said(image) in answer.text, "the emulator names the file that reached it"
    body = _last_chat(emulator)
    sent = json.dumps(body)
    raw = base64.b64encode(png_bytes(20, 10, seed=4)).decode()
    assert raw not in sent, "the journal keeps no attachment bytes"
    assert image.sha256 in sent
    parts = _parts(provider, body)
    first = parts[0]
    if provider in ("openai", "groq"):
        assert first["type"] == "image_url" and first["image_url"]["url"].startswith(
            "data:image/png;base64,"
        )
        assert parts[1] == {"type": "text", "text": "What is in this file?"}
    elif provider == "anthropic":
        assert first["type"] == "image" and first["source"]["type"] == "base64"
        assert first["source"]["media_type"] == "image/png"
    elif provider == "gemini":
        blob = first.get("inlineData") or first.get("inline_data")
        assert (blob.get("mimeType") or blob.get("mime_type")) == "image/png"
        assert parts[1] == {"text": "What is in this file?"}
    else:
        assert image.sha256 in first  # ollama: the message's images list


@pytest.mark.parametrize("provider", TAKES_PDF)
async def test_i22_3_a_pdf_goes_as_a_document_part_after_the_text(
    provider: str, make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    doc = _file(tmp_path, "invoice.pdf", pdf_bytes(3, "invoice 7"))
    adapter = make_provider(provider)
    answer = await adapter.complete(_request(provider, (doc,), position="after"))
    assert _said(doc) in answer.text and "3 pages" in answer.text
    parts = _parts(provider, _last_chat(emulator))
    last = parts[-1]
    if provider == "openai":
        assert parts[0]["type"] == "text"
        assert last["type"] == "file" and last["file"]["filename"] == "invoice.pdf"
        assert last["file"]["file_data"].startswith("data:application/pdf;base64,")
    elif provider == "anthropic":
        assert parts[0]["type"] == "text"
        assert last["type"] == "document" and last["source"]["media_type"] == "application/pdf"
    else:
        assert "text" in parts[0]
        blob = last.get("inlineData") or last.get("inline_data")
        assert (blob.get("mimeType") or blob.get("mime_type")) == "application/pdf"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "groq", "ollama"])
async def test_i22_3_a_file_changed_after_the_request_was_made_is_never_sent(
    provider: str, make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    image = _file(tmp_path, "a.png", png_bytes(seed=1))
    (tmp_path / "a.png").write_bytes(png_bytes(seed=2))
    adapter = make_provider(provider)
    with pytest.raises(AttachmentError) as caught:
        await adapter.complete(_request(provider, (image,)))
    assert caught.value.reason == "attachment_changed"
    (tmp_path / "a.png").unlink()
    with pytest.raises(AttachmentError) as gone:
        await adapter.complete(_request(provider, (image,)))
    assert gone.value.reason == "attachment_not_found"
    assert not [r for r in emulator.requests() if r["op"] == "chat"], "nothing was sent"


async def test_i22_4_anthropic_refuses_an_image_over_5_mb_of_base64_with_its_own_error(
    make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    big = _file(tmp_path, "big.png", png_of_size(4_200_000))  # 5.6 MB as base64
    adapter = make_provider("anthropic")
    with pytest.raises(FatalError) as caught:
        await adapter.complete(_request("anthropic", (big,)))
    assert caught.value.status == 400
    assert "image exceeds 5 MB maximum" in str(caught.value)


def test_i22_4_gemini_refuses_a_request_over_20_mb(emulator: Any) -> None:
    """Sent inline (agac itself uploads such files: test_gemini_files_api.py)."""
    import urllib.error
    import urllib.request

    data = base64.b64encode(png_of_size(16_000_000)).decode()  # 21 MB as base64
    body = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"inlineData": {"mimeType": "image/png", "data": data}},
                    {"text": "What is it?"},
                ],
            }
        ]
    }
    sent = urllib.request.Request(
        f"{emulator.url}/v1beta/models/{VISION['gemini']}:generateContent",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", "x-goog-api-key": "test"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(sent, timeout=240)
    assert caught.value.code == 400
    said = json.loads(caught.value.read())["error"]
    caught.value.close()
    assert said["status"] == "INVALID_ARGUMENT"
    assert "Request payload size exceeds the limit" in said["message"]


async def test_i22_4_groq_refuses_a_pdf_and_a_model_without_vision(
    make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    doc = _file(tmp_path, "a.pdf", pdf_bytes())
    image = _file(tmp_path, "a.png", png_bytes())
    adapter = make_provider("groq")
    with pytest.raises(FatalError) as caught:
        await adapter.complete(_request("groq", (doc,)))
    assert "not supported" in str(caught.value)
    plain = Request(
        provider="groq",
        model="llama-3.3-70b-versatile",
        max_tokens=64,
        messages=(Message("user", "x", (image,)),),
    )
    with pytest.raises(FatalError) as no_vision:
        await adapter.complete(plain)
    assert "does not support image input" in str(no_vision.value)


BATCH = {"openai": {}, "anthropic": {}, "gemini": {"batch_input": "file"}, "groq": {}}


@pytest.mark.parametrize("provider", list(BATCH))
async def test_i22_3_batch_lines_carry_each_records_files(
    provider: str, make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    files = [_file(tmp_path, f"p{i}.png", png_bytes(8 + i, 8, seed=i)) for i in range(3)]
    requests = [_request(provider, (f,), custom_id=f"r{i}") for i, f in enumerate(files)]
    if provider in TAKES_PDF:
        doc = _file(tmp_path, "d.pdf", pdf_bytes(2))
        requests.append(_request(provider, (doc,), custom_id="rpdf"))
        files.append(doc)
    adapter = make_provider(provider, **BATCH[provider])
    handle = await adapter.submit_batch(requests, key=f"agac_i22_{provider}")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(adapter, handle, ("ended",))
    seen: dict[str, str] = {}
    async for result in adapter.batch_results(handle):
        assert result.type == "succeeded", result.error
        assert result.response is not None
        seen[result.custom_id] = result.response.text
    ids = [r.custom_id for r in requests]
    assert sorted(seen) == sorted(ids)
    for custom_id, f in zip(ids, files, strict=True):
        assert _said(f) in seen[custom_id], "each record's own file reached its line"


async def test_i22_3_a_batch_line_is_the_live_body(tmp_path: Path, emulator: Any) -> None:
    """The line written with the file's base64 streamed in equals the live body."""
    from agac.providers._common import spool_jsonl
    from agac.providers.base import ProviderSettings
    from agac.providers.registry import provider_class

    image = _file(tmp_path, "a.png", png_bytes(seed=3))
    adapter = provider_class("openai")(ProviderSettings(name="openai", transport="sdk", batch=True))
    try:
        request = _request("openai", (image,), custom_id="x")
        spooled = spool_jsonl(
            adapter._batch_lines([request]), max_count=10, max_bytes=10**9, provider="openai"
        )
        try:
            line = json.loads(spooled.path.read_text())
        finally:
            spooled.discard()
        assert line["body"] == adapter._chat_params(request, native=True)
        url = line["body"]["messages"][0]["content"][0]["image_url"]["url"]
        assert hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest() == image.sha256
    finally:
        await adapter.aclose()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_i22_4_fault_injection_works_on_requests_with_files(
    provider: str, make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    from agac.errors import RetryableError

    image = _file(tmp_path, "a.png", png_bytes(seed=5))
    emulator.add_fault({"provider": provider, "op": "chat", "times": 1, "fault": {"http": 500}})
    adapter = make_provider(provider)
    with pytest.raises(RetryableError):
        await adapter.complete(_request(provider, (image,)))
    answer = await adapter.complete(_request(provider, (image,)))
    assert _said(image) in answer.text
