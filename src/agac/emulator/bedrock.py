"""Amazon Bedrock's wire protocol: the runtime's Converse under ``/bedrock-runtime`` (point
``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` there) and the control plane's model invocation jobs
under ``/bedrock`` (``AWS_ENDPOINT_URL_BEDROCK``), as boto3 calls them (rest-json).

- ``POST /bedrock-runtime/model/{modelId}/converse`` answers a Converse body with
  ``{"output": {"message"}, "stopReason", "usage", "metrics"}``; a schema sent as the
  forced ``answer`` tool comes back as that tool's ``toolUse`` (``stopReason: tool_use``);
  tools the request offers may be called (the answers module's scripted calls). A
  ``reply`` fault bends it: ``stop`` (any stopReason), ``content``, ``usage``
  (``cache_read_tokens``, ``cache_write_tokens``) or ``body``.
- ``POST /bedrock/model-invocation-job`` creates a job over the JSONL objects under its
  input ``s3Uri``, read from S3 through boto3 as the emulator's environment points it
  (``AWS_ENDPOINT_URL_S3``: moto's server in the tests): the service role's reads. The
  same ``clientRequestToken`` is the same job (the create is idempotent); a job holding
  fewer than :data:`MIN_RECORDS` or more than :data:`MAX_RECORDS` records fails its
  validation. A ``batch.create`` ``http`` fault with ``code: ServiceQuotaExceededException``
  is the quota of jobs in flight.
- A job goes ``Submitted → Validating → Scheduled → InProgress → Completed``; a
  ``batch_end`` fault ends it ``Failed``, ``Expired`` (``answered: 0``) or
  ``PartiallyCompleted`` (``expired`` with ``answered: n``: the first n records processed,
  the rest absent from the output); ``StopModelInvocationJob`` makes it ``Stopping`` then
  ``Stopped``; ``batch_drop_records`` leaves records out of the output.
- When a job has ended, its output is written once under ``<output s3Uri>/<job id>/``:
  ``records.jsonl.out`` (``{"recordId", "modelInput", "modelOutput" | "error"}``, in no
  order) and ``manifest.json.out`` (record and token counts).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .answers import Answer, answer
from .faults import Target
from .handling import Rejected, created, gate, live_latency, new_batch, observe, read_json, state_of
from .state import Batch, BatchItem, EmulatorState, ItemResult

__all__ = ["MAX_RECORDS", "MIN_RECORDS", "PROVIDER", "routes", "status_name"]

PROVIDER = "bedrock"
MIN_RECORDS = 100
MAX_RECORDS = 50_000
_ACCOUNT = "123456789012"
_ERROR_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    409: "ConflictException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_FINAL = {"completed": "Completed", "failed": "Failed", "cancelled": "Stopped"}


def error(
    status: int, code: str | None, retry_after: float | None, message: str | None
) -> Response:
    """A rest-json error: the type in ``x-amzn-ErrorType`` and the body's ``message``."""
    kind = code or _ERROR_TYPES.get(status, "InternalServerException")
    headers = {"x-amzn-ErrorType": kind, "x-amzn-RequestId": str(uuid.uuid4())}
    if retry_after is not None:
        headers["retry-after"] = str(int(retry_after))
    text = message or f"Emulated error {status} ({kind})"
    return JSONResponse({"message": text}, status_code=status, headers=headers)


# -- Converse ------------------------------------------------------------------------


def _decode(body: dict[str, Any]) -> tuple[Any, Any, dict[str, Any] | None, frozenset[str]]:
    """(canonical request, prompt, schema, offered tool names) of a Converse body. Cache
    points change no answer: the canonical request is the body without them."""
    canonical = _unmarked({k: v for k, v in body.items() if k != "modelId"})
    tools = (body.get("toolConfig") or {}).get("tools") or []
    specs = [t.get("toolSpec") or {} for t in tools if isinstance(t, dict)]
    forced = ((body.get("toolConfig") or {}).get("toolChoice") or {}).get("tool") or {}
    schema = None
    for spec in specs:
        if spec.get("name") == "answer" and forced.get("name") == "answer":
            schema = (spec.get("inputSchema") or {}).get("json")
    offered = frozenset(str(s.get("name")) for s in specs if s.get("name") != "answer")
    prompt = [body.get("system") or [], body.get("messages") or []]
    return canonical, prompt, schema, offered


