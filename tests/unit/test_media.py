"""Issue 22: what agac knows of a file's bytes — kind from the magic bytes, size in pixels,
PDF pages — the fingerprint that names attachments by media type and SHA-256 only, and
the token estimates of each provider's published rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from agac.errors import AttachmentError
from agac.media import (
    Attachment,
    describe_bytes,
    describe_file,
    estimate_tokens,
    read_verified,
    sniff,
    write_base64,
)
from agac.providers.base import Message, Request, fingerprint_of
from agac.samplefiles import gif_bytes, jpeg_bytes, pdf_bytes, png_bytes, webp_bytes


@pytest.mark.parametrize(
    ("data", "media_type", "dims"),
    [
        (png_bytes(12, 7), "image/png", (12, 7)),
        (jpeg_bytes(30, 40), "image/jpeg", (30, 40)),
        (gif_bytes(5, 6), "image/gif", (5, 6)),
        (webp_bytes(9, 11), "image/webp", (9, 11)),
    ],
)
def test_i22_1_an_image_is_known_by_its_magic_bytes_and_header(
    data: bytes, media_type: str, dims: tuple[int, int]
) -> None:
    att = describe_bytes(data, "/x", "x.pdf", what="x.pdf")  # the name says nothing
    assert (att.media_type, (att.width, att.height)) == (media_type, dims)


def test_i22_1_a_pdf_has_its_pages_counted() -> None:
    assert describe_bytes(pdf_bytes(4), "/x", "x", what="x").pages == 4


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "unsupported_attachment"),
        (b"plain text", "unsupported_attachment"),
        (b"%PDF-1.7\nno end", "attachment_corrupt"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 8, "attachment_corrupt"),
    ],
)
def test_i22_1_bytes_agac_cannot_send_say_why(data: bytes, reason: str) -> None:
    with pytest.raises(AttachmentError) as caught:
        describe_bytes(data, "/x", "x", what="x")
    assert caught.value.reason == reason


def test_i22_1_sniff_knows_only_the_five_kinds() -> None:
    assert sniff(b"BM....") is None and sniff(b"<svg") is None


def _request(att: Attachment) -> Request:
    return Request("openai", "gpt-4o-mini", (Message("user", "read", (att,)),))


def test_i22_2_the_fingerprint_names_bytes_not_paths(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(png_bytes(seed=1))
    (tmp_path / "b.png").write_bytes(png_bytes(seed=1))
    (tmp_path / "c.png").write_bytes(png_bytes(seed=2))
    a, b, c = (describe_file(str(tmp_path / n)) for n in ("a.png", "b.png", "c.png"))
    assert _request(a).fingerprint() == _request(b).fingerprint()
    assert _request(a).fingerprint() != _request(c).fingerprint()
    assert fingerprint_of(_request(a).canonical()) == _request(a).fingerprint()
    assert a.path in _request(a).canonical(), "the stored form keeps where to read it"


def test_i22_2_a_message_without_files_keeps_its_canonical_form() -> None:
    r = Request("openai", "m", (Message("user", "hi"),))
    assert '"messages":[{"content":"hi","role":"user"}]' in r.canonical()


def test_i22_2_bytes_are_read_again_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(png_bytes(seed=1))
    att = describe_file(str(path))
    assert read_verified(att) == png_bytes(seed=1)
    out = tmp_path / "line"
    with out.open("wb") as fh:
        write_base64(att, fh)
    import base64

    assert base64.b64decode(out.read_bytes()) == png_bytes(seed=1)
    path.write_bytes(png_bytes(seed=2))
    with pytest.raises(AttachmentError) as changed, (tmp_path / "x").open("wb") as fh:
        write_base64(att, fh)
    assert changed.value.reason == "attachment_changed"


@pytest.mark.parametrize(
    ("provider", "dims", "tokens"),
    [
        ("openai", (1024, 1024), 85 + 170 * 4),  # 768 × 768 after scaling: 2 × 2 tiles
        ("openai", (512, 512), 85 + 170 * 1),
        ("anthropic", (1000, 750), 1000),  # 1000 × 750 / 750
        ("gemini", (300, 300), 258),
        ("gemini", (1536, 768), 258 * 2),
    ],
)
def test_i22_6_image_tokens_follow_each_providers_rule(
    provider: str, dims: tuple[int, int], tokens: int
) -> None:
    att = Attachment("image/png", "0" * 64, 10, "/x", "x", dims[0], dims[1])
    assert estimate_tokens(provider, att) == tokens


def test_i22_6_pdf_pages_are_estimated_per_provider() -> None:
    pdf = Attachment("application/pdf", "0" * 64, 10, "/x", "x", pages=3)
    assert estimate_tokens("gemini", pdf) == 3 * 258
    assert estimate_tokens("anthropic", pdf) == 3 * 2000


def test_i22_6_budget_reservations_count_attachment_tokens_from_stored_requests() -> None:
    from agac.engine.limits.budget import attachment_tokens
    from agac.jsontext import loads

    att = Attachment("image/png", "0" * 64, 10, "/x", "x", 1000, 750)
    request = Request("anthropic", "claude", (Message("user", "read", (att,)),))
    stored = loads(request.canonical())["messages"]
    assert (
        attachment_tokens("anthropic", stored)
        == attachment_tokens("anthropic", request.messages)
        == 1000
    )
