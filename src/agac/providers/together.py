"""Together AI (``pip install -e '.[together]'``): model ``together/<model>`` (e.g.
``together/meta-llama/Llama-3.3-70B-Instruct-Turbo``).

Live calls go to Together's Chat Completions (``<base>/v1/chat/completions``) on agac's lean
transport or, with ``transport: sdk``, the official ``together`` SDK; batches always take
the SDK. The key is ``TOGETHER_API_KEY`` and the base URL ``TOGETHER_BASE_URL`` (both as
the SDK reads them; default ``https://api.together.ai``).

What differs from OpenAI's protocol, handled here:

- attachments: images only, as OpenAI's ``image_url`` parts, on its vision models
  (``TOGETHER_LIMITS``); a PDF is refused before anything is sent;
- the limit goes as ``max_tokens``; ``eos`` is a finish reason of its own (the model ended
  its answer: an answer), :mod:`agac.providers.stops`;
- a batch line is ``{custom_id, body}``; the file is uploaded with purpose ``batch-api``
  (the SDK's upload: a presigned PUT, then Together processes the file), and the batch is
  created over it for ``/v1/chat/completions``;
- a batch carries no metadata, so the file is named after agac's batch key and its line
  count (``agac-<key>-<count>.jsonl``): a submission whose answer was lost is found again
  by the name of its input file;
- statuses are ``VALIDATING``, ``IN_PROGRESS``, ``COMPLETED`` (results readable),
  ``FAILED``, ``EXPIRED`` (its 24 hours are up: nothing read, B7) and ``CANCELLED``; any
  other is running (B9). A batch reports only a ``progress`` percentage, no counts: what
  a batch agac gives up billed is counted from its output file;
- per batch at most 50,000 requests and 100 MB (agac splits above either). Together also
  caps the tokens enqueued per model: a create refused for it is a wait (B2), never a
  failure of the file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from agac.errors import ProviderError, WaitError
from agac.providers._attachments import TOGETHER_LIMITS
from agac.providers._common import pick
from agac.providers._errors import error_fields
from agac.providers._openai_compat import COMPAT_OPTIONS, OpenAICompatProvider
from agac.providers.base import (
    TRANSPORTS,
    BatchHandle,
    BatchState,
    BatchStatus,
    BilledWork,
)
from agac.providers.spec import BatchSpec, ProviderSpec

__all__ = ["TOGETHER_BASE_URL", "TOGETHER_STATES", "TogetherProvider", "together_status"]

TOGETHER_BASE_URL = "https://api.together.ai"
"""The SDK's default server."""

TOGETHER_STATES: dict[str, BatchState] = {
    "VALIDATING": "running",
    "IN_PROGRESS": "running",
    "COMPLETED": "ended",
    "FAILED": "failed",
    # Past its 24 h window: unfinished requests are cancelled (B7: nothing read).
    "EXPIRED": "expired",
    "CANCELLED": "cancelled",
}

#: Seconds before a create refused for the per-model enqueued-token cap is tried again.
QUOTA_WAIT = 300.0
_ENQUEUED = re.compile(r"enqueued|token limit|too many tokens", re.IGNORECASE)
_NAME = re.compile(r"^agac-(?P<key>.+)-(?P<count>\d+)\.jsonl$")


def together_status(batch: Any) -> BatchStatus:
    """Normalize a Together batch; an unknown status is running (B9)."""
    raw = str(pick(batch, "status") or "")
    state = TOGETHER_STATES.get(raw)
    return BatchStatus(state=state or "running", raw_status=raw, known=state is not None)


def batch_file_name(key: str, count: int) -> str:
    """The name the input file of batch ``key`` is uploaded under (found again by it)."""
    return f"agac-{_safe(key)}-{count}.jsonl"


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


