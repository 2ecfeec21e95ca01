"""Issue 22: a Gemini request over the 20 MB inline limit sends its largest files through
the Files API (resumable upload, then ``file_data`` parts naming their URIs), live on
both transports (agac's lean HTTP client and the official SDK) and in batch lines,
against the emulator over loopback — which describes each upload (media type, size,
hash; never its bytes) and answers naming the file a ``file_data`` part named."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from provider_support import BATCH_SECONDS, MODELS, poll_until

from agac.errors import AttachmentError, ProviderError
from agac.media import Attachment, describe_file
from agac.providers.base import Message, Request
from agac.samplefiles import pdf_of_size, png_bytes, png_of_size

BIG = 25_000_000  # 33 MB as base64: over the inline limit


@pytest.fixture(scope="module")
def big_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 25 MB PNG and a 25 MB PDF, made once for the module."""
    folder = tmp_path_factory.mktemp("big")
    made = {"png": folder / "scan.png", "pdf": folder / "contract.pdf"}
    made["png"].write_bytes(png_of_size(BIG, seed=7))
    made["pdf"].write_bytes(pdf_of_size(BIG, pages=3, seed=7))
    return made


def _request(
    *attachments: Attachment, text: str = "What is in this file?", custom_id: str | None = None
) -> Request:
    return Request(
        provider="gemini",
        model=MODELS["gemini"],
        custom_id=custom_id,
        messages=(Message("user", text, attachments),),
        max_tokens=256,
        timeout=30.0,
    )


def _said(att: Attachment) -> str:
    return f"{att.media_type} {att.size} bytes sha256:{att.sha256[:16]}"


def _ops(emulator: Any, op: str) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if r["op"] == op]


def _uploads(emulator: Any) -> int:
    """Attachments uploaded and finalized (not batch input files)."""
    return len(_ops(emulator, "file.finalize"))


def _held(emulator: Any) -> list[dict[str, Any]]:
    """The files the emulator holds (``GET /v1beta/files``)."""
    asked = urllib.request.Request(
        emulator.url + "/v1beta/files", headers={"x-goog-api-key": "test"}
    )
    with urllib.request.urlopen(asked, timeout=240) as answer:
        return list(json.loads(answer.read()).get("files") or [])


def _delete(emulator: Any, name: str) -> None:
    """Delete a file behind agac's back (``DELETE /v1beta/files/{id}``)."""
    gone = urllib.request.Request(
        f"{emulator.url}/v1beta/{name}", method="DELETE", headers={"x-goog-api-key": "test"}
    )
    urllib.request.urlopen(gone, timeout=240).close()


@pytest.mark.parametrize("kind", ["png", "pdf"])
async def test_i22_gemini_files_api_a_request_over_the_inline_limit_uploads_its_file(
    kind: str, big_files: dict[str, Path], make_provider: Any, emulator: Any
) -> None:
    att = describe_file(str(big_files[kind]))
    adapter = make_provider("gemini")
    answer = await adapter.complete(_request(att))
    assert _said(att) in answer.text, "the answer names the uploaded file's bytes"
    finalized = [r["body"] for r in _ops(emulator, "file.finalize")]
    assert finalized == [
        {
            "name": finalized[0]["name"],
            "media_type": att.media_type,
            "size": att.size,
            "sha256": att.sha256,
            "pages": att.pages,
        }
    ], "one upload, journaled by its hash"
    chat = _ops(emulator, "chat")[-1]
    parts = chat["body"]["contents"][0]["parts"]
    ref = parts[0].get("fileData") or parts[0].get("file_data")
    assert (ref.get("mimeType") or ref.get("mime_type")) == att.media_type
    assert (ref.get("fileUri") or ref.get("file_uri")).endswith(finalized[0]["name"])
    assert parts[1] == {"text": "What is in this file?"}
    assert len(json.dumps(chat["body"])) < 10_000, "the request carried no bytes"


