"""Attachments on the wire: each provider's limits and the parts its requests carry them in.

Every adapter builds its messages from :class:`~agac.providers.base.Message` values; a user
message with attachments becomes the provider's native list of parts, in the message's
order (``before`` or ``after`` the text). The bytes come from :func:`agac.media.read_verified`
(read again from the file and checked against the request's hash) on live calls; a batch
line is written with a placeholder per attachment (:class:`Blobs`) that
:func:`~agac.providers._common.spool_jsonl` replaces with the file's base64, streamed
from disk, so a batch of thousands of images never sits in memory.

The shapes, as the official SDKs type them:

- OpenAI, Groq (Chat Completions): ``{"type": "image_url", "image_url": {"url":
  "data:image/png;base64,…"}}``; OpenAI PDFs ``{"type": "file", "file": {"filename": …,
  "file_data": "data:application/pdf;base64,…"}}``;
- Anthropic: ``{"type": "image" | "document", "source": {"type": "base64",
  "media_type": …, "data": …}}``;
- Gemini: a part ``{"inline_data": {"mime_type": …, "data": …}}`` (REST: ``inlineData``,
  ``mimeType``; the SDK takes the raw bytes), or, for a file uploaded through the Files
  API, ``{"file_data": {"mime_type": …, "file_uri": …}}`` (REST ``fileData``, ``fileUri``);
- Ollama: the message's ``images`` list of base64 strings (the SDK takes bytes);
- Mistral (``mistralai``'s ``ImageURLChunk`` and ``DocumentURLChunk``): ``{"type":
  "image_url", "image_url": "data:image/png;base64,…"}`` and ``{"type": "document_url",
  "document_url": "data:application/pdf;base64,…", "document_name": …}``;
- Together (``together``'s chat content parts): OpenAI's ``image_url`` parts; no PDFs.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from agac.media import Attachment, AttachmentLimits, read_verified

__all__ = [
    "ANTHROPIC_LIMITS",
    "GEMINI_LIMITS",
    "GROQ_LIMITS",
    "MISTRAL_LIMITS",
    "OLLAMA_LIMITS",
    "OPENAI_LIMITS",
    "TOGETHER_LIMITS",
    "Blobs",
    "Data",
    "anthropic_blocks",
    "gemini_parts",
    "live_base64",
    "mistral_parts",
    "openai_parts",
    "responses_parts",
]

MB = 1024 * 1024

OPENAI_LIMITS = AttachmentLimits(
    kinds=frozenset({"image", "pdf"}),
    max_file_bytes={"image": 20 * MB, "pdf": 32 * MB},
    max_files=500,
    max_pdf_pages=100,
    max_request_bytes=50 * MB,
)
"""OpenAI Chat Completions: images up to 20 MB each, 500 a request, 50 MB a request;
PDFs (``file`` parts) up to 32 MB and 100 pages."""


def _groq_vision(model: str) -> bool:
    """Groq's vision models are the Llama 4 ones (and any named ``vision``)."""
    name = model.lower()
    return "llama-4" in name or "vision" in name


GROQ_LIMITS = AttachmentLimits(
    kinds=frozenset({"image"}),
    max_files=5,
    max_request_bytes=4 * MB,
    models=_groq_vision,
)
"""Groq: images only, on its vision models; 5 a request, base64 requests up to 4 MB."""

