"""Gemini's Files API for attachments too big to go inline (docs/providers.md, Documents
and images).

A Gemini request carries its files as ``inline_data`` only while the whole request stays
under 20 MB. When a request's attachments, as base64, and its text come to more than
:data:`INLINE_REQUEST_BYTES`, its largest files are uploaded one after another through
the Files API until what remains fits inline (:func:`to_upload`), and each uploaded one
travels as a ``file_data`` part naming its URI. A file's bytes are read from disk when it
is uploaded and checked against the request's hash as they go (:class:`agac.media.
VerifiedReader`): a file that changed fails ``attachment_changed`` and its upload is
never finished, so the provider keeps no other bytes under the request's fingerprint.
Nothing of this enters the request's canonical form: its fingerprint stays the media
type and SHA-256 of each file, uploaded or not.

:class:`GeminiFiles` is one adapter's map of SHA-256 → uploaded file (name, URI, when it
expires): the same bytes are uploaded once per adapter — per run — and uploaded again
once Gemini has dropped them (48 h after the upload). The store never holds them. Files
uploaded for live calls are deleted when the adapter closes (the run ends); files a
batch names stay until Gemini drops them, since the batch may still be running.

Two ways to upload, one per transport: the SDK's ``client.aio.files.upload`` (batches,
and ``transport: sdk``) and agac's own resumable upload on the lean transport
(:func:`lean_upload`): ``POST /upload/{version}/files`` with ``X-Goog-Upload-Protocol:
resumable`` and ``X-Goog-Upload-Command: start`` answers the session's URL in
``x-goog-upload-url``; the bytes follow in chunks (``upload``, the last ``upload,
finalize``), whose final answer is ``{"file": File}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agac.errors import AttachmentError, ProviderError, RetryableError
from agac.jsontext import dumps
from agac.media import Attachment, VerifiedReader, base64_size, verify
from agac.providers._http import ErrorMapper, HttpSession
from agac.providers.base import Request

__all__ = [
    "CHUNK_BYTES",
    "FILE_MAX_BYTES",
    "INLINE_REQUEST_BYTES",
    "LIFETIME_SECONDS",
    "GeminiFiles",
    "Uploaded",
    "lean_delete",
    "lean_upload",
    "line_bytes",
    "sdk_delete",
    "sdk_upload",
    "to_upload",
]

MB = 1024 * 1024
INLINE_REQUEST_BYTES = 20 * MB - 256 * 1024
"""The attachments' base64 and the text a request may carry inline: Gemini's 20 MB for
the whole request, less 256 KB kept for its envelope (settings, schema, JSON)."""
FILE_MAX_BYTES = 2 * 1024 * MB
"""The largest file the Files API takes (2 GB)."""
LIFETIME_SECONDS = 48 * 3600.0
"""How long Gemini keeps an uploaded file when its answer does not say."""
LIVE_MARGIN_SECONDS = 600.0
"""An upload is reused for a live call while it has more than this left to live."""
BATCH_MARGIN_SECONDS = 24 * 3600.0
"""An upload is reused in a batch while it has more than this left (a batch's target
turnaround is 24 h); else the batch gets a fresh one."""
CHUNK_BYTES = 8 * MB
"""Bytes per chunk of a resumable upload on the lean transport (the SDK's own figure)."""


@dataclass(frozen=True, slots=True)
class Uploaded:
    """A file Gemini holds: its resource name (``files/…``), its URI (what a
    ``file_data`` part names) and how long it lives from now (seconds)."""

    name: str
    uri: str
    lifetime: float = LIFETIME_SECONDS


def to_upload(request: Request, budget: int = INLINE_REQUEST_BYTES) -> tuple[Attachment, ...]:
    """The attachments of ``request`` that go through the Files API: none while they fit
    inline (their base64 and the request's text within ``budget``), else its largest
    distinct files, one after another, until the rest fits. The same file twice in a
    request is one upload."""
    parts = request.attachments
    if not parts:
        return ()
    return _chosen(parts, sum(len(m.content.encode()) for m in request.messages), budget)[0]


def _chosen(
    parts: tuple[Attachment, ...], text_bytes: int, budget: int
) -> tuple[tuple[Attachment, ...], int]:
    """(the files that go up, the base64 bytes left inline) under :func:`to_upload`'s rule."""
    inline = sum(base64_size(a.size) for a in parts)
    if inline + text_bytes <= budget:
        return (), inline
    distinct: dict[str, Attachment] = {}
    for a in parts:
        distinct.setdefault(a.sha256, a)
    chosen: list[Attachment] = []
    for a in sorted(distinct.values(), key=lambda a: (-a.size, a.sha256)):
        if inline + text_bytes <= budget:
            break
        chosen.append(a)
        inline -= base64_size(a.size) * sum(p.sha256 == a.sha256 for p in parts)
    return tuple(chosen), inline


FILE_PART_BYTES = 256
"""What a ``file_data`` part adds to a line, at most (its media type and URI)."""


def line_bytes(parts: tuple[Attachment, ...], text_bytes: int) -> int:
    """What these attachments add to a batch line whose text is ``text_bytes``: the
    base64 of those left inline, and a ``file_data`` part for each occurrence of one
    uploaded (the engine plans a batch's parts by it)."""
    chosen, inline = _chosen(parts, text_bytes, INLINE_REQUEST_BYTES)
    up = {a.sha256 for a in chosen}
    return inline + FILE_PART_BYTES * sum(p.sha256 in up for p in parts)


Upload = Callable[[Attachment], Awaitable[Uploaded]]
Delete = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class _Held:
    file: Uploaded
    expires: float
    batch: bool


class GeminiFiles:
    """One adapter's uploads: SHA-256 → the file Gemini holds for it, until it expires.

    ``clock`` gives the time (Unix seconds) uploads are dated and judged by; an upload
    expires its ``lifetime`` after the local time it finished, whatever Gemini's clock
    says.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._held: dict[str, _Held] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def uris(
        self, request: Request, upload: Upload, *, batch: bool = False
    ) -> dict[str, str]:
        """SHA-256 → URI of the files of ``request`` that go as ``file_data`` (empty when
        the request fits inline). A file to upload is checked against its hash before
        its upload starts, and again as it is read (an upload held is of the hashed
        bytes already: the file is not read again); AttachmentError
        (``attachment_changed``, ``attachment_not_found``, ``attachment_too_large`` over
        2 GB) and nothing of it sent when it is not the request's."""
        chosen = to_upload(request)
        if not chosen:
            return {}
        for a in chosen:
            if a.size > FILE_MAX_BYTES:
                raise AttachmentError(
                    reason="attachment_too_large",
                    message=f"{a.describe()} is over Gemini's limit of 2 GB per file",
                    hint="make the file smaller or split it",
                )
        margin = BATCH_MARGIN_SECONDS if batch else LIVE_MARGIN_SECONDS
        return {a.sha256: await self._uri(a, upload, margin, batch) for a in chosen}

    async def _uri(self, att: Attachment, upload: Upload, margin: float, batch: bool) -> str:
        """The URI of an upload of ``att`` that lives at least ``margin`` more seconds:
        the one held, or a new one (one upload at a time per file)."""
        lock = self._locks.setdefault(att.sha256, asyncio.Lock())
        async with lock:
            held = self._held.get(att.sha256)
            if held is None or held.expires - self._clock() <= margin:
                await asyncio.to_thread(verify, att)  # a changed file: not even started
                file = await upload(att)
                held = self._held[att.sha256] = _Held(file, self._clock() + file.lifetime, batch)
            held.batch = held.batch or batch
            return held.file.uri

    async def close(self, delete: Delete | None) -> None:
        """Delete the files uploaded for live calls only (a batch may still read the
        others: they expire at Gemini 48 h after their upload), at most 8 at a time; a
        delete that fails is left to expiry too."""
        live = [
            h.file.name for h in self._held.values() if not h.batch and h.expires > self._clock()
        ]
        self._held.clear()
        if delete is None or not live:
            return
        gate = asyncio.Semaphore(8)

        async def one(name: str) -> None:
            async with gate:
                with contextlib.suppress(ProviderError, OSError):
                    await delete(name)

        await asyncio.gather(*(one(n) for n in live))


def _lifetime(created: Any, expires: Any) -> float:
    """Seconds a file lives, from its ``createTime`` and ``expirationTime`` (datetimes or
    RFC 3339 text), else :data:`LIFETIME_SECONDS`."""
    start, end = _when(created), _when(expires)
    if start is None or end is None or end <= start:
        return LIFETIME_SECONDS
    return (end - start).total_seconds()


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    return None


# -- the SDK -------------------------------------------------------------------------------


async def sdk_upload(aio: Any, att: Attachment) -> Uploaded:
    """Upload ``att`` with ``client.aio.files.upload``, from a reader that checks its
    bytes on the way (the caller translates the SDK's errors)."""
    with VerifiedReader(att) as reader:
        file = await aio.files.upload(
            file=reader,
            config={"mime_type": att.media_type, "display_name": att.name or att.sha256[:16]},
        )
    return Uploaded(
        str(file.name),
        str(file.uri),
        _lifetime(getattr(file, "create_time", None), getattr(file, "expiration_time", None)),
    )


DELETE_TIMEOUT = 30.0
"""Seconds a clean-up delete may take: a run's end is not held up by a slow provider."""


async def sdk_delete(aio: Any, name: str) -> None:
    await aio.files.delete(
        name=name, config={"http_options": {"timeout": int(DELETE_TIMEOUT * 1000)}}
    )


# -- the lean transport ---------------------------------------------------------------------


async def lean_upload(
    http: HttpSession, root: str, version: str, errors: ErrorMapper, att: Attachment
) -> Uploaded:
    """Upload ``att`` through the resumable protocol on agac's own HTTP client: start,
    then :data:`CHUNK_BYTES` at a time read from a checked reader, the last chunk
    finalizing. A file found changed stops before its final chunk: no file is made."""
    start = {
        "X-Goog-Upload-Protocol": "resumable",
        "X-Goog-Upload-Command": "start",
        "X-Goog-Upload-Header-Content-Length": str(att.size),
        "X-Goog-Upload-Header-Content-Type": att.media_type,
    }
    with VerifiedReader(att) as reader:
        spec = {"file": {"displayName": att.name or att.sha256[:16], "mimeType": att.media_type}}
        _, headers = await http.exchange(
            "POST",
            f"{root}/upload/{version}/files",
            dumps(spec).encode(),
            errors=errors,
            headers=start,
        )
        url = headers.get("x-goog-upload-url")
        if not url:
            raise RetryableError("gemini: the upload was not started (no x-goog-upload-url)")
        url = _same_host(url, root)
        offset = 0
        body = b""
        while offset < att.size:
            chunk = reader.read(CHUNK_BYTES) or b""
            last = offset + len(chunk) >= att.size
            body, headers = await http.exchange(
                "POST",
                url,
                chunk,
                errors=errors,
                headers={
                    "X-Goog-Upload-Command": "upload, finalize" if last else "upload",
                    "X-Goog-Upload-Offset": str(offset),
                    "Content-Type": "application/octet-stream",
                },
            )
            offset += len(chunk)
    if headers.get("x-goog-upload-status") != "final":
        raise RetryableError("gemini: the upload was not finalized")
    file = (json.loads(body or b"{}") or {}).get("file") or {}
    return Uploaded(
        str(file.get("name")),
        str(file.get("uri")),
        _lifetime(file.get("createTime"), file.get("expirationTime")),
    )


async def lean_delete(
    http: HttpSession, root: str, version: str, errors: ErrorMapper, name: str
) -> None:
    await http.exchange("DELETE", f"{root}/{version}/{name}", errors=errors, timeout=DELETE_TIMEOUT)


def _same_host(url: str, root: str) -> str:
    """The upload session's URL on the configured base URL's scheme and host (as the SDK
    does: a proxy or the emulator answers with its own idea of the host)."""
    base, target = urllib.parse.urlsplit(root), urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(target._replace(scheme=base.scheme, netloc=base.netloc))