async def test_i22_gemini_files_api_the_same_bytes_are_uploaded_once_for_two_records(
    big_files: dict[str, Path], make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.png"
    copy.write_bytes(big_files["png"].read_bytes())
    first, second = describe_file(str(big_files["png"])), describe_file(str(copy))
    adapter = make_provider("gemini")
    a = await adapter.complete(_request(first, text="Record one."))
    b = await adapter.complete(_request(second, text="Record two."))
    assert _said(first) in a.text and _said(second) in b.text
    assert _uploads(emulator) == 1, "the same SHA-256 is uploaded once per run"
    assert len(_ops(emulator, "chat")) == 2


async def test_i22_gemini_files_api_a_request_under_the_limit_stays_inline(
    make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    path = tmp_path / "small.png"
    path.write_bytes(png_of_size(2_000_000, seed=3))
    att = describe_file(str(path))
    adapter = make_provider("gemini")
    answer = await adapter.complete(_request(att))
    assert _said(att) in answer.text
    assert not _ops(emulator, "file.upload"), "nothing uploaded under the inline limit"
    part = _ops(emulator, "chat")[-1]["body"]["contents"][0]["parts"][0]
    assert "inlineData" in part or "inline_data" in part


async def test_i22_gemini_files_api_only_the_largest_files_go_up(
    big_files: dict[str, Path], make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    path = tmp_path / "thumb.png"
    path.write_bytes(png_bytes(16, 16, seed=9))
    small, big = describe_file(str(path)), describe_file(str(big_files["pdf"]))
    adapter = make_provider("gemini")
    answer = await adapter.complete(_request(small, big))
    assert _said(small) in answer.text and _said(big) in answer.text
    parts = _ops(emulator, "chat")[-1]["body"]["contents"][0]["parts"]
    assert "inlineData" in parts[0] or "inline_data" in parts[0]
    assert "fileData" in parts[1] or "file_data" in parts[1]
    assert _uploads(emulator) == 1


async def test_i22_gemini_files_api_a_file_changed_after_admission_fails_and_nothing_is_uploaded(
    make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    path = tmp_path / "scan.png"
    path.write_bytes(png_of_size(BIG, seed=1))
    att = describe_file(str(path))
    path.write_bytes(png_of_size(BIG, seed=2))  # the same size, other bytes
    adapter = make_provider("gemini")
    with pytest.raises(AttachmentError) as caught:
        await adapter.complete(_request(att))
    assert caught.value.reason == "attachment_changed"
    assert not _ops(emulator, "file.upload") and not _ops(emulator, "chat"), "nothing sent"
    assert not _held(emulator)


async def test_i22_gemini_files_api_live_uploads_are_deleted_when_the_adapter_closes(
    big_files: dict[str, Path], make_provider: Any, emulator: Any
) -> None:
    att = describe_file(str(big_files["png"]))
    adapter = make_provider("gemini")
    await adapter.complete(_request(att))
    assert len(_held(emulator)) == 1
    await adapter.aclose()
    assert not _held(emulator), "the run's live uploads are deleted when it ends"
    assert len(_ops(emulator, "file.delete")) == 1


@pytest.mark.parametrize("how", ["deleted", "expired"])
async def test_i22_gemini_files_api_an_unknown_file_uri_gets_geminis_error(
    how: str, big_files: dict[str, Path], make_provider: Any, emulator: Any
) -> None:
    att = describe_file(str(big_files["png"]))
    adapter = make_provider("gemini")
    await adapter.complete(_request(att))
    (held,) = _held(emulator)
    if how == "deleted":
        _delete(emulator, held["name"])
    else:
        emulator.advance(48 * 3600 + 1)  # Gemini drops an upload after 48 h
    with pytest.raises(ProviderError) as caught:  # agac still holds the deleted file's URI
        await adapter.complete(_request(att, text="Again."))
    assert caught.value.status == 403
    assert "may not exist" in str(caught.value)


async def test_i22_gemini_files_api_batch_lines_name_uploaded_files(
    big_files: dict[str, Path], make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    """Two records with the same 25 MB file and one with a small file: one upload, the
    small file inline, every record answered naming its own file."""
    big = describe_file(str(big_files["png"]))
    path = tmp_path / "small.png"
    path.write_bytes(png_bytes(12, 12, seed=5))
    small = describe_file(str(path))
    requests = [
        _request(big, text="One.", custom_id="r0"),
        _request(big, text="Two.", custom_id="r1"),
        _request(small, custom_id="r2"),
    ]
    adapter = make_provider("gemini")
    handle = await adapter.submit_batch(requests, key="agac_i22_gemini_files")
    assert _uploads(emulator) == 1, "the same bytes go up once for two records"
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(adapter, handle, ("ended",))
    seen = {}
    async for result in adapter.batch_results(handle):
        assert result.type == "succeeded", result.error
        assert result.response is not None
        seen[result.custom_id] = result.response.text
    assert _said(big) in seen["r0"] and _said(big) in seen["r1"]
    assert _said(small) in seen["r2"]
    await adapter.aclose()
    names = {f["name"] for f in _held(emulator) if f.get("mimeType") == "image/png"}
    assert len(names) == 1, "a batch's uploads are left to expire: the batch may still read them"
