"""Providers, part 2: documents and images on Mistral and Together, live on both
transports (the official ``mistralai`` and ``together`` SDKs and agac's lean client) and
in their batch APIs, against the emulator over loopback — which checks each part's wire
shape as the provider does (Mistral's ``image_url``/``document_url`` chunks, Together's
OpenAI-style ``image_url`` parts), journals each file's media type, size and hash, and
answers naming what it saw."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from provider_support import BATCH_SECONDS, poll_until

from agac.errors import FatalError
from agac.media import describe_file
from agac.providers.base import Message, Request
from agac.samplefiles import pdf_bytes, png_bytes

VISION = {
    "mistral": "mistral-small-latest",
    "together": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
}


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
    model: str | None = None,
) -> Request:
    return Request(
        provider=provider,
        model=model or VISION[provider],
        custom_id=custom_id,
        messages=(Message("user", "What is in this file?", attachments, position),),  # type: ignore[arg-type]
        max_tokens=256,
        timeout=10.0,
    )


def _said(att: Any) -> str:
    return f"{att.media_type} {att.size} bytes sha256:{att.sha256[:16]}"


def _last_parts(emulator: Any) -> list[Any]:
    chats = [r for r in emulator.requests() if r["op"] == "chat"]
    assert chats, emulator.requests()
    return list(chats[-1]["body"]["messages"][-1]["content"])


@pytest.mark.parametrize("provider", ["mistral", "together"])
async def test_providers_part_2_an_image_goes_in_the_providers_own_part(
    provider: str, make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    image = _file(tmp_path, "photo.png", png_bytes(20, 10, seed=4))
    answer = await make_provider(provider).complete(_request(provider, (image,)))
    assert _said(image) in answer.text, "the emulator names the file that reached it"
    parts = _last_parts(emulator)
    sent = json.dumps(parts)
    assert base64.b64encode(png_bytes(20, 10, seed=4)).decode() not in sent, "no bytes kept"
    first = parts[0]
    assert first["type"] == "image_url"
    if provider == "mistral":  # the SDK's ImageURLChunk: the data URL as a plain string
        assert isinstance(first["image_url"], str)
        assert first["image_url"].startswith("data:image/png;base64,")
    else:  # Together: OpenAI's {url}
        assert first["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[1] == {"type": "text", "text": "What is in this file?"}


async def test_providers_part_2_mistral_takes_a_pdf_as_a_document_url_chunk(
    make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    doc = _file(tmp_path, "invoice.pdf", pdf_bytes(3, "invoice 7"))
    answer = await make_provider("mistral").complete(_request("mistral", (doc,), position="after"))
    assert _said(doc) in answer.text and "3 pages" in answer.text
    parts = _last_parts(emulator)
    assert parts[0]["type"] == "text"
    last = parts[-1]
    assert last["type"] == "document_url" and last["document_name"] == "invoice.pdf"
    assert last["document_url"].startswith("data:application/pdf;base64,")


def test_providers_part_2_the_emulator_refuses_another_providers_part_shape(
    emulator: Any,
) -> None:
    """The shapes are checked, not only read: OpenAI's ``file`` part is not Mistral's
    (a 422, as its request validation answers), a string ``image_url`` or a
    ``document_url`` is not Together's (a 400)."""
    import urllib.error
    import urllib.request

    pdf = "data:application/pdf;base64," + base64.b64encode(pdf_bytes()).decode()
    png = "data:image/png;base64," + base64.b64encode(png_bytes()).decode()
    cases = [
        ("mistral", {"type": "file", "file": {"filename": "a.pdf", "file_data": pdf}}, 422),
        ("together", {"type": "image_url", "image_url": png}, 400),
        ("together", {"type": "document_url", "document_url": pdf}, 400),
    ]
    for provider, part, status in cases:
        body = {
            "model": VISION[provider],
            "messages": [{"role": "user", "content": [part, {"type": "text", "text": "x"}]}],
        }
        sent = urllib.request.Request(
            f"{emulator.url}/{provider}/v1/chat/completions",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"content-type": "application/json", "authorization": "Bearer test"},
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(sent, timeout=60)
        assert caught.value.code == status, (provider, part["type"])
        caught.value.close()


async def test_providers_part_2_a_text_only_model_is_refused_by_the_emulator_too(
    make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    """Were agac's own check missed, the provider's refusal is a fatal error, never a
    retry (agac refuses first: tests/integration/engine/test_attachments_compat.py)."""
    image = _file(tmp_path, "a.png", png_bytes())
    for provider, model in (
        ("mistral", "codestral-latest"),
        ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo"),
    ):
        with pytest.raises(FatalError) as caught:
            await make_provider(provider).complete(_request(provider, (image,), model=model))
        assert caught.value.status == 400
        assert "does not support image" in str(caught.value)


@pytest.mark.parametrize(
    ("provider", "options"),
    [
        ("mistral", {"batch_input": "inline"}),
        ("mistral", {"batch_input": "file"}),
        ("together", {}),
    ],
)
async def test_providers_part_2_batch_lines_carry_each_records_files(
    provider: str, options: dict[str, Any], make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    files = [_file(tmp_path, f"p{i}.png", png_bytes(8 + i, 8, seed=i)) for i in range(3)]
    requests = [_request(provider, (f,), custom_id=f"r{i}") for i, f in enumerate(files)]
    if provider == "mistral":
        doc = _file(tmp_path, "d.pdf", pdf_bytes(2))
        requests.append(_request(provider, (doc,), custom_id="rpdf"))
        files.append(doc)
    adapter = make_provider(provider, **options)
    handle = await adapter.submit_batch(requests, key=f"agac_pv2_{provider}")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(adapter, handle, ("ended",))
    seen: dict[str, str] = {}
    async for result in adapter.batch_results(handle):
        assert result.type == "succeeded", result.error
        assert result.response is not None
        seen[result.custom_id] = result.response.text
    assert sorted(seen) == sorted(r.custom_id or "" for r in requests)
    for request, f in zip(requests, files, strict=True):
        assert _said(f) in seen[request.custom_id or ""], "each record's own file reached it"
