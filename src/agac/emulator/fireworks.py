"""Fireworks AI's wire protocol, served under ``/fireworks`` (point ``FIREWORKS_BASE_URL``
at ``<emulator>/fireworks/inference/v1``): Chat Completions at
``/fireworks/inference/v1/chat/completions``, and the control plane's datasets and batch
inference jobs under ``/fireworks/v1/accounts/{account}``.

A batch's input is a dataset: created (``POST …/datasets {datasetId, dataset}``), then
filled by a multipart upload (``POST …/datasets/{id}:upload``, the ``file`` field) with
``{"custom_id", "body"}`` lines. A job (``POST
…/batchInferenceJobs?batchInferenceJobId=<id>``: ``model``, ``inputDatasetId``,
``outputDatasetId``; an id already taken is a 409) goes ``JOB_STATE_VALIDATING →
JOB_STATE_RUNNING → JOB_STATE_WRITING_RESULTS → JOB_STATE_COMPLETED``, or
``JOB_STATE_FAILED``, ``JOB_STATE_EXPIRED`` (a ``batch_end: expired`` fault: the rows it
finished are in its output, the others are not) or ``JOB_STATE_CANCELLING`` then
``JOB_STATE_CANCELLED``; ``jobProgress`` counts its requests and tokens. Its output
dataset's files are named by ``…/datasets/{id}:getDownloadEndpoint``
(``filenameToSignedUrls``): ``BIJOutputSet.jsonl`` holds ``{"custom_id", "response"}``
rows, ``error-data.jsonl`` ``{"custom_id", "error"}`` rows. A signed URL is read without
the API key (one sent with an ``Authorization`` header is refused, as a signed URL's
store refuses a second credential).
"""

from __future__ import annotations

import datetime as dt
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
    completion,
    counting,
    error_renderer,
    multipart_fields,
    parse_input,
)
from .openai import routes as openai_routes
from .state import Batch, EmulatorState, StoredFile

__all__ = ["FIREWORKS", "routes"]

FIREWORKS = clone(
    "fireworks", "/fireworks/inference/v1", file_prefix="", batch_prefix="", line_url=False
)
_error = error_renderer(FIREWORKS)
_ACCOUNT = "/fireworks/v1/accounts/{account}"
_STATUS = {
    "queued": "JOB_STATE_VALIDATING",
    "running": "JOB_STATE_RUNNING",
    "finalizing": "JOB_STATE_WRITING_RESULTS",
    "cancelling": "JOB_STATE_CANCELLING",
}
_FINAL = {
    "completed": "JOB_STATE_COMPLETED",
    "failed": "JOB_STATE_FAILED",
    "expired": "JOB_STATE_EXPIRED",
    "cancelled": "JOB_STATE_CANCELLED",
}
#: The largest input dataset Fireworks takes.
DATASET_MAX = 500 * 1024 * 1024


def routes() -> list[Route]:
    """Fireworks' chat, dataset and batch inference job routes."""
    a = _ACCOUNT
    return [
        *openai_routes(FIREWORKS),
        Route(f"{a}/datasets", _dataset_create, methods=["POST"]),
        Route(f"{a}/datasets/{{id}}:upload", _dataset_upload, methods=["POST"]),
        Route(f"{a}/datasets/{{id}}:getDownloadEndpoint", _download_endpoint, methods=["GET"]),
        Route(f"{a}/batchInferenceJobs", _job_create, methods=["POST"]),
        Route(f"{a}/batchInferenceJobs/{{id}}:cancel", _job_cancel, methods=["POST"]),
        Route(f"{a}/batchInferenceJobs/{{id}}", _job_get, methods=["GET"]),
        Route("/fireworks/_signed/{file_id}", _signed, methods=["GET"]),
    ]


def _dataset_key(request: Request, dataset: str) -> str:
    return f"accounts/{request.path_params['account']}/datasets/{dataset}"


async def _dataset_create(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, counting(state, FIREWORKS, "dataset.create", _error))
    await gate(request, "fireworks", "dataset.create", _error)
    dataset = str(body.get("datasetId") or "")
    if not dataset or not isinstance(body.get("dataset"), dict):
        return _error(400, None, None, "A dataset needs a 'datasetId' and a 'dataset'.")
    key = _dataset_key(request, dataset)
    if key in state.files:
        return _error(409, None, None, f"Dataset {key} already exists.")
    stored = state.add_file("fireworks", key, f"{dataset}.jsonl", "dataset", b"")
    stored.pending = 1  # until its file is uploaded
    return JSONResponse({"name": key, "state": "UPLOADING", "exampleCount": "0"})


async def _dataset_upload(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "fireworks", "file.upload", _error)
    stored = state.files.get(_dataset_key(request, request.path_params["id"]))
    if stored is None:
        return _error(404, None, None, "Dataset not found.")
    fields = multipart_fields(request.headers.get("content-type", ""), await request.body())
    if "file" not in fields:
        return _error(400, None, None, "Expected a multipart 'file'.")
    content = fields["file"][1]
    if len(content) > DATASET_MAX:
        return _error(400, None, None, f"The dataset is too large: {len(content)} bytes.")
    stored.content, stored.pending = content, 0
    return JSONResponse({"filenameToSignedUrls": {}})


