"""Fireworks AI (``pip install -e '.[openai]'``): model ``fireworks/<model>``, the model as
Fireworks names it (e.g. ``fireworks/accounts/fireworks/models/llama-v3p1-8b-instruct``).

Fireworks serves OpenAI's Chat Completions at ``https://api.fireworks.ai/inference/v1``
and documents the ``openai`` SDK pointed there: ``transport: sdk`` drives that SDK, the
lean transport posts to ``<base>/chat/completions``. The key is ``FIREWORKS_API_KEY``, the
base URL ``FIREWORKS_BASE_URL`` or ``base_url:``; batches also need the account they run
under, ``FIREWORKS_ACCOUNT_ID`` or ``account_id:``. Batch calls go to the control plane
beside the inference API (``<root>/v1/accounts/<account>/…``, the root being the base URL
without its ``/inference/v1``), through the ``openai`` client's documented ``post`` and
``get``. Fireworks' own SDK is not needed for that.

What differs from OpenAI, handled here:

- the limit goes as ``max_tokens``; finish reasons are OpenAI's;
- a batch's input is a *dataset*: agac creates one (``POST …/datasets``), uploads the
  ``{custom_id, body}`` lines to it (``…/datasets/<id>:upload``), then creates a batch
  inference job over it (``POST …/batchInferenceJobs?batchInferenceJobId=<id>``) naming
  the model and an output dataset. The job's id is made from agac's batch key, so a
  submission whose answer was lost is found again by asking for that job;
- job states are ``JOB_STATE_*``: ``COMPLETED`` ends the job; ``EXPIRED`` (its 24 hours
  were up) and ``EARLY_STOPPED`` (its 8 GB output was full) end it too, keeping the rows
  it finished: agac reads them, and the requests missing from them are not returned
  (retried, B6). ``FAILED`` fails it, ``CANCELLING``/``CANCELLED`` are a cancel; any other
  state is running (B9);
- results are the output dataset's files (``…/datasets/<id>:getDownloadEndpoint`` names
  a signed URL per file, read without the API key), each line ``{custom_id, response}``
  with the chat completion, or ``{custom_id, error}``;
- per job an input dataset of at most 500 MB (agac splits above).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from agac.errors import ProviderError, UnsupportedError
from agac.providers._common import as_int, ended_or_raise, pick, spool_jsonl
from agac.providers._errors import classify, connection_error, error_fields
from agac.providers._http import import_aiohttp
from agac.providers._openai_compat import COMPAT_OPTIONS, OpenAISdkProvider, chat_response
from agac.providers.base import (
    TRANSPORTS,
    BatchHandle,
    BatchState,
    BatchStatus,
    BilledWork,
    Request,
    Result,
    StoredRequests,
    Usage,
)
from agac.providers.options import Option
from agac.providers.spec import BatchSpec, ProviderSpec

__all__ = ["FIREWORKS_BASE_URL", "FIREWORKS_STATES", "FireworksProvider", "fireworks_status"]

FIREWORKS_BASE_URL = "https://api.fireworks.ai/inference/v1"
"""Fireworks' OpenAI-compatible endpoint."""
_INFERENCE = "/inference/v1"

FIREWORKS_STATES: dict[str, BatchState] = {
    "JOB_STATE_UNSPECIFIED": "running",
    "JOB_STATE_CREATING": "running",
    "JOB_STATE_VALIDATING": "running",
    "JOB_STATE_PENDING": "running",
    "JOB_STATE_RUNNING": "running",
    "JOB_STATE_WRITING_RESULTS": "running",
    "JOB_STATE_PAUSED": "running",
    "JOB_STATE_COMPLETED": "ended",
    # Past its 24 h window, or its output full: the rows it finished are kept (read them).
    "JOB_STATE_EXPIRED": "ended",
    "JOB_STATE_EARLY_STOPPED": "ended",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLING": "cancelling",
    "JOB_STATE_CANCELLED": "cancelled",
}

ACCOUNT_ID = Option(
    "account_id",
    "text",
    "the Fireworks account batches run under (else FIREWORKS_ACCOUNT_ID)",
)