class TogetherProvider(OpenAICompatProvider):
    """Together Chat Completions and Batch API; see the module docstring."""

    #: Images on its vision models; no flex tier.
    spec = ProviderSpec(
        name="together",
        extra="together",
        sdk_module="together",
        credential_env=("TOGETHER_API_KEY",),
        transports=TRANSPORTS,
        batch=BatchSpec(input="file", max_requests=50_000, max_bytes=100 * 1024 * 1024),
        attachments=TOGETHER_LIMITS,
        vision=True,
        options=COMPAT_OPTIONS,
    )
    base_url_env = "TOGETHER_BASE_URL"
    default_base_url = TOGETHER_BASE_URL
    chat_path = "/v1/chat/completions"
    max_tokens_param = "max_tokens"
    line_routing = False

    def _make_client(self) -> Any:
        # max_retries=0: the engine owns retries (docs/providers.md).
        return self._sdk.AsyncTogether(
            api_key=self._api_key,
            base_url=self._base_url or TOGETHER_BASE_URL,
            timeout=self._timeout,
            max_retries=0,
        )

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.TogetherError,)

    def _status_error(
        self, status: int, headers: Mapping[str, str], body: Any, text: str
    ) -> ProviderError:
        """A create refused for the per-model enqueued-token cap is a wait (B2)."""
        found = super()._status_error(status, headers, body, text)
        message = error_fields(body)[2] or text
        if status in (400, 429) and _ENQUEUED.search(message or ""):
            return WaitError(
                f"{found} (the model's enqueued-token cap is full: agac creates the batch "
                "again when earlier batches have drained)",
                retry_after=found.retry_after or QUOTA_WAIT,
                status=status,
                code=found.code,
            )
        return found

    # -- batch ---------------------------------------------------------------

    async def _upload(self, path: Path, key: str) -> str:
        """Upload under the batch key's name (a second name of the spooled file)."""
        named = path.with_name(batch_file_name(key, _lines(path)))
        os.link(path, named)
        try:
            uploaded = await self._client.files.upload(file=named, purpose="batch-api", check=False)
        finally:
            named.unlink(missing_ok=True)
        return str(uploaded.id)

    async def _create_batch(self, file_id: str, key: str, path: Path, endpoint: str) -> Any:
        created = await self._client.batches.create(
            input_file_id=file_id,
            endpoint=endpoint,
            completion_window=self.completion_window,
        )
        return created.job

    async def _retrieve(self, batch_id: str) -> Any:
        return await self._client.batches.retrieve(batch_id)

    def _batch_status(self, batch: Any) -> BatchStatus:
        return together_status(batch)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The answers in the batch's output file (Together bills the requests an expired
        or cancelled batch finished); Together reports no usage (agac estimates it)."""
        with self._translate_errors():
            batch = await self._retrieve(handle.id)
        status = together_status(batch)
        output = pick(batch, "output_file_id")
        answered = 0
        if output:
            async for lines in self._file_lines(str(output)):
                answered += sum(_answered(json.loads(line)) for line in lines)
        return BilledWork(status, answered)

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._client.batches.cancel(handle.id)

    async def find_batch(self, key: str) -> BatchHandle | None:
        """The newest batch whose input file bears ``key``'s name, scanning at most
        ``find_batch_scan`` (default 2000) batches."""
        with self._translate_errors():
            batches = await self._client.batches.list()
            batches = sorted(batches, key=lambda b: str(pick(b, "created_at")), reverse=True)
            for batch in batches[: self._scan_limit]:
                file_id = pick(batch, "input_file_id")
                if not file_id:
                    continue
                stored = await self._client.files.retrieve(str(file_id))
                found = _NAME.match(str(pick(stored, "filename") or ""))
                if found and found["key"] == _safe(key):
                    meta = {"input_file_id": file_id, "request_count": int(found["count"])}
                    return BatchHandle(self.name, str(pick(batch, "id")), key, meta)
        return None

    async def _list_batches(self) -> AsyncIterator[Any]:
        for batch in await self._client.batches.list():
            yield batch


def _answered(line: Any) -> bool:
    """Whether a result line is an answer (status 200)."""
    return isinstance(line, dict) and pick(line, "response", "status_code") == 200


def _lines(path: Path) -> int:
    """The lines of a batch file (each ends with a newline)."""
    count = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            count += chunk.count(b"\n")
    return count