async def _job_create(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, counting(state, FIREWORKS, "batch.create", _error))
    fired = await gate(request, "fireworks", "batch.create", _error, Target(metadata={}))
    job = request.query_params.get("batchInferenceJobId") or uuid.uuid4().hex
    name = f"accounts/{request.path_params['account']}/batchInferenceJobs/{job}"
    if name in state.batches:
        return _error(409, None, None, f"Batch inference job {name} already exists.")
    stored = state.files.get(str(body.get("inputDatasetId")))
    if stored is None or stored.provider != "fireworks" or stored.pending:
        return _error(400, None, None, "The input dataset is missing or has no file.")
    items, invalid, marked = parse_input(stored.content, FIREWORKS)
    note_cache(request, marked)
    model = str(body.get("model") or "")
    if not model:
        return _error(400, None, None, "A batch inference job needs a 'model'.")
    for item in items:
        item.model = item.model or model
    batch = new_batch(
        state,
        fired,
        batch_id=name,
        provider="fireworks",
        model=model,
        items=items,
        info={
            "job": job,
            "input": stored.id,
            "output": str(body.get("outputDatasetId") or f"{stored.id}-output"),
            "display": str(body.get("displayName") or ""),
        },
    )
    batch.invalid = invalid
    return created(fired, JSONResponse(job_json(state, batch, "queued", None)))


async def _job_get(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _job(request, "batch.get")
    phase, raw = observe(state, batch, fired)
    return JSONResponse(job_json(state, batch, phase, raw))


async def _job_cancel(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _job(request, "batch.cancel")
    phase, raw = observe(state, batch, fired)
    if phase != "ended":
        batch.cancel(state.clock.now())
    return JSONResponse(job_json(state, batch, state.phase(batch), raw))


async def _job(request: Request, op: str) -> tuple[Batch, Any]:
    state = state_of(request)
    name = (
        f"accounts/{request.path_params['account']}/batchInferenceJobs/{request.path_params['id']}"
    )
    batch = state.batches.get(name)
    fired = await gate(
        request, "fireworks", op, _error, Target(model=batch.model if batch else None)
    )
    if batch is None or batch.provider != "fireworks":
        raise Rejected(_error(404, None, None, f"Batch inference job {name} not found."))
    return batch, fired


async def _download_endpoint(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "fireworks", "file.get", _error)
    key = _dataset_key(request, request.path_params["id"])
    batch = next(
        (
            b
            for b in state.batches.values()
            if b.provider == "fireworks" and b.info["output"] == key
        ),
        None,
    )
    if batch is None or "files" not in batch.info:
        return _error(404, None, None, f"Dataset {key} not found.")
    root = str(request.base_url).rstrip("/")
    urls = {
        name: f"{root}/fireworks/_signed/{file_id}?signature=emulator"
        for name, file_id in batch.info["files"].items()
    }
    return JSONResponse({"filenameToSignedUrls": urls})


async def _signed(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "fireworks", "file.download", _error)
    if "authorization" in request.headers:
        return Response("A signed URL takes no other credential.", status_code=400)
    stored = state.files.get(request.path_params["file_id"])
    if stored is None or stored.provider != "fireworks":
        return Response("Not found.", status_code=404)
    return Response(stored.content, media_type="application/octet-stream")


def job_json(state: EmulatorState, batch: Batch, phase: str, raw: str | None) -> dict[str, Any]:
    """The job as Fireworks reports it (``raw`` overrides its state)."""
    ended = phase == "ended"
    total = len(batch.items)
    done = math.floor(total * batch.progress(batch.elapsed(state.clock.now())))
    succeeded, failed, tokens = done, 0, (0, 0, 0)
    if ended:
        _write_output(state, batch)
        results = batch.results or []
        succeeded = sum(r.kind == "answered" for r in results)
        failed = sum(r.kind == "errored" for r in results)
        answers = [r.answer for r in results if r.answer is not None]
        tokens = (
            sum(a.input_tokens for a in answers),
            sum(a.output_tokens for a in answers),
            sum(a.cached_tokens for a in answers),
        )
    status = _FINAL[batch.final or "completed"] if ended else _STATUS[phase]
    message = "; ".join(str(e.get("message")) for e in batch.invalid)
    account = batch.id.split("/")[1]
    return {
        "name": batch.id,
        "displayName": batch.info["display"],
        "createTime": _iso(batch.created_at),
        "updateTime": _iso(batch.ended_at or batch.created_at),
        "state": raw or status,
        "status": {"code": "INVALID_ARGUMENT" if message else "OK", "message": message},
        "model": batch.model,
        "inputDatasetId": batch.info["input"],
        "outputDatasetId": batch.info["output"],
        "jobProgress": {
            "percent": 100 if ended else round(100 * done / total) if total else 0,
            "totalInputRequests": total,
            "totalProcessedRequests": succeeded + failed,
            "successfullyProcessedRequests": succeeded,
            "failedRequests": failed,
            "outputRows": succeeded + failed,
            "inputTokens": tokens[0],
            "outputTokens": tokens[1],
            "cachedInputTokenCount": tokens[2],
        },
        "accountId": account,
    }


def _write_output(state: EmulatorState, batch: Batch) -> None:
    """The output dataset's files of an ended job, once: a row per answered or errored
    request (an expired job's unfinished requests have none)."""
    if "files" in batch.info:
        return
    out, err = [], []
    for result in batch.results or []:
        row: dict[str, Any] = {"custom_id": result.item.custom_id}
        if result.kind == "answered" and result.answer is not None:
            row["response"] = completion(
                FIREWORKS, result.item.model, result.answer, state.clock.now(), "batch"
            )
            out.append(row)
        elif result.kind == "errored" and result.error is not None:
            e = result.error
            row["error"] = {"message": e.message, "code": e.code, "status_code": e.status}
            err.append(row)
    files: dict[str, str] = {}
    for name, rows in (("BIJOutputSet.jsonl", out), ("error-data.jsonl", err)):
        if rows:
            content = "".join(json.dumps(r) + "\n" for r in rows).encode()
            stored: StoredFile = state.add_file(
                "fireworks", "fw-" + uuid.uuid4().hex, name, "output", content
            )
            files[name] = stored.id
    batch.info["files"] = files


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat().replace("+00:00", "Z")