def _unmarked(value: Any) -> Any:
    if isinstance(value, list):
        return [_unmarked(v) for v in value if not (isinstance(v, dict) and "cachePoint" in v)]
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items()}
    return value


def _tool_turns(body: dict[str, Any]) -> tuple[tuple[str, ...], int]:
    """The tool results the body sends back, in order, and its assistant turns that
    called tools."""
    results: list[str] = []
    turns = 0
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        blocks = [b for b in content or [] if isinstance(b, dict)]
        if any("toolUse" in b for b in blocks):
            turns += 1
        for b in blocks:
            for part in (b.get("toolResult") or {}).get("content") or []:
                if isinstance(part, dict) and "text" in part:
                    results.append(str(part["text"]))
    return tuple(results), turns


def _answer(state: EmulatorState, model: str, body: dict[str, Any], fired: Any) -> Answer:
    canonical, prompt, schema, offered = _decode(body)
    results, turns = _tool_turns(body)
    limit = (body.get("inferenceConfig") or {}).get("maxTokens")
    return answer(
        provider=PROVIDER,
        model=model,
        body=canonical,
        prompt=prompt,
        schema=schema,
        max_tokens=int(limit) if isinstance(limit, int) else None,
        seed=state.config.seed,
        fault=fired.answer if fired is not None else None,
        reply=fired.reply if fired is not None else None,
        tools=offered,
        results=results,
        turns=turns,
    )


def converse_output(ans: Answer, schema: bool) -> dict[str, Any]:
    """A Converse answer for ``ans`` (``schema``: it answers the forced ``answer`` tool)."""
    reply = ans.reply or {}
    if "body" in reply:
        return dict(reply["body"])
    content: list[dict[str, Any]] = []
    stop = {"stop": "end_turn", "length": "max_tokens", "refusal": "content_filtered"}.get(
        ans.finish, "tool_use"
    )
    text = reply.get("content", ans.text if ans.finish != "refusal" else ans.refusal)
    if ans.tool_calls:
        for name, args in ans.tool_calls:
            use = {"toolUseId": "tooluse_" + uuid.uuid4().hex[:20], "name": name}
            content.append({"toolUse": {**use, "input": json.loads(args or "{}")}})
    elif schema and ans.finish == "stop" and text is not None:
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        use = {"toolUseId": "tooluse_" + uuid.uuid4().hex[:20], "name": "answer"}
        content.append({"toolUse": {**use, "input": value}})
        stop = "tool_use"
    elif text is not None:
        content.append({"text": text})
    extra = reply.get("usage") or {}
    reads = int(extra.get("cache_read_tokens", ans.cached_tokens))
    writes = int(extra.get("cache_write_tokens", ans.cache_write_5m + ans.cache_write_1h))
    fresh = max(0, ans.input_tokens - reads - writes)
    usage = {
        "inputTokens": fresh,
        "outputTokens": ans.output_tokens,
        "totalTokens": fresh + ans.output_tokens + reads + writes,
        "cacheReadInputTokens": reads,
        "cacheWriteInputTokens": writes,
    }
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": reply.get("stop") or stop,
        "usage": usage,
        "metrics": {"latencyMs": 1},
    }


async def converse(request: Request) -> Response:
    state = state_of(request)
    model = request.path_params["model"]
    body = await read_json(request, error)
    fired = await gate(request, PROVIDER, "chat", error, Target(model=model))
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return error(400, None, None, "messages: at least one message is required")
    await live_latency(request)
    ans = _answer(state, model, body, fired)
    canonical, _, schema, _ = _decode(body)
    state.stats.bill(PROVIDER, model, canonical)
    return JSONResponse(
        converse_output(ans, schema is not None),
        headers={"x-amzn-RequestId": str(uuid.uuid4())},
    )


# -- model invocation jobs -----------------------------------------------------------


def _s3() -> Any:
    """An S3 client as the emulator's environment points boto3 (the service role's)."""
    import boto3

    return boto3.client("s3")


