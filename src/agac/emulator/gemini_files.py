"""Gemini's Files API for attachments, as the emulator keeps it: an uploaded image or PDF
is described (media type, size, SHA-256, pages) when its upload is finalized and its
bytes dropped — the emulator's files, journal and batches hold the descriptor, never
the data, as they do for ``inline_data``. A JSONL upload (a batch's input) keeps its
bytes: it is read when the batch is created.

A ``file_data`` part (REST ``fileData: {mimeType, fileUri}``, or the snake_case form)
names an uploaded file by its URI (``…/files/<id>``, or ``files/<id>``); reading a
request puts the file's descriptor in place of the URI, so the answer names what the
file was, and the same bytes give the same answer whatever the upload's id. A URI that
names no file the emulator holds — never uploaded, deleted, or more than 48 hours old
(Gemini drops uploads then) — is refused with Gemini's ``403 PERMISSION_DENIED``. A
batch is refused at creation for it (Gemini would fail the item when it runs).
"""

from __future__ import annotations

import json
from typing import Any

from agac.media import sniff

from .handling import ErrorRenderer, Rejected
from .media import describe_raw
from .state import EmulatorState, StoredFile

__all__ = ["LIFETIME_SECONDS", "finish_upload", "take_files"]

PROVIDER = "gemini"
LIFETIME_SECONDS = 48 * 3600.0
"""How long Gemini keeps an uploaded file."""


def finish_upload(
    state: EmulatorState, file_id: str, name: str, mime_type: str, data: bytes
) -> StoredFile:
    """Store a finalized upload: an attachment as its descriptor (journaled as
    ``file.finalize``, bytes dropped), anything else (a batch's JSONL) as its bytes."""
    if sniff(data[:1024]) is None:
        return state.add_file(PROVIDER, file_id, name, "uploaded", data, mime_type)
    seen = describe_raw(f"files/{file_id}", data, mime_type, len(data))
    stored = state.add_file(PROVIDER, file_id, name, "uploaded", b"", mime_type)
    stored.described = seen
    note = {
        "name": f"files/{file_id}",
        "media_type": seen.media_type,
        "size": seen.size,
        "sha256": seen.sha256,
        "pages": seen.pages,
    }
    state.journal.add(
        PROVIDER,
        "file.finalize",
        "POST",
        "/upload/v1beta/files",
        "",
        [],
        json.dumps(note).encode(),
        "",
    )
    return stored


def expired(state: EmulatorState, stored: StoredFile) -> bool:
    """Has Gemini dropped this upload (48 hours after it was made)?"""
    return (
        stored.purpose == "uploaded" and stored.created_at + LIFETIME_SECONDS <= state.clock.now()
    )


def take_files(state: EmulatorState, body: Any, error: ErrorRenderer) -> int:
    """Put in place of each ``file_data`` URI of ``body`` (a GenerateContentRequest) the
    descriptor of the file it names; the number of such parts. Rejected with Gemini's
    403 when a URI names no file held."""
    found = 0
    for content in (body.get("contents") or ()) if isinstance(body, dict) else ():
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            ref = (
                (part.get("fileData") or part.get("file_data")) if isinstance(part, dict) else None
            )
            if not isinstance(ref, dict):
                continue
            key = "fileUri" if "fileUri" in ref else "file_uri"
            stored = _named(state, ref.get(key))
            if stored is None:
                raise Rejected(
                    error(
                        403,
                        None,
                        None,
                        "You do not have permission to access "
                        f"the File {_id(ref.get(key))} or it may not exist.",
                    )
                )
            ref[key] = (
                stored.described.descriptor()
                if stored.described is not None
                else f"files/{stored.id}"
            )
            found += 1
    return found


def _named(state: EmulatorState, uri: Any) -> StoredFile | None:
    stored = state.files.get(_id(uri))
    if stored is None or stored.provider != PROVIDER or expired(state, stored):
        return None
    return stored


def _id(uri: Any) -> str:
    """The file id a URI names: what follows its last ``files/``."""
    text = str(uri or "")
    return text.rsplit("files/", 1)[-1] if "files/" in text else text
