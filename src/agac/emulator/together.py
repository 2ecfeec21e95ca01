"""Together AI's wire protocol, served under ``/together`` (point ``TOGETHER_BASE_URL``
there): Chat Completions at ``/v1/chat/completions``, files at ``/v1/files`` and batches at
``/v1/batches``.

A file upload takes three calls, as the ``together`` SDK makes them: ``POST /v1/files``
(a form with ``purpose``, ``file_name``, ``file_type``, ``checksum``) answers ``302`` with
a ``Location`` to PUT the bytes to (here ``/together/_upload/{id}``) and the file's id in
``X-Together-File-Id``; then ``POST /v1/files/{id}/preprocess`` returns the file. A batch
file's purpose is ``batch-api`` and its lines are ``{"custom_id", "body"}``. A batch
(``POST /v1/batches``: ``input_file_id``, ``endpoint``, ``completion_window``; the answer
is ``{"job", "warning"}``) goes ``VALIDATING → IN_PROGRESS → COMPLETED``, or ``FAILED``,
``EXPIRED`` (a ``batch_end: expired`` fault) or ``CANCELLED``; it reports a ``progress``
percentage and no counts, its times as ISO 8601, and its ``output_file_id`` and
``error_file_id``, whose lines are OpenAI's result lines. Listing returns every batch.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .faults import Target
from .handling import Rejected, created, gate, new_batch, note_cache, observe, read_json, state_of
from .openai import (
    clone,
    counting,
    error_renderer,
    multipart_fields,
    parse_input,
    write_results,
)
from .openai import routes as openai_routes
from .state import Batch, EmulatorState, StoredFile

__all__ = ["TOGETHER", "routes"]

TOGETHER = clone("together", "/together/v1", batch_prefix="", line_url=False)
_error = error_renderer(TOGETHER)
# Together documents no cancelling status: a batch being cancelled still reads IN_PROGRESS.
_STATUS = {
    "queued": "VALIDATING",
    "running": "IN_PROGRESS",
    "finalizing": "IN_PROGRESS",
    "cancelling": "IN_PROGRESS",
}
_FINAL = {
    "completed": "COMPLETED",
    "failed": "FAILED",
    "expired": "EXPIRED",
    "cancelled": "CANCELLED",
}


def routes() -> list[Route]:
    """Together's chat, file and batch routes."""
    p = TOGETHER.prefix
    return [
        *openai_routes(TOGETHER),
        Route(f"{p}/files", _upload_start, methods=["POST"]),
        Route("/together/_upload/{file_id}", _upload_put, methods=["PUT"]),
        Route(f"{p}/files/{{file_id}}/preprocess", _preprocess, methods=["POST"]),
        Route(f"{p}/files/{{file_id}}", _file_get, methods=["GET"]),
        Route(f"{p}/files/{{file_id}}/content", _file_content, methods=["GET"]),
        Route(f"{p}/batches", _batch_create, methods=["POST"]),
        Route(f"{p}/batches", _batch_list, methods=["GET"]),
        Route(f"{p}/batches/{{id}}", _batch_get, methods=["GET"]),
        Route(f"{p}/batches/{{id}}/cancel", _batch_cancel, methods=["POST"]),
    ]


async def _upload_start(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "together", "file.upload", _error)
    fields = multipart_fields(request.headers.get("content-type", ""), await request.body())
    purpose = fields.get("purpose", (None, b""))[1].decode()
    name = fields.get("file_name", (None, b""))[1].decode()
    if purpose != "batch-api" or not name:
        return _error(400, None, None, "Expected a 'file_name' and purpose 'batch-api'.")
    stored = state.add_file("together", "file-" + str(uuid.uuid4()), name, purpose, b"")
    stored.pending = 1  # until its bytes arrive
    location = str(request.base_url).rstrip("/") + f"/together/_upload/{stored.id}"
    return Response(
        status_code=302, headers={"Location": location, "X-Together-File-Id": stored.id}
    )


async def _upload_put(request: Request) -> Response:
    await gate(request, "together", "file.put", _error)
    stored = _stored(request)
    stored.content = await request.body()
    stored.pending = 0
    return Response(status_code=200)


async def _preprocess(request: Request) -> Response:
    await gate(request, "together", "file.process", _error)
    stored = _stored(request)
    if stored.pending:
        return _error(400, None, None, "The file's bytes were never uploaded.")
    return JSONResponse(_file_json(stored))


