"""vLLM and SGLang, local (``pip install -e '.[openai]'``): model ``vllm/<served model>``.

Both serve OpenAI's Chat Completions at ``<base>/chat/completions``; the base URL is
``VLLM_BASE_URL`` or ``base_url:`` (default ``http://localhost:8000/v1``, vLLM's; an SGLang
server is ``http://localhost:30000/v1``). ``transport: sdk`` drives the official ``openai``
SDK with that base URL. No key is needed; ``VLLM_API_KEY`` is sent as a bearer token when
set (a server started with ``--api-key``). Calls cost nothing in the ledger (local).

A batch action runs here as live calls under agac's own concurrency (no provider batch, no
pause), like any live action on this provider; its records are sent in prompt order, so
that requests sharing a prompt prefix reach the server together and hit its prefix cache
(:attr:`~agac.providers.spec.ProviderSpec.prefix_order`). With ``providers: {vllm: {batch:
run-batch}}`` a batch action instead runs offline through ``vllm run-batch``
(:mod:`agac.providers.runbatch`): agac writes the JSONL, runs the command, reads the output
back by ``custom_id``.

Finish reasons: OpenAI's ``stop``, ``length`` and ``tool_calls``; ``abort`` (the server
dropped the request) and ``error`` are never an answer (:mod:`agac.providers.stops`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from agac.errors import ConfigError, Problem
from agac.providers._common import ended_or_raise, pick, spool_jsonl
from agac.providers._openai_compat import REASONING_EFFORT, OpenAISdkProvider, chat_response
from agac.providers.base import (
    TRANSPORTS,
    BatchHandle,
    BatchStatus,
    BilledWork,
    ProviderSettings,
    Request,
    Result,
    StoredRequests,
)
from agac.providers.options import TIMEOUT, Option, structured_output
from agac.providers.runbatch import RunBatch
from agac.providers.spec import BatchSpec, ProviderSpec

__all__ = ["VLLM_BASE_URL", "VllmProvider"]

VLLM_BASE_URL = "http://localhost:8000/v1"
"""Where ``vllm serve`` listens by default."""

BATCH = Option(
    "batch",
    "choice",
    "how a `run_mode: batch` action runs: `live` (agac's own concurrent calls to the "
    "server) or `run-batch` (offline, one `vllm run-batch` command per batch)",
    default="live",
    choices=("live", "run-batch"),
)
RUN_BATCH_COMMAND = Option(
    "run_batch_command",
    "text",
    "the command that runs a batch offline; agac appends `-i INPUT -o OUTPUT --model MODEL`",
    default="vllm run-batch",
)
RUN_BATCH_DIR = Option(
    "run_batch_dir",
    "text",
    "where run-batch keeps each batch's input, output and log (relative to the "
    "directory agac runs in)",
    default=".agac/run-batch",
)


class VllmProvider(OpenAISdkProvider):
    """A vLLM or SGLang server (live), and ``vllm run-batch`` when chosen."""

    #: Local: free, no key. ``batch`` is the run-batch executor, used only when
    #: ``batch: run-batch`` chooses it (:attr:`batch_chosen`); otherwise a batch action
    #: runs as live calls (``local_batch``).
    spec = ProviderSpec(
        name="vllm",
        extra="openai",
        sdk_module="openai",
        transports=TRANSPORTS,
        batch=BatchSpec(input="file", max_requests=50_000, max_bytes=200 * 1024 * 1024),
        local_batch=True,
        cache_kinds=("implicit",),
        prefix_order=True,
        options=(
            TIMEOUT,
            structured_output("json_mode", "JSON mode with the schema in the prompt"),
            BATCH,
            RUN_BATCH_COMMAND,
            RUN_BATCH_DIR,
        ),
        request_options=(REASONING_EFFORT,),
        function_tools=True,
    )
    base_url_env = "VLLM_BASE_URL"
    default_base_url = VLLM_BASE_URL
    chat_path = "/chat/completions"
    max_tokens_param = "max_tokens"

    def __init__(self, settings: ProviderSettings) -> None:
        super().__init__(settings)
        options = settings.options
        command = tuple(shlex.split(str(options.get("run_batch_command") or "vllm run-batch")))
        if not command:
            raise ConfigError(
                problems=[
                    Problem(
                        "invalid_provider_option",
                        "providers.vllm.run_batch_command is empty",
                        "agac.yml",
                        hint="give the command, e.g. `vllm run-batch`",
                    )
                ]
            )
        root = Path(str(options.get("run_batch_dir") or ".agac/run-batch")).resolve()
        self._runner = RunBatch(root, command, self.name)

    @property
    def batch_chosen(self) -> bool:
        """Whether ``providers: {vllm: {batch: run-batch}}`` turned the executor on."""
        return self.settings.options.get("batch") == "run-batch"

    def _resolve_key(self, settings: ProviderSettings) -> str:
        # vLLM's server takes a key only when started with --api-key; the openai SDK
        # needs some value, as vLLM's own examples give it.
        return settings.api_key or os.environ.get("VLLM_API_KEY") or "EMPTY"

    # -- batch: vllm run-batch ---------------------------------------------------------

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Write the batch's lines and start ``vllm run-batch`` on them (once per key)."""
        found = self._runner.find(key)
        if found is not None:
            return found
        lines = (
            self._stored_lines(requests.pairs, requests.cache)
            if isinstance(requests, StoredRequests)
            else self._batch_lines(requests)
        )
        limits = self._batch_limits
        spooled = spool_jsonl(lines, max_count=limits[0], max_bytes=limits[1], provider=self.name)
        model = _first_model(spooled.path)
        return await asyncio.to_thread(self._runner.submit, spooled.path, key, spooled.count, model)

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        return await asyncio.to_thread(self._runner.status, handle)

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Every output line as a Result (any order); nothing unless the command finished
        and exited 0 (B7)."""
        ended_or_raise(handle, await self.poll_batch(handle))

        def read(body: Any, request_id: Any) -> Any:
            return chat_response(
                body,
                provider=self.name,
                wire=True,
                latency_ms=0.0,
                service_tier="batch",
                request_id=str(request_id) if request_id else None,
            )

        for line in self._runner.lines(handle):
            yield self._runner.result(line, read)

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """Local: nothing is billed; the answered count is the output's lines."""
        status = await self.poll_batch(handle)
        return BilledWork(status, status.completed)

    async def cancel_batch(self, handle: BatchHandle) -> None:
        await asyncio.to_thread(self._runner.cancel, handle)

    async def find_batch(self, key: str) -> BatchHandle | None:
        return await asyncio.to_thread(self._runner.find, key)


def _first_model(path: Path) -> str:
    """The ``body.model`` of a batch file's first line (one action, one model)."""
    with path.open("rb") as fh:
        first = fh.readline()
    model = pick(json.loads(first), "body", "model") if first.strip() else None
    return str(model or "")
