"""Mistral (``pip install -e '.[mistral]'``): model ``mistral/<model>``.

Live calls go to Mistral's Chat Completions (``<base>/v1/chat/completions``, the key as a
bearer token) on agac's lean transport or, with ``transport: sdk``, the official
``mistralai`` SDK; batches always take the SDK. The key is ``MISTRAL_API_KEY`` (as the SDK
reads it), the base URL ``MISTRAL_BASE_URL`` or ``base_url:`` (default
``https://api.mistral.ai``; the SDK has no variable of its own for it).

What differs from OpenAI's protocol, handled here:

- the seed goes as ``random_seed`` and the limit as ``max_tokens``;
- attachments go as Mistral's chunks: ``image_url`` with the data URL as a string and
  ``document_url`` for a PDF (:func:`~agac.providers._attachments.mistral_parts`), on its
  vision models only (``MISTRAL_LIMITS``: a text-only model is refused before sending);
- a reasoning model (Magistral) sends its content as chunks: ``thinking`` chunks are
  reasoning, kept out of the answer (:func:`~agac.providers._openai_compat.chat_response`);
- finish reasons add ``model_length`` (the model's context is full: truncated) and
  ``error`` (the answer broke off: never an answer), :mod:`agac.providers.stops`;
- a batch line is ``{custom_id, body}`` (no method or url: the endpoint is the job's),
  uploaded with purpose ``batch`` and run as a batch *job* (``/v1/batch/jobs``) tagged with
  ``metadata.agac_key``; the job names its model. A batch of at most
  :data:`INLINE_MAX_BYTES` goes inline instead (the job's ``requests``, no file); its
  results are asked for inline (``outputs``) when the job has no result files. Its statuses: ``QUEUED``, ``RUNNING``,
  ``SUCCESS`` (results readable), ``FAILED``, ``TIMEOUT_EXCEEDED`` (the job ran past its
  ``timeout_hours``: expired, nothing read), ``CANCELLATION_REQUESTED`` (still cancelling:
  not ended) and ``CANCELLED``; any other is taken as running.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from agac.errors import ProviderError
from agac.providers._attachments import MISTRAL_LIMITS, Data, live_base64, mistral_parts
from agac.providers._common import as_int, ended_or_raise, pick
from agac.providers._errors import connection_error
from agac.providers._openai_compat import COMPAT_OPTIONS, OpenAICompatProvider
from agac.providers.base import (
    TRANSPORTS,
    BatchHandle,
    BatchState,
    BatchStatus,
    BilledWork,
    Message,
    Request,
    Result,
)
from agac.providers.options import Option
from agac.providers.spec import BatchSpec, ProviderSpec

__all__ = ["MISTRAL_BASE_URL", "MISTRAL_STATES", "MistralProvider", "mistral_status"]

MISTRAL_BASE_URL = "https://api.mistral.ai"
"""The SDK's default server."""

#: Mistral's batch job statuses (upper case).
MISTRAL_STATES: dict[str, BatchState] = {
    "QUEUED": "running",
    "RUNNING": "running",
    "SUCCESS": "ended",
    "FAILED": "failed",
    # The job ran past its timeout_hours: what was not answered never will be (B7).
    "TIMEOUT_EXCEEDED": "expired",
    "CANCELLATION_REQUESTED": "cancelling",
    "CANCELLED": "cancelled",
}

#: Hours a batch job may run before Mistral ends it ``TIMEOUT_EXCEEDED`` (its default).
TIMEOUT_HOURS = 24

#: The largest batch sent inline in the job's create call instead of an uploaded file
#: (agac's choice: a body of a few MB, held in memory once).
INLINE_MAX_BYTES = 4 * 1024 * 1024

BATCH_INPUT = Option(
    "batch_input",
    "choice",
    "how a batch's requests travel: `inline` in the job's create call, a `file` upload, "
    "or `auto` (inline up to 4 MB)",
    default="auto",
    choices=("auto", "inline", "file"),
)


def mistral_status(job: Any) -> BatchStatus:
    """Normalize a Mistral batch job; an unknown status is running (B9)."""
    raw = str(pick(job, "status") or "")
    state = MISTRAL_STATES.get(raw)
    return BatchStatus(
        state=state or "running",
        raw_status=raw,
        request_count=as_int(pick(job, "total_requests")),
        completed=as_int(pick(job, "succeeded_requests")),
        failed=as_int(pick(job, "failed_requests")),
        known=state is not None,
    )


