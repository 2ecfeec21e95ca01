"""Attachments as agac knows them: files (PNG, JPEG, WebP, GIF, PDF) sent with a prompt.

An :class:`Attachment` names one file by what its bytes are — media type (from the magic
bytes, never the extension), SHA-256 and size — and where to read them again (``path``).
A request's canonical form carries the attachment, its fingerprint hashes only the media
type and the SHA-256 (:meth:`Attachment.hashed`), and the store keeps the canonical form:
the bytes themselves are never stored. They are read from ``path`` again when the request
is sent or its batch line is written, and checked against the hash on the way
(:func:`read_verified`, :func:`write_base64`): a file that changed or vanished fails its
unit (``attachment_changed`` / ``attachment_not_found``) instead of sending other bytes
under the old fingerprint.

This module is a leaf: every layer reads it (config and the engine to describe files,
adapters to send them, the emulator to look at what arrived). It knows bytes, not
providers: each adapter declares what it accepts (:class:`AttachmentLimits`).
"""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import math
import os
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal

from agac.confinement import NotRegularFile, open_regular
from agac.errors import AttachmentError

__all__ = [
    "CHUNK",
    "KINDS",
    "MAX_FILE_BYTES",
    "MEDIA_TYPES",
    "Attachment",
    "AttachmentError",
    "AttachmentLimits",
    "Destination",
    "Kind",
    "PdfPages",
    "VerifiedReader",
    "as_data_url",
    "base64_size",
    "describe_bytes",
    "describe_file",
    "estimate_tokens",
    "image_size",
    "kind_of",
    "pdf_pages",
    "read_verified",
    "sniff",
    "verify",
    "write_base64",
]

Kind = Literal["image", "pdf"]
KINDS: tuple[Kind, ...] = ("image", "pdf")

MEDIA_TYPES: dict[str, Kind] = {
    "image/png": "image",
    "image/jpeg": "image",
    "image/webp": "image",
    "image/gif": "image",
    "application/pdf": "pdf",
}
"""Every media type agac sends, and its kind."""

CHUNK = 3 * 64 * 1024
"""Bytes read at a time when a file is streamed as base64 (a multiple of 3, so every
chunk but the last encodes without padding)."""

MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024
"""The largest file agac attaches, whatever the provider: none takes more (Gemini's Files
API, the largest, takes 2 GB). A file over it is refused by ``stat``, never read."""


