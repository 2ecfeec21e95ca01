"""Issue "Providers, part 3" items for Vertex AI that the other suites left open, against
the emulator's Vertex routes, token endpoint and Cloud Storage over loopback: the input
object deleted once a job has ended however it ended (Gemini's and Claude's jobs), a live
Gemini answer's implicit cache hits kept apart from its fresh input on both transports,
images inline within Vertex's 7 MB (above it refused before any call), and the project
and region read the way Google Cloud users set them (the credentials' own project,
``GOOGLE_CLOUD_LOCATION``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from claude_support import claude_requests
from vertex_support import BUCKET, MODEL, PROJECT, requests

from agac.errors import AttachmentError, BatchNotEnded
from agac.media import describe_file
from agac.providers.base import Message, ProviderSettings, Request
from agac.providers.vertex import VertexProvider, job_name
from agac.samplefiles import png_bytes

TRANSPORTS = ["lean", "sdk"]
ENDINGS = [
    ({"batch_end": "failed"}, "JOB_STATE_FAILED"),
    ({"batch_end": "expired"}, "JOB_STATE_EXPIRED"),
    ({"batch_end": "expired", "answered": 2}, "JOB_STATE_PARTIALLY_SUCCEEDED"),
    (None, "JOB_STATE_CANCELLED"),
]


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if r["op"] == "chat" and r["provider"] == "vertex"]


def _has_input(emulator: Any, prefix: str, key: str) -> bool:
    folder = prefix.removeprefix(f"gs://{BUCKET}/")
    return f"{BUCKET}/{folder}/{job_name(key)}/input/records.jsonl" in emulator.state.objects


@pytest.mark.parametrize("family", ["gemini", "claude"])
@pytest.mark.parametrize(("fault", "state"), ENDINGS)
async def test_i41_vertex_input_deleted_once_the_job_ended_however_it_ended(
    vertex: Any, emulator: Any, prefix: str, family: str, fault: Any, state: str
) -> None:
    """The input object stays while the job runs (and while it is being cancelled) and is
    gone once the job has ended: failed, expired, cancelled or partially succeeded, for
    Gemini's jobs and Claude's alike."""
    emulator.hold_clock()
    if fault is not None:
        emulator.add_fault({"provider": "vertex", "op": "batch.create", "fault": fault})
    provider = vertex()
    batch = requests(4) if family == "gemini" else claude_requests(4)
    key = f"k-gone-{family}-{state.lower()}"
    handle = await provider.submit_batch(batch, key)
    emulator.advance(20)
    assert (await provider.poll_batch(handle)).state == "running"
    assert _has_input(emulator, prefix, key)
    if fault is None:
        await provider.cancel_batch(handle)
        assert (await provider.poll_batch(handle)).raw_status == "JOB_STATE_CANCELLING"
        assert _has_input(emulator, prefix, key)
    emulator.advance(3600)
    assert (await provider.poll_batch(handle)).raw_status == state
    assert not _has_input(emulator, prefix, key)
    if state == "JOB_STATE_PARTIALLY_SUCCEEDED":
        assert len([r async for r in provider.batch_results(handle)]) == 2
    else:
        with pytest.raises(BatchNotEnded):
            [r async for r in provider.batch_results(handle)]
    assert (await provider.poll_batch(handle)).raw_status == state


def _plain(text: str) -> Request:
    return Request("vertex", MODEL, (Message("user", text),), max_tokens=64)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_gemini_live_implicit_cache_hits_kept_apart(
    vertex: Any, emulator: Any, transport: str
) -> None:
    """Vertex counts implicit cache hits inside ``promptTokenCount``
    (``cachedContentTokenCount``): agac keeps them apart, the fresh input without them,
    as for Gemini's own API."""
    provider = vertex(transport)
    fresh = (await provider.complete(_plain("Classify: the same long prompt"))).usage
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "chat",
            "times": 1,
            "fault": {"reply": {"usage": {"cache_read_tokens": 5}}},
        }
    )
    hit = (await provider.complete(_plain("Classify: the same long prompt"))).usage
    assert (hit.cached_tokens, fresh.cached_tokens) == (5, 0)
    # The emulator counts the 5 hits inside promptTokenCount, on top of the same prompt:
    # the fresh input is the prompt's own either way (never the hits counted twice).
    assert hit.input_tokens == fresh.input_tokens and hit.output_tokens > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_gemini_live_image_inline_up_to_seven_mb_refused_above(
    vertex: Any, emulator: Any, tmp_path: Path, transport: str
) -> None:
    """An image goes inline (Vertex has no Files API for these calls), its bytes exactly
    the file's, up to Vertex's 7 MB (a 5 MB one that Claude's limits would refuse goes
    to Gemini); one above 7 MB fails its record by the limits the engine checks before
    any call."""
    provider = vertex(transport)
    fits = tmp_path / "five.png"
    fits.write_bytes(png_bytes() + b"\0" * (5 * 1024 * 1024))
    msg = Message("user", "What is it?", (describe_file(str(fits)),), "before")
    answer = await provider.complete(Request("vertex", MODEL, (msg,), max_tokens=64))
    assert answer.text
    [chat] = _chats(emulator)
    parts = chat["body"]["contents"][0]["parts"]
    inline = next(p for p in parts if "inlineData" in p or "inline_data" in p)
    data = inline.get("inlineData") or inline["inline_data"]
    assert data.get("mimeType", data.get("mime_type")) == "image/png"
    # The emulator logs an attachment by its size and digest, checked on its bytes.
    sent = fits.read_bytes()
    assert f"{len(sent)} bytes sha256:{hashlib.sha256(sent).hexdigest()}" in str(data["data"])
    big = tmp_path / "eight.png"
    big.write_bytes(png_bytes() + b"\0" * (8 * 1024 * 1024))
    limits = VertexProvider.spec.attachments
    assert limits is not None  # what the engine checks every record's files against
    with pytest.raises(AttachmentError) as caught:
        limits.check("vertex", MODEL, (describe_file(str(big)),))
    assert caught.value.code == "attachment_too_large"
    assert len(_chats(emulator)) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_i41_vertex_project_from_the_credentials_and_region_from_the_environment(
    gcp: Any, emulator: Any, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    """Application Default Credentials as a Google Cloud user sets them: with no
    ``GOOGLE_CLOUD_PROJECT`` the project is the service account key's own, and the
    region is ``GOOGLE_CLOUD_LOCATION``'s — both in the path the call goes to."""
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    provider = VertexProvider(ProviderSettings(name="vertex", transport=transport))  # type: ignore[arg-type]
    try:
        await provider.complete(_plain("Classify: where am I"))
    finally:
        await provider.aclose()
    [chat] = _chats(emulator)
    assert f"/projects/{PROJECT}/locations/europe-west4/publishers/google/models/" in chat["path"]
    assert chat["headers"]["authorization"].startswith("Bearer ya29.emulator-")
