"""Mistral's wire protocol, served under ``/mistral`` (point ``MISTRAL_BASE_URL`` there):
Chat Completions at ``/v1/chat/completions``, files at ``/v1/files`` and batch jobs at
``/v1/batch/jobs``.

What differs from OpenAI that a client can see: errors are a flat
``{"object": "error", "message", "type", "param", "code"}``; a message has no
``refusal``; a Magistral model answers in chunks (``thinking``, then ``text``). A batch
input line is ``{"custom_id", "body"}`` (no ``url``), uploaded with purpose ``batch``; a
job (``POST /v1/batch/jobs``: ``input_files``, ``endpoint``, ``model``, ``metadata``,
``timeout_hours``) goes ``QUEUED → RUNNING → SUCCESS``, or ``FAILED``,
``TIMEOUT_EXCEEDED`` (a ``batch_end: expired`` fault), ``CANCELLATION_REQUESTED`` then
``CANCELLED``; it reports ``total_requests``, ``succeeded_requests``, ``failed_requests``
and its ``output_file`` and ``error_file``, whose lines are OpenAI's result lines. A job
may take its requests inline (``requests`` instead of ``input_files``); its results then
come only inline, as ``outputs`` when the job is asked for with ``inline=true``.
Listing pages with ``page`` and ``page_size``.
"""

from __future__ import annotations

import json
import math
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
from .state import Batch, EmulatorState

__all__ = ["MISTRAL", "routes"]

MISTRAL = clone(
    "mistral",
    "/mistral/v1",
    file_prefix="",
    batch_prefix="",
    service_tier="standard",
    dialect="mistral",
    line_url=False,
)
#: The largest file Mistral takes.
FILE_MAX = 512 * 1024 * 1024
_error = error_renderer(MISTRAL)
_STATUS = {
    "queued": "QUEUED",
    "running": "RUNNING",
    "finalizing": "RUNNING",
    "cancelling": "CANCELLATION_REQUESTED",
}
_FINAL = {
    "completed": "SUCCESS",
    "failed": "FAILED",
    "expired": "TIMEOUT_EXCEEDED",
    "cancelled": "CANCELLED",
}


def routes() -> list[Route]:
    """Mistral's chat, file and batch job routes."""
    p = MISTRAL.prefix
    return [
        *openai_routes(MISTRAL),
        Route(f"{p}/files", _upload, methods=["POST"]),
        Route(f"{p}/files/{{file_id}}/content", _file_content, methods=["GET"]),
        Route(f"{p}/batch/jobs", _job_create, methods=["POST"]),
        Route(f"{p}/batch/jobs", _job_list, methods=["GET"]),
        Route(f"{p}/batch/jobs/{{id}}", _job_get, methods=["GET"]),
        Route(f"{p}/batch/jobs/{{id}}/cancel", _job_cancel, methods=["POST"]),
    ]


async def _upload(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "mistral", "file.upload", _error)
    fields = multipart_fields(request.headers.get("content-type", ""), await request.body())
    if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
        return _error(422, None, None, "Expected a 'file' and purpose 'batch'.")
    filename, content = fields["file"]
    if len(content) > FILE_MAX:
        return _error(400, None, None, f"File is too large: {len(content)} bytes.")
    stored = state.add_file(
        "mistral", str(uuid.uuid4()), filename or "upload.jsonl", "batch", content
    )
    return JSONResponse(_file_json(stored))


async def _file_content(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "mistral", "file.download", _error)
    stored = state.files.get(request.path_params["file_id"])
    if stored is None or stored.provider != "mistral":
        return _error(404, None, None, "File not found")
    return Response(stored.content, media_type="application/octet-stream")


async def _job_create(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, counting(state, MISTRAL, "batch.create", _error))
    metadata = body.get("metadata") or {}
    fired = await gate(request, "mistral", "batch.create", _error, Target(metadata=metadata))
    inline = body.get("requests")
    files = [state.files.get(str(f)) for f in body.get("input_files") or ()]
    if isinstance(inline, list) and not files:
        # Inline batching: the requests in the body, no file (their results come inline).
        contents = ["".join(json.dumps(r) + "\n" for r in inline).encode()]
    elif not files or any(f is None or f.provider != "mistral" for f in files):
        return _error(404, None, None, "Input file not found.")
    else:
        contents = [f.content if f else b"" for f in files]
    if body.get("endpoint") != "/v1/chat/completions":
        return _error(422, None, None, "The emulator batches only /v1/chat/completions.")
    items, invalid = [], []
    for content in contents:
        found, bad, marked = parse_input(content, MISTRAL)
        note_cache(request, marked)
        items += found
        invalid += bad
    model = str(body.get("model") or (items[0].model if items else ""))
    for item in items:
        item.model = item.model or model
    batch = new_batch(
        state,
        fired,
        batch_id=str(uuid.uuid4()),
        provider="mistral",
        model=model,
        items=items,
        metadata=metadata,
        info={
            "input_files": [f.id for f in files if f],
            "inline": isinstance(inline, list) and not files,
            "endpoint": body["endpoint"],
            "timeout_hours": int(body.get("timeout_hours") or 24),
        },
    )
    batch.invalid = invalid
    return created(fired, JSONResponse(job_json(state, batch, "queued", None)))