def _split(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


def _read_input(uri: str) -> list[dict[str, Any]]:
    """Every line of every ``.jsonl`` object under ``uri``."""
    bucket, prefix = _split(uri)
    s3 = _s3()
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    lines: list[dict[str, Any]] = []
    for obj in sorted(listed.get("Contents") or (), key=lambda o: str(o["Key"])):
        if not str(obj["Key"]).endswith(".jsonl"):
            continue
        data = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        lines += [json.loads(line) for line in data.splitlines() if line.strip()]
    return lines


def _items(model: str, lines: list[dict[str, Any]]) -> list[BatchItem]:
    items = []
    for line in lines:
        body = line.get("modelInput") or {}
        canonical, prompt, schema, _ = _decode(body)
        limit = (body.get("inferenceConfig") or {}).get("maxTokens")
        items.append(
            BatchItem(
                custom_id=str(line.get("recordId") or ""),
                model=model,
                canonical=canonical,
                prompt=prompt,
                schema=schema,
                max_tokens=int(limit) if isinstance(limit, int) else None,
                extra={"line": line},
            )
        )
    return items


async def create_job(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, error)
    fired = await gate(request, PROVIDER, "batch.create", error)
    token = str(body.get("clientRequestToken") or "")
    for batch in state.batches.values():
        if batch.provider == PROVIDER and token and batch.info.get("token") == token:
            return created(fired, JSONResponse({"jobArn": batch.id}))
    name = str(body.get("jobName") or "")
    if any(b.provider == PROVIDER and b.info.get("name") == name for b in state.batches.values()):
        return error(400, None, None, f"A job named {name} already exists.")
    model = str(body.get("modelId") or "")
    source = ((body.get("inputDataConfig") or {}).get("s3InputDataConfig") or {}).get("s3Uri")
    target = ((body.get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}).get("s3Uri")
    if not source or not target or not body.get("roleArn") or not model:
        return error(400, None, None, "jobName, roleArn, modelId and both S3 URIs are required.")
    lines = await asyncio.to_thread(_read_input, str(source))
    job_id = uuid.uuid4().hex[:12]
    arn = f"arn:aws:bedrock:us-east-1:{_ACCOUNT}:model-invocation-job/{job_id}"
    info = {"token": token, "name": name, "body": body, "job_id": job_id, "output": str(target)}
    batch = new_batch(
        state,
        fired,
        batch_id=arn,
        provider=PROVIDER,
        model=model,
        items=_items(model, lines),
        info=info,
    )
    if not MIN_RECORDS <= len(lines) <= MAX_RECORDS:
        batch.invalid = [
            {
                "message": f"The job holds {len(lines)} records; a job takes "
                f"{MIN_RECORDS} to {MAX_RECORDS}."
            }
        ]
    return created(fired, JSONResponse({"jobArn": arn}))


async def _job(request: Request, op: str) -> tuple[Batch, Any]:
    state = state_of(request)
    ident = request.path_params["job"]
    batch = state.batches.get(ident) or next(
        (b for b in state.batches.values() if b.info.get("job_id") == ident), None
    )
    target = Target(model=batch.model if batch else None, metadata={})
    fired = await gate(request, PROVIDER, op, error, target)
    if batch is None or batch.provider != PROVIDER:
        raise Rejected(error(404, None, None, f"Job {ident} not found."))
    return batch, fired


async def get_job(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _job(request, "batch.get")
    phase, raw = observe(state, batch, fired)
    return JSONResponse(await job_json(state, batch, phase, raw))


async def stop_job(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _job(request, "batch.cancel")
    phase, _ = observe(state, batch, fired)
    if phase == "ended":
        return error(400, None, None, "The job has ended and cannot be stopped.")
    batch.cancel(state.clock.now())
    return JSONResponse({})


async def list_jobs(request: Request) -> Response:
    state = state_of(request)
    await gate(request, PROVIDER, "batch.list", error)
    name = request.query_params.get("nameContains") or ""
    jobs = [
        b
        for b in state.batches.values()
        if b.provider == PROVIDER and name in str(b.info.get("name"))
    ]
    summaries = [await job_json(state, b, state.phase(b), None) for b in jobs]
    return JSONResponse({"invocationJobSummaries": summaries})


def status_name(batch: Batch, phase: str) -> str:
    """The job's status word for ``phase``."""
    if phase == "ended":
        if batch.final == "expired":
            answered = sum(1 for r in batch.results or () if r.kind != "unanswered")
            return "PartiallyCompleted" if answered else "Expired"
        return _FINAL.get(batch.final or "completed", "Completed")
    if phase == "queued":
        return "Scheduled"
    return "Stopping" if phase == "cancelling" else "InProgress"


async def job_json(
    state: EmulatorState, batch: Batch, phase: str, raw: str | None
) -> dict[str, Any]:
    """The job as ``GetModelInvocationJob`` returns it (``raw`` overrides the status)."""
    if phase == "queued":
        part = batch.elapsed(state.clock.now()) / max(batch.duration, 1e-9)
        status = "Submitted" if part < 1 / 12 else "Validating" if part < 1 / 6 else "Scheduled"
    else:
        status = status_name(batch, phase)
    if phase == "ended" and batch.final in ("completed", "expired"):
        await asyncio.to_thread(_write_output, batch)
    body = batch.info["body"]
    results = batch.results or []
    out = {
        "jobArn": batch.id,
        "jobName": batch.info["name"],
        "modelId": batch.model,
        "clientRequestToken": batch.info["token"] or None,
        "roleArn": body.get("roleArn"),
        "status": raw or status,
        "submitTime": _iso(batch.created_at),
        "lastModifiedTime": _iso(state.clock.now()),
        "inputDataConfig": body.get("inputDataConfig"),
        "outputDataConfig": body.get("outputDataConfig"),
        "timeoutDurationInHours": body.get("timeoutDurationInHours") or 24,
        "modelInvocationType": body.get("modelInvocationType") or "InvokeModel",
        "totalRecordCount": len(batch.items),
        "processedRecordCount": sum(1 for r in results if r.kind != "unanswered"),
        "successRecordCount": sum(1 for r in results if r.kind == "answered"),
        "errorRecordCount": sum(1 for r in results if r.kind == "errored"),
    }
    if batch.ended_at is not None:
        out["endTime"] = _iso(batch.ended_at)
    if batch.invalid and batch.final == "failed":
        out["message"] = "; ".join(str(e.get("message")) for e in batch.invalid)
    return {k: v for k, v in out.items() if v is not None}


def _write_output(batch: Batch) -> None:
    """The job's output objects, written once when it has ended with answers to give."""
    if batch.info.get("written"):
        return
    batch.info["written"] = True
    bucket, prefix = _split(batch.info["output"])
    folder = (
        f"{prefix.rstrip('/')}/{batch.info['job_id']}/" if prefix else f"{batch.info['job_id']}/"
    )
    lines = [_output_line(r) for r in batch.results or () if r.kind != "unanswered"]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    answered = [r.answer for r in batch.results or () if r.answer is not None]
    manifest = {
        "totalRecordCount": len(batch.items),
        "processedRecordCount": len(lines),
        "successRecordCount": len(answered),
        "errorRecordCount": len(lines) - len(answered),
        "inputTokenCount": sum(a.input_tokens for a in answered),
        "outputTokenCount": sum(a.output_tokens for a in answered),
    }
    s3 = _s3()
    s3.put_object(Bucket=bucket, Key=folder + "records.jsonl.out", Body=data)
    s3.put_object(Bucket=bucket, Key=folder + "manifest.json.out", Body=json.dumps(manifest))


def _output_line(result: ItemResult) -> dict[str, Any]:
    item = result.item
    line = {"recordId": item.custom_id, "modelInput": item.extra["line"].get("modelInput")}
    if result.answer is not None:
        line["modelOutput"] = converse_output(result.answer, item.schema is not None)
    else:
        e = result.error
        line["error"] = {
            "errorCode": e.status if e is not None else 500,
            "errorMessage": e.message if e is not None else "the record failed",
        }
    return line


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat().replace("+00:00", "Z")


def routes() -> list[Route]:
    """Bedrock's runtime and invocation-job routes."""
    return [
        Route("/bedrock-runtime/model/{model:path}/converse", converse, methods=["POST"]),
        Route("/bedrock/model-invocation-job", create_job, methods=["POST"]),
        Route("/bedrock/model-invocation-jobs", list_jobs, methods=["GET"]),
        Route("/bedrock/model-invocation-job/{job:path}/stop", stop_job, methods=["POST"]),
        Route("/bedrock/model-invocation-job/{job:path}", get_job, methods=["GET"]),
    ]
