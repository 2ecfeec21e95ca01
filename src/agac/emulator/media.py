"""Attachments as the emulator sees them: every provider's image and document parts.

:func:`take_attachments` finds each attachment in a request body in its provider's shape —
OpenAI/Groq/Together ``image_url`` data URLs and ``file.file_data``, Mistral's
``image_url`` (a data URL string or ``{url}``) and ``document_url`` chunks, Anthropic
``image`` and ``document`` base64 sources, Gemini ``inlineData``/``inline_data``, Ollama
``images`` —
decodes it, and puts in place of its data a short descriptor naming its media type (from
its bytes), size and SHA-256. The bytes go no further: the answer, the fingerprint, the
journal and a batch's stored items hold the descriptor, never the data. Answers without a
schema end by naming what they saw (:func:`seen_text`), so a test can tell which file
reached which record.

:func:`limit_error` holds each provider to its published limits, answering with that
provider's own error (status, code, message) when a request is over them;
:func:`wire_error` holds Mistral and Together to their content part shapes (a part of
another provider's shape is refused as they refuse it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from agac.media import image_size, pdf_pages, sniff

__all__ = [
    "Seen",
    "batch_limit_error",
    "describe_raw",
    "limit_error",
    "redact_body",
    "seen_in",
    "seen_text",
    "take_attachments",
    "wire_error",
]

MB = 1024 * 1024
_DESCRIPTOR = re.compile(
    r"\[attachment (?P<type>[\w/+.-]+) (?P<size>\d+) bytes "
    r"sha256:(?P<sha>[0-9a-f]{64})(?: pages:(?P<pages>\d+))?\]"
)


@dataclass(frozen=True)
class Seen:
    """One attachment of a request: where it was (``messages.0.content.1``), what its
    bytes are, what the client said it is (``declared``), and its base64 length."""

    where: str
    media_type: str
    declared: str | None
    size: int
    sha256: str
    encoded: int
    kind: str
    pages: int | None = None
    width: int | None = None
    height: int | None = None

    def descriptor(self) -> str:
        pages = f" pages:{self.pages}" if self.pages is not None else ""
        return f"[attachment {self.media_type} {self.size} bytes sha256:{self.sha256}{pages}]"


def _decode(where: str, data: Any, declared: str | None) -> Seen | None:
    if not isinstance(data, str) or data.startswith("[attachment "):
        return None
    try:
        # Google's JSON mapping of bytes takes either alphabet (the google-genai SDK
        # writes the URL-safe one).
        alphabet = b"-_" if ("-" in data or "_" in data) else None
        raw = base64.b64decode(data, altchars=alphabet, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    return describe_raw(where, raw, declared, len(data))


def describe_raw(where: str, raw: bytes, declared: str | None, encoded: int = 0) -> Seen:
    """What the bytes of one attachment are (``encoded``: the length they arrived as)."""
    media = sniff(raw[:1024]) or "application/octet-stream"
    pages = pdf_pages(raw) if media == "application/pdf" else None
    dims = image_size(media, raw) if media.startswith("image/") else None
    kind = (
        "pdf"
        if media == "application/pdf"
        else "image"
        if media.startswith("image/")
        else "unknown"
    )
    return Seen(
        where,
        media,
        declared,
        len(raw),
        hashlib.sha256(raw).hexdigest(),
        encoded,
        kind,
        pages,
        dims[0] if dims else None,
        dims[1] if dims else None,
    )


def _data_url(url: Any) -> tuple[str | None, str] | None:
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        return None
    head, data = url.split(",", 1)
    return head[5:].split(";")[0] or None, data


def take_attachments(provider: str, body: Any) -> list[Seen]:
    """Every attachment of ``body`` (a chat request in ``provider``'s shape), each one's
    data replaced in place by its descriptor."""
    seen: list[Seen] = []
    if not isinstance(body, dict):
        return seen
    if provider in ("openai", "azure", "groq", "together"):
        _openai(body, seen)
    elif provider == "mistral":
        _mistral(body, seen)
    elif provider == "anthropic":
        _anthropic(body, seen)
    elif provider in ("gemini", "vertex"):  # Vertex AI takes Gemini's parts
        _gemini(body, seen)
    elif provider == "ollama":
        _ollama(body, seen)
    return seen


def _openai(body: dict[str, Any], seen: list[Seen]) -> None:
    for i, m in enumerate(body.get("messages") or ()):
        content = m.get("content") if isinstance(m, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(part, dict):
                continue
            holder, key = None, ""
            if part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
                holder, key = part["image_url"], "url"
            elif part.get("type") == "file" and isinstance(part.get("file"), dict):
                holder, key = part["file"], "file_data"
            if holder is None or (parsed := _data_url(holder.get(key))) is None:
                continue
            got = _decode(f"messages.{i}.content.{j}", parsed[1], parsed[0])
            if got is not None:
                seen.append(got)
                holder[key] = f"data:{parsed[0]};base64,{got.descriptor()}"


def _mistral(body: dict[str, Any], seen: list[Seen]) -> None:
    for i, m in enumerate(body.get("messages") or ()):
        content = m.get("content") if isinstance(m, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(part, dict):
                continue
            holder: dict[str, Any] = part
            key = {"image_url": "image_url", "document_url": "document_url"}.get(
                str(part.get("type")), ""
            )
            if key == "image_url" and isinstance(part.get("image_url"), dict):
                holder, key = part["image_url"], "url"
            if not key or (parsed := _data_url(holder.get(key))) is None:
                continue
            got = _decode(f"messages.{i}.content.{j}", parsed[1], parsed[0])
            if got is not None:
                seen.append(got)
                holder[key] = f"data:{parsed[0]};base64,{got.descriptor()}"


#: The content part types each API takes in a chat message (Mistral's ``ContentChunk``
#: variants it reads in a request; Together's OpenAI-style parts, without ``file``).
_PART_TYPES = {
    "mistral": frozenset({"text", "image_url", "document_url", "reference", "file", "thinking"}),
    "together": frozenset({"text", "image_url", "video_url", "audio_url"}),
}


def wire_error(provider: str, body: Any) -> tuple[int, str | None, str] | None:
    """(status, code, message) as ``provider`` refuses a chat body whose content parts are
    not in its shape; None when they are (or ``provider`` is not checked here). Mistral's
    ``image_url`` is a string or ``{url}``, its ``document_url`` a string, its ``file`` a
    ``file_id`` (OpenAI's ``file.file_data`` is not Mistral's); Together's ``image_url``
    is ``{url}`` and it has no file or document parts."""
    kinds = _PART_TYPES.get(provider)
    if kinds is None or not isinstance(body, dict):
        return None
    for i, m in enumerate(body.get("messages") or ()):
        content = m.get("content") if isinstance(m, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else ()):
            where = f"messages.{i}.content.{j}"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in kinds:
                return _shape(provider, where, f"input tag {kind!r} is not a content part here")
            wrong = _part_wrong(provider, kind, part)
            if wrong:
                return _shape(provider, where, wrong)
    return None


def _part_wrong(provider: str, kind: str, part: dict[str, Any]) -> str | None:
    value = part.get(kind)
    if kind == "text":
        return None if isinstance(part.get("text"), str) else "text must be a string"
    if kind == "image_url":
        url = value.get("url") if isinstance(value, dict) else value
        if provider == "together" and not isinstance(value, dict):
            return "image_url must be an object with a url"
        return None if isinstance(url, str) and url else "image_url needs a URL"
    if kind == "document_url":
        return None if isinstance(value, str) and value else "document_url must be a string"
    if kind == "file":
        return None if isinstance(part.get("file_id"), str) else "a file chunk names a file_id"
    return None


def _shape(provider: str, where: str, why: str) -> tuple[int, str | None, str]:
    if provider == "mistral":  # its request validation: a 422
        return 422, None, f"Validation error at {where}: {why}"
    return 400, "invalid_request_error", f"Invalid content part at {where}: {why}"


def _anthropic(body: dict[str, Any], seen: list[Seen]) -> None:
    for i, m in enumerate(body.get("messages") or ()):
        content = m.get("content") if isinstance(m, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, dict) or block.get("type") not in ("image", "document"):
                continue
            source = block.get("source")
            if not isinstance(source, dict) or source.get("type") != "base64":
                continue
            got = _decode(f"messages.{i}.content.{j}", source.get("data"), source.get("media_type"))
            if got is not None:
                seen.append(got)
                source["data"] = got.descriptor()


def _gemini(body: dict[str, Any], seen: list[Seen]) -> None:
    for i, c in enumerate(body.get("contents") or ()):
        parts = c.get("parts") if isinstance(c, dict) else None
        for j, part in enumerate(parts if isinstance(parts, list) else ()):
            if not isinstance(part, dict):
                continue
            blob = part.get("inlineData") or part.get("inline_data")
            if not isinstance(blob, dict):
                continue
            declared = blob.get("mimeType") or blob.get("mime_type")
            got = _decode(f"contents[{i}].parts[{j}]", blob.get("data"), declared)
            if got is not None:
                seen.append(got)
                blob["data"] = got.descriptor()


def _ollama(body: dict[str, Any], seen: list[Seen]) -> None:
    for i, m in enumerate(body.get("messages") or ()):
        images = m.get("images") if isinstance(m, dict) else None
        if not isinstance(images, list):
            continue
        for j, data in enumerate(images):
            got = _decode(f"messages.{i}.images.{j}", data, None)
            if got is not None:
                seen.append(got)
                images[j] = got.descriptor()


def seen_in(value: Any) -> list[dict[str, Any]]:
    """The attachments named by descriptors anywhere in ``value`` (a request as stored)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return [
        {
            "media_type": m["type"],
            "size": int(m["size"]),
            "sha256": m["sha"],
            "pages": int(m["pages"]) if m["pages"] else None,
        }
        for m in _DESCRIPTOR.finditer(text)
    ]


def seen_text(value: Any) -> str:
    """What an answer without a schema says about the attachments it saw ('' for none)."""
    found = seen_in(value)
    if not found:
        return ""
    return (
        " Attachments seen: "
        + "; ".join(
            f"{a['media_type']} {a['size']} bytes sha256:{a['sha256'][:16]}"
            + (f" {a['pages']} pages" if a["pages"] else "")
            for a in found
        )
        + "."
    )


def attachment_tokens(value: Any) -> int:
    """Input tokens the attachments of a request count as in the emulator: 258 an image
    and 258 a PDF page (Gemini's figure, the simplest of the providers')."""
    return sum(258 * (a["pages"] or 1) for a in seen_in(value))


def redact_body(provider: str, raw: bytes) -> bytes:
    """A chat body as the journal keeps it: attachments replaced by their descriptors."""
    if not any(mark in raw for mark in (b"base64", b"inlineData", b"inline_data", b'"images"')):
        return raw
    try:
        body = json.loads(raw)
    except ValueError:
        return raw
    if not take_attachments(provider, body):
        return raw
    return json.dumps(body).encode()


def limit_error(
    provider: str, seen: list[Seen], body_bytes: int, model: str = ""
) -> tuple[int, str | None, str] | None:
    """(status, code, message) of the provider's own error when a request is over its
    limits or carries what it cannot read; None when it is within them."""
    if provider == "anthropic":
        return _anthropic_limits(seen, body_bytes)
    if provider == "vertex":
        big = next((x for x in seen if x.size > 7 * MB), None)
        if big is not None:
            return 400, None, "Inline data exceeds the maximum size of 7 MB."
        return None
    if provider == "gemini":
        if body_bytes > 20 * MB:
            return 400, None, f"Request payload size exceeds the limit: {20 * MB} bytes."
        return None
    if provider == "groq":
        return _groq_limits(seen, body_bytes, model)
    if provider in ("openai", "azure"):  # Azure's parts and limits are OpenAI's
        return _openai_limits(seen, body_bytes)
    if provider == "mistral":
        return _mistral_limits(seen, model)
    if provider == "together":
        return _together_limits(seen, model)
    if provider == "ollama":
        bad = next((s for s in seen if s.kind != "image"), None)
        if bad is not None:
            return 400, None, "illegal base64 data or unsupported image format"
    return None


def _anthropic_limits(seen: list[Seen], body_bytes: int) -> tuple[int, str | None, str] | None:
    if body_bytes > 32 * MB:
        return 413, "request_too_large", "Request exceeds the maximum allowed number of bytes."
    images = [s for s in seen if s.kind == "image"]
    if len(images) > 100:
        return (
            400,
            None,
            ("messages: Too many images in the request: at most 100 images may be provided"),
        )
    for s in seen:
        kind = "image" if s.kind == "image" else "document"
        if s.kind == "image" and s.encoded > 5 * MB:
            return (
                400,
                None,
                (
                    f"{s.where}.{kind}.source.base64: image exceeds 5 MB maximum: "
                    f"{s.encoded} bytes > {5 * MB} bytes"
                ),
            )
        if s.kind == "pdf" and (s.pages or 0) > 100:
            return 400, None, f"{s.where}.pdf: A maximum of 100 PDF pages may be provided."
        if s.kind == "unknown" or (s.declared and s.declared != s.media_type):
            return (
                400,
                None,
                (
                    f"{s.where}.{kind}.source.base64.data: The {kind} was specified "
                    f"using the {s.declared} media type, but does not appear to be "
                    "a valid " + ("image" if s.kind == "image" else s.declared or "file")
                ),
            )
    return None


def _openai_limits(seen: list[Seen], body_bytes: int) -> tuple[int, str | None, str] | None:
    if body_bytes > 50 * MB:
        return 413, None, "Request too large: the request body is over the 50 MB limit."
    if len(seen) > 500:
        return 400, None, "Too many images: at most 500 image inputs may be provided."
    for s in seen:
        if s.kind == "image" and s.size > 20 * MB:
            return (
                400,
                "image_too_large",
                (f"Invalid image in {s.where}: images must be under 20 MB."),
            )
        if s.kind == "pdf" and s.size > 32 * MB:
            return 400, "file_too_large", f"Invalid file in {s.where}: files must be under 32 MB."
        if s.kind == "pdf" and (s.pages or 0) > 100:
            return 400, None, f"Invalid file in {s.where}: a PDF may have at most 100 pages."
        if s.kind == "unknown":
            return (
                400,
                "invalid_image_format",
                (
                    "You uploaded an unsupported image. Please "
                    "make sure your image has of one the following "
                    "formats: ['png', 'jpeg', 'gif', 'webp']."
                ),
            )
    return None


#: Mistral models the emulator serves text only (a few of each kind agac must refuse).
_MISTRAL_TEXT_ONLY = ("codestral", "devstral", "open-mistral", "mistral-large-2411", "-2409")


def _mistral_limits(seen: list[Seen], model: str) -> tuple[int, str | None, str] | None:
    if any(name in model for name in _MISTRAL_TEXT_ONLY):
        return 400, "3051", f"Model {model} does not support image or document input."
    if len(seen) > 8:
        return 400, None, "Too many images in request. Maximum is 8."
    for s in seen:
        if s.kind == "image" and s.size > 10 * MB:
            return 400, None, f"Image at {s.where} is too large: the limit is 10 MB."
        if s.kind == "pdf" and s.size > 50 * MB:
            return 400, None, f"Document at {s.where} is too large: the limit is 50 MB."
        if s.kind == "unknown":
            return 400, None, f"Unsupported file format at {s.where}."
    return None


def _together_limits(seen: list[Seen], model: str) -> tuple[int, str | None, str] | None:
    lowered = model.lower()
    if not ("llama-4" in lowered or "vision" in lowered or "-vl" in lowered):
        return 400, "invalid_request_error", f"Model {model} does not support image inputs."
    bad = next((s for s in seen if s.kind != "image"), None)
    if bad is not None:
        return 400, "invalid_request_error", f"Invalid image at {bad.where}: not an image."
    return None


def _groq_limits(
    seen: list[Seen], body_bytes: int, model: str
) -> tuple[int, str | None, str] | None:
    if not seen:
        return None
    if any(s.kind == "pdf" for s in seen):
        return (
            400,
            None,
            ("'messages' : file content parts are not supported; only text and image_url parts"),
        )
    if "llama-4" not in model and "vision" not in model:
        return 400, "model_not_supported", f"model `{model}` does not support image input"
    if len(seen) > 5:
        return 400, None, "Too many images provided. This model supports up to 5 images"
    if sum(s.encoded for s in seen) > 4 * MB:
        return (
            413,
            "request_too_large",
            ("Request Entity Too Large: base64 encoded images are limited to 4MB per request"),
        )
    return None


def batch_limit_error(provider: str, body: dict[str, Any]) -> tuple[int, str | None, str] | None:
    """Take a batch line's attachments out (the batch keeps descriptors, not the bytes);
    the provider's error when they are over its limits. OpenAI's, Groq's and Azure's
    lines are held to no limits here (their suites test the live limits)."""
    seen = take_attachments(provider, body)
    if not seen or provider not in ("mistral", "together"):
        return None
    return limit_error(provider, seen, 0, str(body.get("model", "")))