async def _job_get(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _job(request, "batch.get")
    phase, raw = observe(state, batch, fired)
    inline = request.query_params.get("inline", "").lower() == "true"
    return JSONResponse(job_json(state, batch, phase, raw, inline=inline))


async def _job_cancel(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _job(request, "batch.cancel")
    phase, raw = observe(state, batch, fired)
    if phase != "ended":
        batch.cancel(state.clock.now())
    return JSONResponse(job_json(state, batch, state.phase(batch), raw))


async def _job_list(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "mistral", "batch.list", _error)
    query = request.query_params
    page, size = int(query.get("page", "0")), int(query.get("page_size", "100"))
    mine = [b for b in reversed(state.batches.values()) if b.provider == "mistral"]
    chosen = mine[page * size : (page + 1) * size]
    data = [job_json(state, b, state.phase(b), None) for b in chosen]
    return JSONResponse({"object": "list", "data": data, "total": len(mine)})


async def _job(request: Request, op: str) -> tuple[Batch, Any]:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    target = Target(
        model=batch.model if batch else None, metadata=batch.metadata if batch else None
    )
    fired = await gate(request, "mistral", op, _error, target)
    if batch is None or batch.provider != "mistral":
        raise Rejected(_error(404, None, None, "Batch job not found."))
    return batch, fired


def job_json(
    state: EmulatorState, batch: Batch, phase: str, raw: str | None, *, inline: bool = False
) -> dict[str, Any]:
    """The batch job object as the ``mistralai`` SDK reads it (``raw`` overrides the
    status). A job created with inline requests keeps its results off files: they come as
    ``outputs`` (result lines) when asked with ``inline=true``."""
    ended = phase == "ended"
    total = len(batch.items)
    done = math.floor(total * batch.progress(batch.elapsed(state.clock.now())))
    succeeded = failed = 0
    if ended:
        write_results(state, MISTRAL, batch)
        results = batch.results or []
        succeeded = sum(r.kind == "answered" for r in results)
        failed = sum(r.kind == "errored" for r in results)
        done = succeeded + failed
    status = _FINAL[batch.final or "completed"] if ended else _STATUS[phase]
    inlined = bool(batch.info.get("inline"))
    errors = [{"message": str(e.get("message")), "count": 1} for e in batch.invalid]
    return {
        "id": batch.id,
        "object": "batch",
        "input_files": batch.info["input_files"],
        "metadata": batch.metadata or None,
        "endpoint": batch.info["endpoint"],
        "model": batch.model,
        "agent_id": None,
        "output_file": None if inlined else batch.info.get("output_file_id"),
        "error_file": None if inlined else batch.info.get("error_file_id"),
        "errors": errors,
        "outputs": _outputs(state, batch) if inlined and inline and ended else None,
        "status": raw or status,
        "created_at": int(batch.created_at),
        "total_requests": total,
        "completed_requests": done,
        "succeeded_requests": succeeded if ended else done,
        "failed_requests": failed,
        "started_at": int(batch.created_at) if phase != "queued" else None,
        "completed_at": int(batch.ended_at) if batch.ended_at else None,
    }


def _outputs(state: EmulatorState, batch: Batch) -> list[dict[str, Any]]:
    """An inline job's result lines (its output file's, then its error file's)."""
    lines: list[dict[str, Any]] = []
    for key in ("output_file_id", "error_file_id"):
        stored = state.files.get(str(batch.info.get(key)))
        if stored is not None:
            lines += [json.loads(x) for x in stored.content.splitlines() if x.strip()]
    return lines


def _file_json(stored: Any) -> dict[str, Any]:
    return {
        "id": stored.id,
        "object": "file",
        "bytes": len(stored.content),
        "created_at": int(stored.created_at),
        "filename": stored.filename,
        "purpose": stored.purpose,
        "sample_type": "batch_request",
        "num_lines": stored.content.count(b"\n"),
        "mimetype": "application/jsonl",
        "source": "upload",
        "signature": None,
    }
