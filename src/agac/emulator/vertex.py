"""Google Vertex AI's wire protocol for Gemini models, as google-genai calls it in Vertex
mode (any API version in the path, ``v1beta1`` by default), and Google's OAuth token
endpoint (Claude's rawPredict and batch lines are :mod:`.vertex_claude`'s):

- ``POST /vertex/token`` is a service account's token endpoint (its key file's
  ``token_uri``): a JWT-bearer grant is answered ``{"access_token", "expires_in",
  "token_type"}``. Every Vertex call must carry one of the tokens it issued
  (``Authorization: Bearer …``), else 401 ``UNAUTHENTICATED``.
- ``POST /{v}/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent``
  answers as Gemini's generateContent (:mod:`.gemini`), counted, faulted and billed as
  provider ``vertex``.
- ``POST /{v}/projects/{p}/locations/{l}/batchPredictionJobs`` creates a batch prediction
  job over the JSONL objects its ``inputConfig.gcsSource.uris`` name in the emulator's
  Cloud Storage (:mod:`.gcs`), each line ``{"request": GenerateContentRequest}``; an item
  is known by its request's ``labels.agac_key`` (else its line number), which ``custom_id``
  fault rules match. A ``batch.create`` ``http: 429`` fault is the project's quota of
  concurrent jobs. ``GET …/batchPredictionJobs`` lists them (``filter=display_name="…"``,
  pages of ``pageSize``); ``GET …/batchPredictionJobs/{id}`` reads one and
  ``POST …/batchPredictionJobs/{id}:cancel`` cancels it.
- A job goes ``JOB_STATE_QUEUED → PENDING → RUNNING → SUCCEEDED``; a ``batch_end`` fault
  ends it ``FAILED``, ``EXPIRED`` (``answered: 0``) or ``PARTIALLY_SUCCEEDED``
  (``expired`` with ``answered: n``); a cancel makes it ``CANCELLING`` then ``CANCELLED``;
  ``batch_drop_records`` leaves records out of the output.
- When a job has ended with answers, its output is written once under
  ``<outputUriPrefix>/prediction-model-<time>/predictions.jsonl``: ``{"status": "",
  "processed_time", "request", "response"}`` lines in no order (an errored one has the
  error as ``status`` text ending in its ``google.rpc.Status`` JSON), and the job's
  ``outputInfo.gcsOutputDirectory`` names that folder.
"""

from __future__ import annotations

import copy
import json
import random
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import gemini, vertex_claude
from .answers import prompt_tokens
from .faults import Target
from .gcs import read_object, write_object
from .handling import Rejected, created, gate, new_batch, observe, read_json, state_of
from .media import take_attachments
from .state import Batch, BatchItem, EmulatorState, ItemResult

__all__ = ["PROVIDER", "routes", "status_name"]

PROVIDER = "vertex"
TOKEN_SECONDS = 3600
_FINAL = {
    "completed": "JOB_STATE_SUCCEEDED",
    "failed": "JOB_STATE_FAILED",
    "cancelled": "JOB_STATE_CANCELLED",
}
_ROOT = "/{version}/projects/{project}/locations/{location}"

error = gemini.error


async def token(request: Request) -> Response:
    """A service account's JWT-bearer grant, answered with a fresh access token."""
    form = parse_qs((await request.body()).decode())
    if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
    if not form.get("assertion"):
        return JSONResponse({"error": "invalid_grant"}, status_code=400)
    issued = "ya29.emulator-" + uuid.uuid4().hex
    state_of(request).google_tokens.append(issued)
    return JSONResponse(
        {"access_token": issued, "expires_in": TOKEN_SECONDS, "token_type": "Bearer"}
    )


def _signed_in(request: Request) -> None:
    """Rejected 401 unless the call carries a token the token endpoint issued."""
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if bearer not in state_of(request).google_tokens:
        raise Rejected(error(401, None, None, "Request had invalid authentication credentials."))


async def models_post(request: Request) -> Response:
    _signed_in(request)
    model, _, method = request.path_params["target"].rpartition(":")
    if request.path_params["publisher"] == "anthropic":
        if method != "rawPredict":
            return error(404, None, None, f"Method {method!r} is not emulated.")
        return await vertex_claude.raw_predict(request, model)
    if method != "generateContent":
        return error(404, None, None, f"Method {method!r} is not emulated.")
    return await gemini.generate(request, model, PROVIDER)


# -- batch prediction jobs -----------------------------------------------------------


