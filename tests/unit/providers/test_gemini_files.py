"""Gemini's Files API rule, without a server: which files of a request go up
(the largest, until the rest fits inline), one upload per SHA-256 reused until it is
close to expiry (an injected clock), the 2 GB per-file limit, the checked reader that
never returns the end of other bytes, and what is deleted when the adapter closes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agac.errors import AttachmentError
from agac.media import Attachment, VerifiedReader, describe_file, verify
from agac.providers._gemini_files import (
    BATCH_MARGIN_SECONDS,
    FILE_MAX_BYTES,
    INLINE_REQUEST_BYTES,
    LIFETIME_SECONDS,
    GeminiFiles,
    Uploaded,
    line_bytes,
    to_upload,
)
from agac.providers.base import Message, Request
from agac.samplefiles import png_bytes

MB = 1024 * 1024


def _att(name: str, size: int, sha: str | None = None) -> Attachment:
    return Attachment(
        "image/png",
        sha or hashlib.sha256(name.encode()).hexdigest(),
        size,
        f"/nowhere/{name}",
        name,
    )


def _request(*atts: Attachment) -> Request:
    return Request(
        provider="gemini", model="m", messages=(Message("user", "x", atts),), max_tokens=8
    )


def test_i22_gemini_files_api_a_request_that_fits_inline_uploads_nothing() -> None:
    assert to_upload(_request(_att("a", 10 * MB), _att("b", 4 * MB))) == ()
    assert to_upload(_request(_att("a", (INLINE_REQUEST_BYTES - 16) * 3 // 4))) == ()


def test_i22_gemini_files_api_the_largest_files_go_up_until_the_rest_fits() -> None:
    a, b, c = _att("a", 12 * MB), _att("b", 9 * MB), _att("c", 2 * MB)
    assert to_upload(_request(c, a, b)) == (a,), "16 + 12 + 3 MB of base64: a alone goes up"
    d = _att("d", 14 * MB)
    assert to_upload(_request(a, b, d)) == (d, a)
    twice = _att("t", 8 * MB)
    assert to_upload(_request(twice, twice)) == (twice,), "one upload for the same file twice"
    wordy = Request(
        provider="gemini",
        model="m",
        max_tokens=8,
        messages=(Message("user", "x" * (10 * MB), (_att("w", 8 * MB),)),),
    )
    assert len(to_upload(wordy)) == 1, "the text counts: 10 MB of it and 11 MB of base64"


def test_i22_gemini_files_api_a_batch_line_counts_an_upload_as_its_part() -> None:
    small, big = _att("s", 1 * MB), _att("b", 25 * MB)
    assert line_bytes((small,), 100) == 4 * -(-MB // 3), "inline: its base64"
    assert line_bytes((small, big, big), 100) == 4 * -(-MB // 3) + 2 * 256


class _Uploads:
    """What an upload function sees (the attachments it was asked for)."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.deleted: list[str] = []

    async def upload(self, att: Attachment) -> Uploaded:
        self.asked.append(att.sha256)
        n = len(self.asked)
        return Uploaded(f"files/f{n}", f"https://example.test/v1beta/files/f{n}")

    async def delete(self, name: str) -> None:
        self.deleted.append(name)


def _big(tmp_path: Path, name: str, seed: int) -> Attachment:
    """16 MB (21 MB as base64) on disk, named by their hash (only hashed: no PNG needed)."""
    data = bytes([seed]) * (16 * MB)
    path = tmp_path / name
    path.write_bytes(data)
    return Attachment("image/png", hashlib.sha256(data).hexdigest(), len(data), str(path), name)


async def test_i22_gemini_files_api_an_upload_is_reused_until_it_nears_expiry(
    tmp_path: Path,
) -> None:
    now = [1_000_000.0]
    files = GeminiFiles(clock=lambda: now[0])
    seen = _Uploads()
    att = _big(tmp_path, "a.png", 1)
    first = await files.uris(_request(att), seen.upload)
    again = await files.uris(_request(att), seen.upload)
    assert first == again and len(seen.asked) == 1
    now[0] += LIFETIME_SECONDS - BATCH_MARGIN_SECONDS + 1
    await files.uris(_request(att), seen.upload)
    assert len(seen.asked) == 1, "a live call still uses it (more than ten minutes left)"
    await files.uris(_request(att), seen.upload, batch=True)
    assert len(seen.asked) == 2, "a batch gets a fresh upload (less than a day left)"
    now[0] += LIFETIME_SECONDS
    renewed = await files.uris(_request(att), seen.upload)
    assert len(seen.asked) == 3 and renewed != first, "expired at Gemini: uploaded again"


async def test_i22_gemini_files_api_closing_deletes_the_live_uploads_only(tmp_path: Path) -> None:
    files = GeminiFiles()
    seen = _Uploads()
    live, batch = _big(tmp_path, "a.png", 1), _big(tmp_path, "b.png", 2)
    await files.uris(_request(live), seen.upload)
    await files.uris(_request(batch), seen.upload, batch=True)
    await files.close(seen.delete)
    assert seen.deleted == ["files/f1"]
    await files.close(seen.delete)
    assert seen.deleted == ["files/f1"], "closed once: nothing left to delete"


async def test_i22_gemini_files_api_a_file_over_2_gb_stays_too_large() -> None:
    files = GeminiFiles()
    seen = _Uploads()
    with pytest.raises(AttachmentError) as caught:
        await files.uris(_request(_att("huge", FILE_MAX_BYTES + 1)), seen.upload)
    assert caught.value.reason == "attachment_too_large"
    assert not seen.asked


async def test_i22_gemini_files_api_a_changed_file_is_never_uploaded(tmp_path: Path) -> None:
    files = GeminiFiles()
    seen = _Uploads()
    att = _big(tmp_path, "a.png", 1)
    (tmp_path / "a.png").write_bytes(bytes([2]) * (16 * MB))
    with pytest.raises(AttachmentError) as caught:
        await files.uris(_request(att), seen.upload)
    assert caught.value.reason == "attachment_changed"
    assert not seen.asked


def test_i22_gemini_files_api_the_checked_reader_never_returns_the_end_of_other_bytes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(64, 64, seed=1, noise=True))
    att = describe_file(str(path))
    with VerifiedReader(att) as reader:
        reader.seek(0, 2)
        assert reader.tell() == att.size
        reader.seek(0)
        assert reader.read() == path.read_bytes()
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # same size, one byte other
    path.write_bytes(bytes(data))
    with VerifiedReader(att) as reader:
        head = reader.read(att.size // 2)
        assert head == bytes(data[: att.size // 2])
        with pytest.raises(AttachmentError) as caught:
            reader.read(att.size)
        assert caught.value.reason == "attachment_changed"
    path.write_bytes(bytes(data) + b"more")
    with pytest.raises(AttachmentError):
        VerifiedReader(att)
    path.unlink()
    with pytest.raises(AttachmentError) as gone:
        verify(att)
    assert gone.value.reason == "attachment_not_found"