class MistralProvider(OpenAICompatProvider):
    """Mistral Chat Completions and batch jobs; see the module docstring."""

    #: Images and PDFs on its vision models; Mistral caches prompt prefixes by itself.
    spec = ProviderSpec(
        name="mistral",
        extra="mistral",
        sdk_module="mistralai.client",
        credential_env=("MISTRAL_API_KEY",),
        transports=TRANSPORTS,
        # Up to a million requests per job; a file of at most 512 MB.
        batch=BatchSpec(input="file", max_requests=1_000_000, max_bytes=512 * 1024 * 1024),
        cache_kinds=("implicit",),
        attachments=MISTRAL_LIMITS,
        vision=True,
        options=(*COMPAT_OPTIONS, BATCH_INPUT),
    )
    base_url_env = "MISTRAL_BASE_URL"
    default_base_url = MISTRAL_BASE_URL
    chat_path = "/v1/chat/completions"
    max_tokens_param = "max_tokens"
    line_routing = False

    def _make_client(self) -> Any:
        # retry_config unset: the SDK does not retry by default; the engine owns retries.
        return self._sdk.Mistral(
            api_key=self._api_key,
            server_url=self._base_url or MISTRAL_BASE_URL,
            timeout_ms=int(self._timeout * 1000),
        )

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        errors = self._sdk.errors
        return (errors.MistralError, errors.ResponseValidationError)

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        errors = self._sdk.errors
        if isinstance(exc, errors.MistralError):
            return self._status_error(exc.status_code, exc.headers, _json(exc.body), exc.body)
        if isinstance(exc, errors.NoResponseError):
            return connection_error(self.name, exc)
        return None

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._sdk_client is not None:
            # The SDK closes its HTTP clients as a context manager does (it has no close).
            await self._sdk_client.__aexit__(None, None, None)
            self._sdk_client.__exit__(None, None, None)

    # -- live ----------------------------------------------------------------

    def _chat_params(
        self, request: Request, *, native: bool, data: Data = live_base64
    ) -> dict[str, Any]:
        params = super()._chat_params(request, native=native, data=data)
        if "seed" in params:
            params["random_seed"] = params.pop("seed")
        return params

    def _content_parts(self, m: Message, data: Data) -> list[dict[str, Any]]:
        return mistral_parts(m.content, m.attachments, m.position, data)

    async def _sdk_chat(
        self, params: dict[str, Any], timeout: float | None
    ) -> tuple[Any, Mapping[str, str] | None]:
        ms = int(timeout * 1000) if timeout is not None else None
        completion = await self._client.chat.complete_async(**params, timeout_ms=ms)
        # The SDK's model as the wire dict (its unset fields left out).
        return completion.model_dump(mode="json", by_alias=True), None

    # -- batch ---------------------------------------------------------------

    async def _upload(self, path: Path, key: str) -> str:
        """Upload the batch file; a small batch is not uploaded (``""``): its requests go
        inline in the job (:meth:`_create_batch`)."""
        chosen = self.settings.options.get("batch_input", "auto")
        if chosen == "inline" or (chosen == "auto" and _inline(path)):
            return ""
        with path.open("rb") as fh:
            uploaded = await self._client.files.upload_async(
                file={"file_name": path.name, "content": fh, "content_type": "application/jsonl"},
                purpose="batch",
            )
        return str(uploaded.id)

    async def _create_batch(self, file_id: str, key: str, path: Path, endpoint: str) -> Any:
        """A batch job over the file; the job names the model of the file's lines (one
        action, one model)."""
        source: dict[str, Any] = (
            {"input_files": [file_id]} if file_id else {"requests": _requests(path)}
        )
        return await self._client.batch.jobs.create_async(
            **source,
            endpoint=endpoint,
            model=_first_model(path),
            metadata={"agac_key": key},
            timeout_hours=TIMEOUT_HOURS,
        )

    async def _retrieve(self, batch_id: str) -> Any:
        return await self._client.batch.jobs.get_async(job_id=batch_id)

    def _batch_status(self, batch: Any) -> BatchStatus:
        return mistral_status(batch)

    def _result_files(self, batch: Any) -> tuple[Any, ...]:
        return (pick(batch, "output_file"), pick(batch, "error_file"))

    def _batch_count(self, batch: Any) -> int:
        return as_int(pick(batch, "total_requests"))

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """The job's result files, as any batch's; a job whose requests went inline has
        none: its results are asked for inline (``outputs``). Nothing unless ``SUCCESS``
        (B7)."""
        with self._translate_errors():
            job = await self._retrieve(handle.id)
        ended_or_raise(handle, mistral_status(job))
        if any(self._result_files(job)):
            async for result in super().batch_results(handle):
                yield result
            return
        with self._translate_errors():
            inline = await self._client.batch.jobs.get_async(job_id=handle.id, inline=True)
        created, ended = as_int(pick(inline, "created_at")), as_int(pick(inline, "completed_at"))
        latency = max(0.0, (ended - created) * 1000.0) if created and ended else 0.0
        for line in pick(inline, "outputs") or ():
            yield self._result(dict(line), latency)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The job's succeeded requests; Mistral reports no batch usage (agac estimates)."""
        with self._translate_errors():
            job = await self._retrieve(handle.id)
        status = mistral_status(job)
        return BilledWork(status, status.completed)

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._client.batch.jobs.cancel_async(job_id=handle.id)

    async def _list_batches(self) -> AsyncIterator[Any]:
        page = 0
        while True:
            listed = await self._client.batch.jobs.list_async(
                page=page, page_size=100, order_by="-created"
            )
            jobs = list(listed.data or [])
            for job in jobs:
                yield job
            if len(jobs) < 100:
                return
            page += 1

    async def _file_lines(self, file_id: str) -> AsyncIterator[list[bytes]]:
        """The file's non-blank lines, a downloaded chunk's worth at a time."""
        with self._translate_errors():
            response = await self._client.files.download_async(file_id=file_id)
            try:
                rest = b""
                async for chunk in response.aiter_bytes():
                    lines = (rest + chunk).split(b"\n")
                    rest = lines.pop()
                    yield [line for line in lines if line.strip()]
                if rest.strip():
                    yield [rest]
            finally:
                await response.aclose()


def _inline(path: Path) -> bool:
    """Whether a batch file is small enough to send inline (:data:`INLINE_MAX_BYTES`)."""
    return path.stat().st_size <= INLINE_MAX_BYTES


def _requests(path: Path) -> list[dict[str, Any]]:
    """A batch file's ``{custom_id, body}`` lines, as the job's inline requests."""
    with path.open("rb") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _first_model(path: Path) -> str | None:
    """The ``body.model`` of a batch file's first line."""
    with path.open("rb") as fh:
        first = fh.readline()
    model = (json.loads(first).get("body") or {}).get("model") if first.strip() else None
    return str(model) if model else None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