def sniff(head: bytes) -> str | None:
    """The media type the first bytes of a file say, or None for a kind agac does not send."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if b"%PDF-" in head[:1024]:
        return "application/pdf"
    return None


def kind_of(media_type: str) -> Kind:
    return MEDIA_TYPES[media_type]


@dataclass(frozen=True, slots=True)
class Attachment:
    """One file sent with a prompt, named by its bytes.

    ``path`` is where the bytes are read again (absolute); ``name`` is what people and
    providers see (the file name); ``width``/``height`` (images) and ``pages`` (PDFs)
    feed the token estimates. None of these enter the fingerprint: only ``media_type``
    and ``sha256`` do (:meth:`hashed`).
    """

    media_type: str
    sha256: str
    size: int
    path: str
    name: str = ""
    width: int | None = None
    height: int | None = None
    pages: int | None = None

    @property
    def kind(self) -> Kind:
        return MEDIA_TYPES[self.media_type]

    def to_dict(self) -> dict[str, Any]:
        """The attachment in a stored (canonical) request."""
        out: dict[str, Any] = {
            "media_type": self.media_type,
            "name": self.name,
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
        }
        for key in ("width", "height", "pages"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @staticmethod
    def hashed(stored: dict[str, Any]) -> dict[str, Any]:
        """What of a stored attachment a fingerprint hashes: the bytes' media type and hash."""
        return {"media_type": stored["media_type"], "sha256": stored["sha256"]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Attachment:
        return cls(
            d["media_type"],
            d["sha256"],
            int(d["size"]),
            d["path"],
            d.get("name", ""),
            d.get("width"),
            d.get("height"),
            d.get("pages"),
        )

    def describe(self) -> str:
        """``image/png 1,234 bytes sha256:ab12cd34`` — how people see it (never the bytes)."""
        extra = ""
        if self.pages is not None:
            extra = f", {self.pages} page{'s' if self.pages != 1 else ''}"
        elif self.width and self.height:
            extra = f", {self.width}×{self.height}"
        return (
            f"{self.name or self.path} ({self.media_type}, {self.size:,} bytes{extra}, "
            f"sha256:{self.sha256[:12]})"
        )


@dataclass(frozen=True)
class AttachmentLimits:
    """What a provider accepts (its published limits): the kinds, per-file size
    of each kind, files per request, pages per PDF, and the bytes of a whole request.
    ``models`` — when set, a predicate on the model name: may this model take images?
    (None: every model of the provider may.)"""

    kinds: frozenset[Kind] = frozenset(KINDS)
    max_file_bytes: dict[Kind, int] = field(default_factory=dict)
    max_files: int | None = None
    max_pdf_pages: int | None = None
    max_request_bytes: int | None = None
    models: Callable[[str], bool] | None = None

    def refusal(self, provider: str, model: str, kind: Kind) -> str | None:
        """Why ``provider``/``model`` cannot take a ``kind`` attachment (None: it can)."""
        if kind not in self.kinds:
            return f"{provider} model {model} cannot take {_KIND_WORDS[kind]} attachments"
        if self.models is not None and not self.models(model):
            return (
                f"{provider} model {model} cannot take {_KIND_WORDS[kind]} attachments "
                "(it is not a vision model)"
            )
        return None

    def file_limit(self, kind: Kind) -> int:
        """The most bytes one file of ``kind`` may have: its per-file limit, what fits in
        one request as base64, and never more than :data:`MAX_FILE_BYTES`."""
        limit = min(MAX_FILE_BYTES, self.max_file_bytes.get(kind, MAX_FILE_BYTES))
        if self.max_request_bytes is not None:
            limit = min(limit, 3 * (self.max_request_bytes // 4))
        return limit

    def check(self, provider: str, model: str, attachments: Iterable[Attachment]) -> None:
        """Raise AttachmentError when these attachments cannot go in one request."""
        atts = list(attachments)
        if self.max_files is not None and len(atts) > self.max_files:
            raise AttachmentError(
                reason="attachment_too_large",
                message=f"{len(atts)} attachments in one "
                f"request; {provider} takes at most {self.max_files}",
                hint="send fewer files per record",
            )
        total = 0
        for a in atts:
            why = self.refusal(provider, model, a.kind)
            if why is not None:
                raise AttachmentError(
                    reason="attachment_not_supported",
                    message=f"{why}: {a.describe()}",
                    hint="use a model that takes this kind of file",
                )
            limit = self.max_file_bytes.get(a.kind)
            if limit is not None and a.size > limit:
                raise AttachmentError(
                    reason="attachment_too_large",
                    message=f"{a.describe()} is over "
                    f"{provider}'s limit of {_mb(limit)} per {a.kind}",
                    hint="make the file smaller or split it",
                )
            if (
                a.kind == "pdf"
                and self.max_pdf_pages is not None
                and a.pages is not None
                and a.pages > self.max_pdf_pages
            ):
                raise AttachmentError(
                    reason="attachment_too_large",
                    message=f"{a.describe()} has more than "
                    f"{self.max_pdf_pages} pages, {provider}'s limit",
                    hint="split the PDF",
                )
            total += base64_size(a.size)
        if self.max_request_bytes is not None and total > self.max_request_bytes:
            raise AttachmentError(
                reason="attachment_too_large",
                message=f"the attachments of one request are "
                f"{_mb(total)} as base64, over {provider}'s request limit of "
                f"{_mb(self.max_request_bytes)}",
                hint="send fewer or smaller files",
            )


_KIND_WORDS = {"image": "image", "pdf": "PDF"}


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB" if n % (1024 * 1024) else f"{n // (1024 * 1024)} MB"


def base64_size(size: int) -> int:
    """The length of ``size`` bytes as base64 (with padding)."""
    return 4 * math.ceil(size / 3)


# -- reading and describing files ---------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """Where a file is going, to judge its size by ``stat`` before a byte of it is read:
    the provider and its limits (None: only :data:`MAX_FILE_BYTES`, agac's own bound)."""

    provider: str = ""
    limits: AttachmentLimits | None = None

    def check_size(self, what: str, kind: Kind | None, size: int) -> None:
        """AttachmentError (``attachment_too_large``) when a file of ``size`` bytes is over
        what this destination takes of ``kind`` (None: not known yet, agac's bound)."""
        limit = MAX_FILE_BYTES
        if kind is not None and self.limits is not None and kind in self.limits.kinds:
            limit = self.limits.file_limit(kind)
        if size <= limit:
            return
        whose = (
            f"the most {self.provider} takes in one {_KIND_WORDS[kind]} file"
            if limit < MAX_FILE_BYTES and kind is not None
            else "the most agac attaches in one file (no provider takes more)"
        )
        raise AttachmentError(
            reason="attachment_too_large",
            message=f"{what} is {size:,} bytes, over {whose}: {_mb(limit)}; it was not read",
            hint="make the file smaller or split it",
        )


def describe_bytes(data: bytes, path: str, name: str, *, what: str) -> Attachment:
    """The attachment these bytes are; AttachmentError when agac cannot send them.
    ``what`` names the file in messages (its path as the user wrote it)."""
    if not data:
        raise _empty(what)
    scan = _Scan(_media_type(data[:1024], what))
    scan.feed(data)
    return scan.attachment(path, name, what)


def describe_file(
    path: str,
    *,
    what: str | None = None,
    name: str | None = None,
    destination: Destination | None = None,
) -> Attachment:
    """Describe the file at ``path`` (absolute), read a chunk at a time: hashed as it
    streams, its header and pages found on the way (memory: a chunk and an image's head).

    Judged before its bytes are read: it must be a regular file
    (``attachment_not_regular_file``: a named pipe, a device) and, by ``stat``, within
    what ``destination`` takes (``attachment_too_large``). AttachmentError with the
    reason: ``attachment_not_found``, ``attachment_unreadable`` (a folder, no
    permission), or what :func:`describe_bytes` finds."""
    what = what or path
    dest = destination or Destination()
    fh, st = _open(path, what)
    with fh:
        size = st.st_size
        if size == 0:
            raise _empty(what)
        dest.check_size(what, None, size)
        head = _read_up_to(fh, min(size, 1024), what)
        media_type = _media_type(head, what)
        dest.check_size(what, MEDIA_TYPES[media_type], size)
        scan = _Scan(media_type)
        scan.feed(head)
        while scan.size <= size and (chunk := _read_up_to(fh, READ_CHUNK, what)):
            scan.feed(chunk)
    if scan.size != size:
        raise AttachmentError(
            reason="attachment_changed",
            message=f"{what} changed while it was read ({size:,} bytes by stat, "
            f"{scan.size:,} read)",
            hint="attach a file nothing is writing to",
        )
    return scan.attachment(path, name or os.path.basename(path), what)


READ_CHUNK = 1024 * 1024
"""Bytes read at a time when a file is described."""

IMAGE_HEAD = 4 * 1024 * 1024
"""Bytes of an image kept to read its size from (a JPEG's frame header comes after its
metadata segments, each at most 64 KB)."""


class _Scan:
    """What :func:`describe_bytes` and :func:`describe_file` learn from a file's bytes, fed
    to it in order: the hash, the size, an image's head, a PDF's pages."""

    def __init__(self, media_type: str) -> None:
        self.media_type = media_type
        self.digest = hashlib.sha256()
        self.size = 0
        self.head = bytearray()
        self.pages = PdfPages() if media_type == "application/pdf" else None

    def feed(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.size += len(chunk)
        if self.pages is not None:
            self.pages.feed(chunk)
        elif len(self.head) < IMAGE_HEAD:
            self.head += chunk[: IMAGE_HEAD - len(self.head)]

    def attachment(self, path: str, name: str, what: str) -> Attachment:
        width = height = pages = None
        if self.pages is not None:
            pages = self.pages.result()
            if pages is None:
                raise AttachmentError(
                    reason="attachment_corrupt",
                    message=f"{what} starts like a PDF but cannot "
                    "be read as one (no end-of-file marker or no pages)",
                    hint="open it in a PDF reader; save it again",
                )
        else:
            dims = image_size(self.media_type, bytes(self.head))
            if dims is None:
                raise AttachmentError(
                    reason="attachment_corrupt",
                    message=f"{what} starts like {self.media_type} but "
                    "its size cannot be read (a truncated or damaged image)",
                    hint="open it in an image viewer; save it again",
                )
            width, height = dims
        return Attachment(
            self.media_type,
            self.digest.hexdigest(),
            self.size,
            path,
            name,
            width,
            height,
            pages,
        )


def _empty(what: str) -> AttachmentError:
    return AttachmentError(
        reason="unsupported_attachment",
        message=f"{what} is empty (0 bytes)",
        hint="an attachment must be a PNG, JPEG, WebP, GIF or PDF file",
    )


def _media_type(head: bytes, what: str) -> str:
    media_type = sniff(head)
    if media_type is None:
        raise AttachmentError(
            reason="unsupported_attachment",
            message=f"{what} is not a PNG, JPEG, WebP, GIF "
            f"or PDF (its first bytes are {head[:8]!r})",
            hint="agac judges a file by its content, not its extension",
        )
    return media_type


def _open(path: str, what: str) -> tuple[io.BufferedReader, os.stat_result]:
    """The regular file at ``path`` opened, and its ``fstat``; AttachmentError with the
    reason for anything else (nothing read yet)."""
    try:
        return open_regular(path)
    except NotRegularFile as exc:
        if exc.kind == "folder":
            raise AttachmentError(
                reason="attachment_unreadable",
                message=f"{what} is a folder, not a file",
                hint="name one file per attachment (a list for several)",
            ) from exc
        raise AttachmentError(
            reason="attachment_not_regular_file",
            message=f"{what} is a {exc.kind}, not a regular file; agac reads only "
            "regular files (nothing was read from it)",
            hint="attach a regular file: copy what the pipe or device gives into one",
        ) from exc
    except OSError as exc:
        raise _unreadable(exc, what) from exc


def _read_up_to(fh: BinaryIO, n: int, what: str) -> bytes:
    try:
        return fh.read(n)
    except OSError as exc:
        raise _unreadable(exc, what) from exc


def _unreadable(exc: OSError, what: str) -> AttachmentError:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return AttachmentError(
            reason="attachment_not_found",
            message=f"{what}: no such file",
            hint="check the path (relative paths start at the project root)",
        )
    if exc.errno == errno.ELOOP:
        return AttachmentError(reason="attachment_unreadable", message=f"{what} is a symlink loop")
    return AttachmentError(
        reason="attachment_unreadable",
        message=f"cannot read {what}: {exc.strerror or exc}",
        hint="check its permissions",
    )


def _reopen(att: Attachment) -> io.BufferedReader:
    """The attachment's file opened again to send it, its size checked by ``fstat``
    before a byte is read (a file of another size changed: ``attachment_changed``)."""
    what = att.name or att.path
    try:
        fh, st = _open(att.path, what)
    except AttachmentError as exc:
        if exc.reason == "attachment_not_found":
            raise AttachmentError(
                reason="attachment_not_found",
                message=f"{what} was there when the request "
                f"was made (sha256:{att.sha256[:12]}) and is gone now",
                hint="put the file back, or run again with --new",
            ) from exc
        raise
    if st.st_size != att.size:
        fh.close()
        raise _changed(att)
    return fh


def read_verified(att: Attachment) -> bytes:
    """The attachment's bytes, read again from its path and checked against its hash
    (never more than its size: a file that grew changed)."""
    with _reopen(att) as fh:
        data = _read_up_to(fh, att.size + 1, att.name or att.path)
    if len(data) != att.size or hashlib.sha256(data).hexdigest() != att.sha256:
        raise _changed(att)
    return data


def _changed(att: Attachment) -> AttachmentError:
    return AttachmentError(
        reason="attachment_changed",
        message=f"{att.name or att.path} changed after the "
        f"request was made (it was sha256:{att.sha256[:12]}, {att.size:,} "
        "bytes); other bytes are never sent under its fingerprint",
        hint="run again with --new to send the file as it is now",
    )


def write_base64(att: Attachment, out: BinaryIO) -> int:
    """Stream the attachment's bytes into ``out`` as base64, CHUNK bytes at a time, and
    check them against its hash on the way; the number of base64 bytes written.
    AttachmentError (``attachment_changed``) when they differ — the caller discards what
    it was writing."""
    digest = hashlib.sha256()
    size = written = 0
    with _reopen(att) as fh:
        while size <= att.size and (chunk := fh.read(CHUNK)):
            digest.update(chunk)
            size += len(chunk)
            encoded = base64.b64encode(chunk)
            out.write(encoded)
            written += len(encoded)
    if size != att.size or digest.hexdigest() != att.sha256:
        raise _changed(att)
    return written


class VerifiedReader(io.RawIOBase):
    """The attachment's file opened for reading, its bytes checked against the hash as
    they are read: the read that reaches the end of bytes other than the request's raises
    AttachmentError (``attachment_changed``) instead of returning them, so a client that
    sends what it reads (a resumable upload, chunk by chunk) never finishes sending
    them. Reads must go forward from the start; a seek back to it starts the check
    again (an SDK measures a file by seeking to its end and back)."""

    def __init__(self, att: Attachment) -> None:
        super().__init__()
        self.att = att
        self._fh = _reopen(att)
        self._digest = hashlib.sha256()
        self._hashed = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._fh.tell()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        at = self._fh.seek(offset, whence)
        if at == 0:
            self._digest, self._hashed = hashlib.sha256(), 0
        return at

    def readinto(self, buffer: Any) -> int:
        if self._fh.tell() != self._hashed:
            raise ValueError(f"{self.att.path}: a verified read must go forward from the start")
        n = self._fh.readinto(buffer)
        self._digest.update(memoryview(buffer)[:n])
        self._hashed += n
        if self._hashed > self.att.size or (n == 0 and self._hashed < self.att.size):
            raise _changed(self.att)
        if (
            self._hashed == self.att.size
            and n
            and (self._digest.hexdigest() != self.att.sha256 or self._fh.read(1))
        ):
            raise _changed(self.att)
        return n

    def close(self) -> None:
        if hasattr(self, "_fh"):
            self._fh.close()
        super().close()


def verify(att: Attachment) -> None:
    """Check the attachment's file against its hash, a chunk at a time (memory: one
    chunk, whatever its size); AttachmentError as :func:`read_verified` raises."""
    with VerifiedReader(att) as reader:
        while reader.read(CHUNK):
            pass


# -- what is inside ------------------------------------------------------------------------


def image_size(media_type: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels from the image's header, or None when it cannot be read."""
    try:
        if media_type == "image/png":
            if data[12:16] != b"IHDR":
                return None
            w, h = struct.unpack(">II", data[16:24])
        elif media_type == "image/gif":
            w, h = struct.unpack("<HH", data[6:10])
        elif media_type == "image/webp":
            return _webp_size(data)
        elif media_type == "image/jpeg":
            return _jpeg_size(data)
        else:
            return None
    except struct.error:
        return None
    return (w, h) if w > 0 and h > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return (w & 0x3FFF, h & 0x3FFF)
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = int.from_bytes(data[21:25], "little")
        return ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(data) >= 30:
        return (
            int.from_bytes(data[24:27], "little") + 1,
            int.from_bytes(data[27:30], "little") + 1,
        )
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    n = len(data)
    while i + 9 < n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return (w, h) if w and h else None
        i += 2 + length
    return None


_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b")


def pdf_pages(data: bytes) -> int | None:
    """The PDF's page count (its page objects, or its page tree's ``/Count`` when the page
    objects are compressed), or None when it is not a readable PDF: no ``%%EOF`` near its
    end, or no page at all."""
    pages = PdfPages()
    pages.feed(data)
    return pages.result()


class PdfPages:
    """:func:`pdf_pages` a chunk at a time, in order, so a large PDF is never held whole.

    A page object seen at the end of a chunk waits for the next one (``/Page`` might go on
    as ``/Pages``); the last :data:`OVERLAP` bytes of each chunk are scanned again with the
    next, so a marker split between two chunks is found, and none is counted twice."""

    OVERLAP = 64 * 1024

    def __init__(self) -> None:
        self._carry = b""
        self._tail = b""
        self._pages = 0
        self._count = 0

    def feed(self, chunk: bytes) -> None:
        buf = self._carry + chunk
        counted = 0
        for m in _PAGE.finditer(buf):
            if m.end() >= len(buf):
                break  # judged with the next chunk
            self._pages += 1
            counted = m.end()
        for a, b in _COUNT.findall(buf):  # the largest wins: seen twice is harmless
            self._count = max(self._count, int(a or b))
        self._carry = buf[max(counted, len(buf) - self.OVERLAP) :]
        self._tail = (self._tail + chunk[-2048:])[-2048:]

    def result(self) -> int | None:
        if b"%%EOF" not in self._tail:
            return None
        pages = self._pages + len(_PAGE.findall(self._carry))
        return (pages or self._count) or None


# -- token estimates -----------------------------------------------------------------------

PDF_PAGE_TOKENS = 2_000
"""Tokens of one PDF page where the provider publishes no fixed figure (OpenAI and
Anthropic send each page as its text plus an image of it: 1,500–3,000 a page)."""


def estimate_tokens(provider: str, att: Attachment) -> int:
    """Input tokens an attachment is billed as, by the provider's published rules — an
    estimate (the ledger records what the provider reports):

    - OpenAI, Groq, Ollama: the image scaled into 2048×2048, its short side to 768, then
      85 + 170 per 512-pixel tile;
    - Anthropic: width × height / 750 after scaling the long side to 1568;
    - Gemini: 258 per image up to 384×384, else 258 per 768×768 tile; 258 per PDF page;
    - PDF pages elsewhere: :data:`PDF_PAGE_TOKENS` each.
    """
    if att.kind == "pdf":
        per_page = 258 if provider == "gemini" else PDF_PAGE_TOKENS
        return per_page * (att.pages or 1)
    w, h = att.width or 1024, att.height or 1024
    if provider == "anthropic":
        scale = min(1.0, 1568 / max(w, h))
        return max(1, math.ceil((w * scale) * (h * scale) / 750))
    if provider == "gemini":
        if w <= 384 and h <= 384:
            return 258
        return 258 * math.ceil(w / 768) * math.ceil(h / 768)
    scale = min(1.0, 2048 / max(w, h))
    fw, fh = w * scale, h * scale
    scale = min(1.0, 768 / min(fw, fh))
    fw, fh = fw * scale, fh * scale
    return 85 + 170 * math.ceil(fw / 512) * math.ceil(fh / 512)


def as_data_url(att: Attachment, data: bytes) -> str:
    return f"data:{att.media_type};base64," + base64.b64encode(data).decode("ascii")