ANTHROPIC_LIMITS = AttachmentLimits(
    kinds=frozenset({"image", "pdf"}),
    # Anthropic checks an image's base64 (5 MB), not its bytes: 5 MB × 3/4 of file.
    max_file_bytes={"image": 5 * MB * 3 // 4, "pdf": 32 * MB},
    max_files=100,
    max_pdf_pages=100,
    max_request_bytes=32 * MB,
)
"""Anthropic Messages: images 5 MB each as base64 (3.75 MB of file), 100 a request;
PDFs 100 pages; a request up to 32 MB."""

GEMINI_LIMITS = AttachmentLimits(
    kinds=frozenset({"image", "pdf"}),
    max_file_bytes={"image": 2048 * MB, "pdf": 2048 * MB},
    max_files=3600,
    max_pdf_pages=1000,
)
"""Gemini: files up to 2 GB each (the Files API's limit), PDFs up to 1,000 pages. A
request goes inline under 20 MB; over it, its largest files go through the Files API
(:mod:`agac.providers._gemini_files`), so the request as a whole has no byte limit here."""

OLLAMA_LIMITS = AttachmentLimits(kinds=frozenset({"image"}))
"""Ollama: images only (on a vision model: llava, llama3.2-vision, gemma3, …)."""

#: Mistral's models that read no files: the text-only releases of its families
#: (before Mistral Small 3.1 and Mistral Large 3), its code, embedding and moderation
#: models, and the open models of 2023–2024.
_MISTRAL_TEXT_ONLY = re.compile(
    r"codestral|devstral|embed|moderation|ocr|saba|open-mistral|open-mixtral|mathstral|"
    r"mistral-(tiny|small-(2312|2402|2409|2501)|medium-(2312)|large-(2402|2407|2411))|"
    r"ministral-(3b|8b)-2410|magistral-(small|medium)-250[67]"
)


def _mistral_vision(model: str) -> bool:
    """Mistral's models that read images and documents: Pixtral, Mistral Small 3.1 and
    later, Mistral Medium 3 and later, Mistral Large 3, Magistral 1.2, Ministral 3 and
    the ``-latest`` aliases of those families."""
    name = model.lower()
    if _MISTRAL_TEXT_ONLY.search(name):
        return False
    return "pixtral" in name or name.startswith(
        ("mistral-small", "mistral-medium", "mistral-large", "magistral", "ministral")
    )


MISTRAL_LIMITS = AttachmentLimits(
    kinds=frozenset({"image", "pdf"}),
    max_file_bytes={"image": 10 * MB, "pdf": 50 * MB},
    max_files=8,
    max_pdf_pages=1000,
    models=_mistral_vision,
)
"""Mistral: images up to 10 MB, 8 files a request; PDFs (``document_url`` chunks) up to
50 MB and 1,000 pages; on its vision models only (:func:`_mistral_vision`)."""


def _together_vision(model: str) -> bool:
    """Together's vision models: Llama 4, Llama 3.2 Vision, Qwen-VL and any named so."""
    name = model.lower()
    return "llama-4" in name or "vision" in name or "-vl" in name


TOGETHER_LIMITS = AttachmentLimits(
    kinds=frozenset({"image"}),
    max_file_bytes={"image": 20 * MB},
    models=_together_vision,
)
"""Together: images only (``image_url`` parts), on its vision models; Chat Completions
takes no documents, so a PDF is refused before anything is sent."""


Data = Callable[[Attachment], str]
"""The base64 of an attachment: read now (live) or a placeholder (batch lines)."""


def live_base64(att: Attachment) -> str:
    """The attachment's bytes as base64, read again and checked against its hash."""
    return base64.b64encode(read_verified(att)).decode("ascii")


class Blobs:
    """Placeholders for the base64 of the attachments of batch lines: a line is encoded
    with :meth:`token` in place of each file's data, then split by :meth:`pieces` into
    the encoded text and the attachments whose base64 is streamed between it."""

    _NONCE = os.urandom(6).hex()
    _PATTERN = re.compile(rb"\\u0000agac-blob-" + _NONCE.encode() + rb"-(\d+)\\u0000")

    def __init__(self) -> None:
        self.items: list[Attachment] = []

    def token(self, att: Attachment) -> str:
        self.items.append(att)
        return f"\x00agac-blob-{self._NONCE}-{len(self.items) - 1}\x00"

    def pieces(self, encoded: bytes) -> list[bytes | Attachment]:
        """The encoded line with each placeholder replaced by its attachment."""
        out: list[bytes | Attachment] = []
        at = 0
        for m in self._PATTERN.finditer(encoded):
            out.append(encoded[at : m.start()])
            out.append(self.items[int(m[1])])
            at = m.end()
        out.append(encoded[at:])
        self.items.clear()
        return out


def _ordered(text: str, position: str, parts: list[Any], text_part: Any) -> list[Any]:
    if not text:
        return parts
    return [text_part, *parts] if position == "after" else [*parts, text_part]


def openai_parts(
    text: str, attachments: tuple[Attachment, ...], position: str, data: Data
) -> list[dict[str, Any]]:
    """Chat Completions content parts (OpenAI and Groq)."""
    parts: list[dict[str, Any]] = []
    for a in attachments:
        url = f"data:{a.media_type};base64,{data(a)}"
        if a.kind == "pdf":
            parts.append(
                {"type": "file", "file": {"filename": a.name or "document.pdf", "file_data": url}}
            )
        else:
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return _ordered(text, position, parts, {"type": "text", "text": text})


def responses_parts(
    text: str, attachments: tuple[Attachment, ...], position: str, data: Data
) -> list[dict[str, Any]]:
    """The Responses API's input content parts: ``input_image`` (a data URL) and
    ``input_file`` for PDFs, beside an ``input_text`` part."""
    parts: list[dict[str, Any]] = []
    for a in attachments:
        url = f"data:{a.media_type};base64,{data(a)}"
        if a.kind == "pdf":
            parts.append(
                {"type": "input_file", "filename": a.name or "document.pdf", "file_data": url}
            )
        else:
            parts.append({"type": "input_image", "image_url": url})
    return _ordered(text, position, parts, {"type": "input_text", "text": text})


def mistral_parts(
    text: str, attachments: tuple[Attachment, ...], position: str, data: Data
) -> list[dict[str, Any]]:
    """Mistral's content chunks: ``image_url`` (the data URL as a plain string) and
    ``document_url`` for PDFs, named by ``document_name``."""
    parts: list[dict[str, Any]] = []
    for a in attachments:
        url = f"data:{a.media_type};base64,{data(a)}"
        if a.kind == "pdf":
            parts.append(
                {
                    "type": "document_url",
                    "document_url": url,
                    "document_name": a.name or "document.pdf",
                }
            )
        else:
            parts.append({"type": "image_url", "image_url": url})
    return _ordered(text, position, parts, {"type": "text", "text": text})


def anthropic_blocks(
    text: str, attachments: tuple[Attachment, ...], position: str, data: Data
) -> list[dict[str, Any]]:
    """Messages content blocks: ``image`` and ``document`` with base64 sources."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "document" if a.kind == "pdf" else "image",
            "source": {"type": "base64", "media_type": a.media_type, "data": data(a)},
        }
        for a in attachments
    ]
    return _ordered(text, position, blocks, {"type": "text", "text": text})


def gemini_parts(
    text: str,
    attachments: tuple[Attachment, ...],
    position: str,
    data: Callable[[Attachment], Any],
    *,
    rest: bool,
    uris: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Content parts: ``inline_data`` (the SDK's snake_case, ``data`` raw bytes) or, with
    ``rest``, the REST form ``inlineData``/``mimeType`` with base64 ``data``. A file
    uploaded through the Files API (its SHA-256 in ``uris``) is a ``file_data`` part
    naming its URI instead (REST ``fileData``/``fileUri``); ``data`` is not asked for it."""
    uris = uris or {}
    parts = [_gemini_part(a, data, rest, uris.get(a.sha256)) for a in attachments]
    return _ordered(text, position, parts, {"text": text})


def _gemini_part(
    a: Attachment, data: Callable[[Attachment], Any], rest: bool, uri: str | None
) -> dict[str, Any]:
    if uri is not None:
        if rest:
            return {"fileData": {"mimeType": a.media_type, "fileUri": uri}}
        return {"file_data": {"mime_type": a.media_type, "file_uri": uri}}
    if rest:
        return {"inlineData": {"mimeType": a.media_type, "data": data(a)}}
    return {"inline_data": {"mime_type": a.media_type, "data": data(a)}}