def fireworks_status(job: Any) -> BatchStatus:
    """Normalize a batch inference job; an unknown state is running (B9)."""
    raw = str(pick(job, "state") or "")
    state = FIREWORKS_STATES.get(raw)
    progress = pick(job, "jobProgress") or {}
    return BatchStatus(
        state=state or "running",
        raw_status=raw,
        request_count=as_int(pick(progress, "totalInputRequests")),
        completed=as_int(pick(progress, "successfullyProcessedRequests")),
        failed=as_int(pick(progress, "failedRequests")),
        known=state is not None,
    )


def job_id(key: str) -> str:
    """The job id of batch ``key`` (Fireworks ids: lower-case letters, digits, hyphens)."""
    return "agac-" + hashlib.sha256(key.encode()).hexdigest()[:32]


class FireworksProvider(OpenAISdkProvider):
    """Fireworks Chat Completions and batch inference jobs; see the module docstring."""

    #: Text only here; Fireworks caches prompt prefixes by itself. No request cap per job.
    spec = ProviderSpec(
        name="fireworks",
        extra="openai",
        sdk_module="openai",
        credential_env=("FIREWORKS_API_KEY",),
        transports=TRANSPORTS,
        batch=BatchSpec(input="file", max_requests=1_000_000, max_bytes=500 * 1024 * 1024),
        cache_kinds=("implicit",),
        options=(*COMPAT_OPTIONS, ACCOUNT_ID),
    )
    base_url_env = "FIREWORKS_BASE_URL"
    default_base_url = FIREWORKS_BASE_URL
    chat_path = "/chat/completions"
    max_tokens_param = "max_tokens"
    line_routing = False

    def _account_url(self, path: str) -> str:
        """``<root>/v1/accounts/<account><path>``: the control plane's address."""
        account = self.settings.options.get("account_id") or os.environ.get("FIREWORKS_ACCOUNT_ID")
        if not account:
            raise UnsupportedError(
                "fireworks batches run under an account: set FIREWORKS_ACCOUNT_ID or "
                "`providers: fireworks: account_id:` in agac.yml",
                code="missing_credentials",
            )
        base = (self._base_url or FIREWORKS_BASE_URL).rstrip("/")
        root = base.removesuffix(_INFERENCE)
        return f"{root}/v1/accounts/{account}{path}"

    def _account_path(self, path: str) -> str:
        """``accounts/<account><path>``: a resource's full name."""
        url = self._account_url(path)
        return url[url.index("/v1/accounts/") + 4 :]

    # -- batch ---------------------------------------------------------------

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Upload the lines as a new input dataset and create the job of ``key`` over it."""
        lines = (
            self._stored_lines(requests.pairs, requests.cache)
            if isinstance(requests, StoredRequests)
            else self._batch_lines(requests)
        )
        spooled = spool_jsonl(
            lines,
            max_count=self._batch_limits[0],
            max_bytes=self._batch_limits[1],
            provider=self.name,
        )
        job = job_id(key)
        dataset = f"{job}-{uuid.uuid4().hex[:8]}"
        try:
            with self._translate_errors():
                await self._create_dataset(dataset, spooled.count, spooled.path)
                await self._client.post(
                    self._account_url(f"/batchInferenceJobs?batchInferenceJobId={job}"),
                    body={
                        "displayName": key[:200],
                        "model": _first_model(spooled.path),
                        "inputDatasetId": self._account_path(f"/datasets/{dataset}"),
                        "outputDatasetId": self._account_path(f"/datasets/{dataset}-out"),
                    },
                    cast_to=object,
                )
        finally:
            spooled.discard()
        meta = {"input_dataset_id": dataset, "request_count": spooled.count}
        return BatchHandle(self.name, job, key, meta)

    async def _create_dataset(self, dataset: str, count: int, path: Path) -> None:
        await self._client.post(
            self._account_url("/datasets"),
            body={
                "datasetId": dataset,
                "dataset": {"userUploaded": {}, "exampleCount": str(count)},
            },
            cast_to=object,
        )
        with path.open("rb") as fh:
            await self._client.post(
                self._account_url(f"/datasets/{dataset}:upload"),
                body={},
                files={"file": (f"{dataset}.jsonl", fh, "application/jsonl")},
                options={"headers": {"Content-Type": "multipart/form-data"}},
                cast_to=object,
            )

    async def _retrieve(self, batch_id: str) -> Any:
        return await self._client.get(
            self._account_url(f"/batchInferenceJobs/{batch_id}"), cast_to=object
        )

    def _batch_status(self, batch: Any) -> BatchStatus:
        return fireworks_status(batch)

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Every row of the output dataset's files (an expired job's finished rows
        included); nothing from a job that has not ended (B7)."""
        with self._translate_errors():
            job = await self._retrieve(handle.id)
        ended_or_raise(handle, self._batch_status(job))
        latency = _latency(job)
        output = str(pick(job, "outputDatasetId") or "").rsplit("/", 1)[-1]
        with self._translate_errors():
            where = await self._client.get(
                self._account_url(f"/datasets/{output}:getDownloadEndpoint"), cast_to=object
            )
        urls = pick(where, "filenameToSignedUrls") or {}
        for name in sorted(urls):
            if not name.endswith(".jsonl"):
                continue
            async for lines in self._signed_lines(str(urls[name])):
                for line in lines:
                    yield self._row(json.loads(line), latency)

    async def _signed_lines(self, url: str) -> AsyncIterator[list[bytes]]:
        """A signed file's non-blank lines, a chunk's worth at a time; the URL carries
        its own authorization (the API key is not sent)."""
        aiohttp = import_aiohttp(self.name)
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout, trust_env=True) as session,
                session.get(url) as response,
            ):
                if response.status != 200:
                    text = await response.text()
                    raise self._status_error(response.status, response.headers, None, text)
                rest = b""
                async for chunk in response.content.iter_chunked(1 << 20):
                    parts = (rest + chunk).split(b"\n")
                    rest = parts.pop()
                    yield [p for p in parts if p.strip()]
                if rest.strip():
                    yield [rest]
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._connection(exc) from exc

    def _connection(self, exc: BaseException) -> ProviderError:
        return connection_error(self.name, exc)

    def _row(self, row: dict[str, Any], latency_ms: float) -> Result:
        custom_id = str(row.get("custom_id"))
        response = row.get("response")
        if isinstance(response, dict) and not row.get("error"):
            body = response.get("body") if "choices" not in response else response
            answer = chat_response(
                body, provider=self.name, wire=True, latency_ms=latency_ms, service_tier="batch"
            )
            return Result(custom_id, "succeeded", response=answer)
        error = row.get("error")
        code, kind, message, param = error_fields(error if isinstance(error, dict) else None)
        status = as_int(pick(error, "status_code") if isinstance(error, dict) else None) or None
        err = classify(
            self.name,
            status,
            message=message or str(error or "the request failed"),
            code=code,
            kind=kind,
            param=param,
        )
        return Result(custom_id, "errored", error=err)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The job's successfully processed requests and the tokens it reports."""
        with self._translate_errors():
            job = await self._retrieve(handle.id)
        status = fireworks_status(job)
        progress = pick(job, "jobProgress") or {}
        cached = as_int(pick(progress, "cachedInputTokenCount"))
        usage = Usage(
            max(0, as_int(pick(progress, "inputTokens")) - cached),
            as_int(pick(progress, "outputTokens")),
            cached,
        )
        return BilledWork(status, status.completed, usage if usage.output_tokens else None)

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._client.post(
                self._account_url(f"/batchInferenceJobs/{handle.id}:cancel"),
                body={},
                cast_to=object,
            )

    async def find_batch(self, key: str) -> BatchHandle | None:
        """The job of ``key`` (its id is made from the key), or None when there is none."""
        job = job_id(key)
        try:
            with self._translate_errors():
                found = await self._retrieve(job)
        except ProviderError as err:
            if err.status == 404:
                return None
            raise
        count = as_int(pick(found, "jobProgress", "totalInputRequests"))
        return BatchHandle(self.name, job, key, {"request_count": count})


def _first_model(path: Path) -> str | None:
    """The ``body.model`` of a batch file's first line (a job runs one model)."""
    with path.open("rb") as fh:
        first = fh.readline()
    model = (json.loads(first).get("body") or {}).get("model") if first.strip() else None
    return str(model) if model else None


def _latency(job: Any) -> float:
    """Milliseconds from the job's creation to now."""
    stamp = pick(job, "createTime")
    if not stamp:
        return 0.0
    try:
        created = dt.datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return 0.0
    return max(0.0, (time.time() - created) * 1000.0)