def _lines(state: EmulatorState, uris: list[str]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for uri in uris:
        parts = urlsplit(uri)
        data = read_object(state, parts.netloc, parts.path.lstrip("/"))
        if data is None:
            raise Rejected(error(400, None, None, f"Input file {uri} not found."))
        for number, raw in enumerate(data.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                request = line["request"]
            except (ValueError, KeyError, TypeError) as exc:
                raise Rejected(error(400, None, None, f"{uri} line {number}: {exc}")) from exc
            where = f"{uri} line {number}"
            lines.append({**line, "request": request, "number": number, "where": where})
    if not lines:
        raise Rejected(error(400, None, None, "The job's input holds no requests."))
    return lines


def _item(model: str, line: dict[str, Any]) -> BatchItem:
    echo = line["request"]
    body = copy.deepcopy(echo)
    take_attachments(PROVIDER, body)  # the batch keeps descriptors, not bytes
    canonical, prompt, schema, max_tokens = gemini.decode_request(body)
    canonical = {k: v for k, v in canonical.items() if k != "labels"}
    labels = echo.get("labels") or {}
    return BatchItem(
        custom_id=str(labels.get("agac_key") or line["number"]),
        model=model,
        canonical=canonical,
        prompt=prompt,
        schema=schema,
        max_tokens=max_tokens,
        extra={"request": echo, "tokens": prompt_tokens(prompt, canonical)},
    )


async def create_job(request: Request) -> Response:
    _signed_in(request)
    state = state_of(request)
    body = await read_json(request, error)
    model = str(body.get("model") or "").rsplit("/", 1)[-1]
    display = str(body.get("displayName") or "")
    metadata = {"displayName": display} if display else {}
    fired = await gate(
        request, PROVIDER, "batch.create", error, Target(model=model, metadata=metadata)
    )
    uris = ((body.get("inputConfig") or {}).get("gcsSource") or {}).get("uris") or []
    prefix = ((body.get("outputConfig") or {}).get("gcsDestination") or {}).get("outputUriPrefix")
    if not model or not display or not uris or not prefix:
        return error(
            400, None, None, "displayName, model, gcsSource and gcsDestination are required."
        )
    lines = _lines(state, [str(u) for u in uris])
    if vertex_claude.is_claude_model(str(body.get("model") or "")):
        items = [vertex_claude.claude_item(model, line, line["where"]) for line in lines]
    else:
        items = [_item(model, line) for line in lines]
    job_id = str(random.randint(10**17, 10**18 - 1))
    p, loc = request.path_params["project"], request.path_params["location"]
    info = {"name": f"projects/{p}/locations/{loc}/batchPredictionJobs/{job_id}", "body": body}
    batch = new_batch(
        state,
        fired,
        batch_id=job_id,
        provider=PROVIDER,
        model=model,
        items=items,
        metadata=metadata,
        info=info,
    )
    return created(fired, JSONResponse(job_json(state, batch, "queued", None)))


async def _job(request: Request, op: str) -> tuple[Batch, Any]:
    _signed_in(request)
    state = state_of(request)
    ident = request.path_params["id"].partition(":")[0]
    batch = state.batches.get(ident)
    if batch is not None and batch.provider != PROVIDER:
        batch = None
    target = Target(model=batch.model if batch else None, metadata=batch.metadata if batch else {})
    fired = await gate(request, PROVIDER, op, error, target)
    if batch is None:
        raise Rejected(error(404, None, None, f"BatchPredictionJob {ident} not found."))
    return batch, fired


async def get_job(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _job(request, "batch.get")
    phase, raw = observe(state, batch, fired)
    return JSONResponse(job_json(state, batch, phase, raw))


async def cancel_job(request: Request) -> Response:
    if not request.path_params["id"].endswith(":cancel"):
        return error(404, None, None, "Method not emulated.")
    state = state_of(request)
    batch, fired = await _job(request, "batch.cancel")
    phase, _ = observe(state, batch, fired)
    if phase == "ended":
        return error(400, None, None, "The job has ended and cannot be cancelled.")
    batch.cancel(state.clock.now())
    return JSONResponse({})


async def list_jobs(request: Request) -> Response:
    _signed_in(request)
    state = state_of(request)
    await gate(request, PROVIDER, "batch.list", error)
    wanted = _display_filter(request.query_params.get("filter") or "")
    jobs = [
        b
        for b in state.batches.values()
        if b.provider == PROVIDER and (wanted is None or b.metadata.get("displayName") == wanted)
    ]
    jobs.sort(key=lambda b: b.created_at, reverse=True)
    size = int(request.query_params.get("pageSize") or 100)
    start = int(request.query_params.get("pageToken") or 0)
    page = jobs[start : start + size]
    out: dict[str, Any] = {
        "batchPredictionJobs": [job_json(state, b, state.phase(b), None) for b in page]
    }
    if start + size < len(jobs):
        out["nextPageToken"] = str(start + size)
    return JSONResponse(out)


def _display_filter(text: str) -> str | None:
    """The name of a ``display_name="…"`` filter (the one filter emulated)."""
    head = 'display_name="'
    if text.startswith(head) and text.endswith('"'):
        return text[len(head) : -1]
    return None


def status_name(batch: Batch, phase: str) -> str:
    if phase == "ended":
        if batch.final == "expired":
            answered = sum(1 for r in batch.results or () if r.kind != "unanswered")
            return "JOB_STATE_PARTIALLY_SUCCEEDED" if answered else "JOB_STATE_EXPIRED"
        return _FINAL.get(batch.final or "completed", "JOB_STATE_SUCCEEDED")
    if phase == "queued":
        return "JOB_STATE_PENDING"
    return "JOB_STATE_CANCELLING" if phase == "cancelling" else "JOB_STATE_RUNNING"


def job_json(state: EmulatorState, batch: Batch, phase: str, raw: str | None) -> dict[str, Any]:
    """The job as ``batchPredictionJobs.get`` returns it (``raw`` overrides its state)."""
    status = status_name(batch, phase)
    if phase == "queued" and batch.elapsed(state.clock.now()) < batch.duration / 12:
        status = "JOB_STATE_QUEUED"
    body = batch.info["body"]
    results = batch.results or []
    out: dict[str, Any] = {
        "name": batch.info["name"],
        "displayName": batch.metadata.get("displayName"),
        "model": body.get("model"),
        "inputConfig": body.get("inputConfig"),
        "outputConfig": body.get("outputConfig"),
        "state": raw or status,
        "createTime": _stamp(batch.created_at),
        "updateTime": _stamp(state.clock.now()),
    }
    if phase == "ended":
        ok = sum(r.kind == "answered" for r in results)
        bad = sum(r.kind == "errored" for r in results)
        out["completionStats"] = {
            "successfulCount": str(ok),
            "failedCount": str(bad),
            "incompleteCount": str(len(batch.items) - ok - bad),
        }
        out["endTime"] = _stamp(batch.ended_at or state.clock.now())
        if batch.final in ("completed", "expired") and (ok or bad):
            out["outputInfo"] = {"gcsOutputDirectory": _write_output(state, batch)}
        if batch.final == "failed":
            out["error"] = {"code": 13, "message": "The job failed (injected by the emulator)."}
    return out


def _write_output(state: EmulatorState, batch: Batch) -> str:
    """The job's output folder, its ``predictions.jsonl`` written the first time."""
    folder = batch.info.get("output_dir")
    if folder is not None:
        return str(folder)
    prefix = str(batch.info["body"]["outputConfig"]["gcsDestination"]["outputUriPrefix"])
    stamp = datetime.fromtimestamp(batch.ended_at or state.clock.now(), UTC)
    folder = f"{prefix.rstrip('/')}/prediction-model-{stamp:%Y-%m-%dT%H:%M:%S.%fZ}"
    ran = [r for r in batch.results or () if r.kind != "unanswered"]
    random.Random(batch.id).shuffle(ran)  # the output keeps no order
    data = b"".join(json.dumps(_output_line(r, stamp)).encode() + b"\n" for r in ran)
    parts = urlsplit(folder)
    write_object(state, parts.netloc, parts.path.lstrip("/") + "/predictions.jsonl", data)
    batch.info["output_dir"] = folder
    return folder


def _output_line(result: ItemResult, when: datetime) -> dict[str, Any]:
    item = result.item
    if item.extra.get("claude"):
        return vertex_claude.claude_output_line(result, when)
    line: dict[str, Any] = {
        "status": "",
        "processed_time": when.isoformat().replace("+00:00", "Z"),
        "request": item.extra["request"],
    }
    if result.answer is not None:
        line["response"] = gemini.response(item.model, result.answer)
        return line
    e = result.error
    status = e.status if e is not None else 500
    rpc = {
        "error": {
            "code": status,
            "message": e.message if e is not None else "the request failed",
            "status": gemini.STATUS_NAMES.get(status, "UNKNOWN"),
        }
    }
    line["status"] = f"Bad Request: {json.dumps(rpc)}"
    return line


def _stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat().replace("+00:00", "Z")


def routes() -> list[Route]:
    return [
        Route("/vertex/token", token, methods=["POST"]),
        Route(f"{_ROOT}/publishers/{{publisher}}/models/{{target}}", models_post, methods=["POST"]),
        Route(f"{_ROOT}/batchPredictionJobs", create_job, methods=["POST"]),
        Route(f"{_ROOT}/batchPredictionJobs", list_jobs, methods=["GET"]),
        Route(f"{_ROOT}/batchPredictionJobs/{{id}}", get_job, methods=["GET"]),
        Route(f"{_ROOT}/batchPredictionJobs/{{id}}", cancel_job, methods=["POST"]),
    ]