async def _file_get(request: Request) -> Response:
    await gate(request, "together", "file.get", _error)
    return JSONResponse(_file_json(_stored(request)))


async def _file_content(request: Request) -> Response:
    await gate(request, "together", "file.download", _error)
    return Response(_stored(request).content, media_type="application/octet-stream")


def _stored(request: Request) -> StoredFile:
    stored = state_of(request).files.get(request.path_params["file_id"])
    if stored is None or stored.provider != "together":
        raise Rejected(_error(404, None, None, "File not found"))
    return stored


async def _batch_create(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, counting(state, TOGETHER, "batch.create", _error))
    fired = await gate(request, "together", "batch.create", _error, Target(metadata={}))
    stored = state.files.get(str(body.get("input_file_id")))
    if stored is None or stored.provider != "together" or stored.pending:
        return _error(400, None, None, "Invalid input_file_id: file not found.")
    if body.get("endpoint") != "/v1/chat/completions":
        return _error(400, None, None, "The emulator batches only /v1/chat/completions.")
    items, invalid, marked = parse_input(stored.content, TOGETHER)
    note_cache(request, marked)
    batch = new_batch(
        state,
        fired,
        batch_id=str(uuid.uuid4()),
        provider="together",
        model=items[0].model if items else "",
        items=items,
        info={
            "input_file_id": stored.id,
            "endpoint": body["endpoint"],
            "bytes": len(stored.content),
        },
    )
    batch.invalid = invalid
    answer = {"job": job_json(state, batch, "queued", None), "warning": None}
    return created(fired, JSONResponse(answer))


async def _batch_get(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _batch(request, "batch.get")
    phase, raw = observe(state, batch, fired)
    return JSONResponse(job_json(state, batch, phase, raw))


async def _batch_cancel(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _batch(request, "batch.cancel")
    phase, raw = observe(state, batch, fired)
    if phase != "ended":
        batch.cancel(state.clock.now())
    return JSONResponse(job_json(state, batch, state.phase(batch), raw))


async def _batch_list(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "together", "batch.list", _error)
    mine = [b for b in state.batches.values() if b.provider == "together"]
    return JSONResponse([job_json(state, b, state.phase(b), None) for b in mine])


async def _batch(request: Request, op: str) -> tuple[Batch, Any]:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    target = Target(model=batch.model if batch else None, metadata={})
    fired = await gate(request, "together", op, _error, target)
    if batch is None or batch.provider != "together":
        raise Rejected(_error(404, None, None, "Batch not found."))
    return batch, fired


def job_json(state: EmulatorState, batch: Batch, phase: str, raw: str | None) -> dict[str, Any]:
    """The batch as the ``together`` SDK reads it (``raw`` overrides the status)."""
    ended = phase == "ended"
    progress = 100.0 * batch.progress(batch.elapsed(state.clock.now()))
    if ended:
        write_results(state, TOGETHER, batch)
        progress = 100.0 if batch.final == "completed" else progress
    status = _FINAL[batch.final or "completed"] if ended else _STATUS[phase]
    error = "; ".join(str(e.get("message")) for e in batch.invalid) or None
    return {
        "id": batch.id,
        "user_id": "emulator",
        "input_file_id": batch.info["input_file_id"],
        "file_size_bytes": batch.info["bytes"],
        "status": raw or status,
        "job_deadline": _iso(batch.created_at + 86400),
        "created_at": _iso(batch.created_at),
        "endpoint": batch.info["endpoint"],
        "progress": round(progress, 1),
        "model_id": batch.model,
        "output_file_id": batch.info.get("output_file_id"),
        "error_file_id": batch.info.get("error_file_id"),
        "error": error if ended and batch.final == "failed" else None,
        "completed_at": _iso(batch.ended_at) if batch.ended_at else None,
    }


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat().replace("+00:00", "Z")


def _file_json(stored: StoredFile) -> dict[str, Any]:
    return {
        "id": stored.id,
        "object": "file",
        "bytes": len(stored.content),
        "created_at": int(stored.created_at),
        "filename": stored.filename,
        "FileType": "jsonl",
        "purpose": stored.purpose,
        "processing_status": "COMPLETED",
        "Processed": True,
        "LineCount": stored.content.count(b"\n"),
    }
