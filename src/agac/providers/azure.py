"""Azure OpenAI (``pip install -e '.[azure]'``): model ``azure/<deployment>``.

Chat Completions and the Batch API of OpenAI, behind Azure's door: the resource's
endpoint (``AZURE_OPENAI_ENDPOINT`` or ``providers: azure: endpoint:``), an ``api-key``
header (``AZURE_OPENAI_API_KEY``) or an Entra ID bearer token (``AZURE_OPENAI_AD_TOKEN``,
else ``azure-identity``'s default credential, refreshed before it expires:
:mod:`agac.providers._entra`), and one of two surfaces:

- ``deployments`` (the default): ``/openai/deployments/{deployment}/chat/completions``,
  every call with ``?api-version=`` (``OPENAI_API_VERSION`` or ``api_version:``), the SDK's
  ``AsyncAzureOpenAI``; batch lines and the batch endpoint are ``/chat/completions``.
- ``v1``: ``/openai/v1/…``, the deployment as ``model``, no version; the SDK's
  ``AsyncOpenAI`` pointed there; batch lines are ``/v1/chat/completions``.

Live calls go on the lean transport or the SDK, as for OpenAI. Azure's rules for batches
(Global-Batch and Data-Zone deployments), each different from OpenAI's:

- a line's ``body.model`` is the deployment, one deployment per file (one action's
  requests are one model, so one deployment);
- an uploaded file may still be ``pending``: agac waits until it is ``processed`` before
  creating the batch (Azure refuses a pending file), and a resubmission of the same batch
  key in this process reuses that file;
- an enqueued-token quota refusal on create (``token_limit_exceeded``) is a wait (B2),
  never a failure of the file;
- a batch never expires at Azure: the action's ``batch_deadline`` is what ends it (agac
  cancels it, then B7 for what is unanswered);
- the file is written without a UTF-8 BOM (Azure reads a BOM as "no deployment").

Azure's ``content_filter_results`` (per choice) and ``prompt_filter_results`` are read
into a filtered answer's stop detail: the category and its severity.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from agac.errors import (
    ConfigError,
    FatalError,
    Problem,
    ProviderError,
    UnsupportedError,
    WaitError,
)
from agac.providers._attachments import OPENAI_LIMITS
from agac.providers._common import EMULATOR_HINT, pick, url_path
from agac.providers._entra import entra_token
from agac.providers._errors import error_fields, request_id_of
from agac.providers._openai_compat import (
    COMPAT_OPTIONS,
    OpenAICompatProvider,
    compat_spec,
    filter_detail,
)
from agac.providers.base import ProviderSettings
from agac.providers.openai import openai_cache_minimum
from agac.providers.options import Option
from agac.providers.spec import BatchSpec, FlexSpec

__all__ = ["AzureProvider"]

#: Seconds to wait before creating a batch again after an enqueued-token quota refusal
#: that names no time of its own.
QUOTA_WAIT = 300.0
#: How long agac waits at most for an uploaded batch file to be processed, and its first
#: and largest pause between two looks.
FILE_WAIT = (600.0, 0.05, 10.0)
QUOTA_CODES = frozenset({"token_limit_exceeded"})
#: The error code of a prompt refused by Azure's content filter.
CONTENT_FILTER = "content_filter"

AZURE_OPTIONS = (
    *COMPAT_OPTIONS,
    Option(
        "endpoint",
        "text",
        "the resource's endpoint, `https://<resource>.openai.azure.com` "
        "(`AZURE_OPENAI_ENDPOINT` when not set)",
    ),
    Option(
        "api_version",
        "text",
        "the API version of the deployments surface (`OPENAI_API_VERSION` when not set)",
    ),
    Option(
        "surface",
        "choice",
        "`deployments`: /openai/deployments/{deployment}/… with an api-version; "
        "`v1`: /openai/v1/… with the deployment as model",
        default="deployments",
        choices=("deployments", "v1"),
    ),
)


class AzureProvider(OpenAICompatProvider):
    """Azure OpenAI Chat Completions and Batch API; see the module docstring."""

    spec = compat_spec(
        "azure",
        extra="azure",
        sdk_module="openai",
        credential_env=("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
        ambient_credentials="azure.identity",
        attachments=OPENAI_LIMITS,
        cache_kinds=("implicit",),
        cache_minimum=openai_cache_minimum,
        # ``service_tier: flex`` on Global Standard deployments, at half the standard price;
        # a deployment whose model Azure does not serve on flex is refused with a 400.
        flex=FlexSpec(billed="batch"),
        options=AZURE_OPTIONS,
        # Global-Batch: 100,000 requests and 200 MB a file.
        batch=BatchSpec(input="file", max_requests=100_000, tools=True),
    )
    default_base_url = ""
    chat_path = "/chat/completions"

    def __init__(self, settings: ProviderSettings) -> None:
        options = settings.options
        endpoint = str(options.get("endpoint") or os.environ.get("AZURE_OPENAI_ENDPOINT") or "")
        endpoint = settings.base_url or endpoint
        if not endpoint:
            raise _missing("endpoint", "AZURE_OPENAI_ENDPOINT")
        self._endpoint = endpoint.rstrip("/")
        self._v1 = options.get("surface") == "v1"
        version = str(options.get("api_version") or os.environ.get("OPENAI_API_VERSION") or "")
        if not version and not self._v1:
            raise _missing("api_version", "OPENAI_API_VERSION")
        self._api_version = version
        # An Entra ID token when no key is set (agac.yml's key or the variable).
        keyed = settings.api_key or os.environ.get("AZURE_OPENAI_API_KEY")
        self._token = None if keyed else entra_token()
        self._uploaded: dict[str, str] = {}
        super().__init__(settings)
        self._batch_endpoint = "/v1/chat/completions" if self._v1 else "/chat/completions"

    def _resolve_key(self, settings: ProviderSettings) -> str:
        key = settings.api_key or os.environ.get("AZURE_OPENAI_API_KEY") or ""
        if not key and self._token is None:
            raise UnsupportedError(
                "no credentials for provider 'azure': set AZURE_OPENAI_API_KEY or "
                "AZURE_OPENAI_AD_TOKEN, or install 'agac[azure]' for Entra ID "
                f"(azure-identity), {EMULATOR_HINT}",
                code="missing_credentials",
            )
        return key

    # -- where calls go ------------------------------------------------------

    def _lean_headers(self) -> dict[str, str]:
        return {"api-key": self._api_key} if self._api_key else {}

    async def _call_headers(self) -> dict[str, str] | None:
        if self._api_key or self._token is None:
            return None
        return {"Authorization": f"Bearer {await self._token.bearer()}"}

    def _open_lean(self) -> None:
        self._chat_url = f"{self._endpoint}/openai/v1/chat/completions"

    def _chat_target(self, model: str) -> str:
        if self._v1:
            return self._chat_url
        return (
            f"{self._endpoint}/openai/deployments/{url_path(model)}/chat/completions"
            f"?api-version={self._api_version}"
        )

    def _make_client(self) -> Any:
        # max_retries=0: the engine owns retries (docs/providers.md).
        # With no key, the SDK asks for the token before each request (an async provider:
        # the v1 surface's ``api_key`` provider must be one).
        bearer = self._token.bearer if self._token is not None else None
        auth: dict[str, Any] = (
            {"api_key": self._api_key} if self._api_key else {"azure_ad_token_provider": bearer}
        )
        if self._v1:
            key = self._api_key
            return self._sdk.AsyncOpenAI(
                api_key=key or bearer,
                base_url=f"{self._endpoint}/openai/v1/",
                default_headers={"api-key": key} if key else None,
                timeout=self._timeout,
                max_retries=0,
            )
        return self._sdk.AsyncAzureOpenAI(
            azure_endpoint=self._endpoint,
            api_version=self._api_version,
            timeout=self._timeout,
            max_retries=0,
            **auth,
        )

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        return (self._sdk.OpenAIError,)

    # -- Azure's rules -------------------------------------------------------

    def _status_error(
        self, status: int, headers: Mapping[str, str], body: Any, text: str
    ) -> ProviderError:
        """An enqueued-token quota refusal is a wait (B2), never a fatal quota error; a
        prompt the content filter refused fails ``content_filter``, naming what it flagged."""
        code = error_fields(body)[0]
        if code == CONTENT_FILTER:
            return prompt_filtered(self.name, status, body, request_id_of(headers, body))
        if code in QUOTA_CODES:
            found = super()._status_error(429, headers, body, text)
            return WaitError(
                f"{found} (the deployment's enqueued-token quota is full: agac creates the "
                "batch again when it has room)",
                retry_after=found.retry_after or QUOTA_WAIT,
                status=status,
                code=code,
            )
        return super()._status_error(status, headers, body, text)

    def _line_error(self, status: int, body: Any, request_id: str | None) -> ProviderError:
        """A batch line whose prompt the content filter refused fails ``content_filter``."""
        if error_fields(body)[0] == CONTENT_FILTER:
            return prompt_filtered(self.name, status, body, request_id)
        return super()._line_error(status, body, request_id)

    async def _upload(self, path: Path, key: str) -> str:
        """Upload the file once per batch key, and wait until Azure has processed it."""
        found = self._uploaded.get(key)
        if found is None:
            found = await super()._upload(path, key)
            self._uploaded[key] = found
        await self._processed(found)
        return found

    async def _processed(self, file_id: str) -> None:
        most, pause, longest = FILE_WAIT
        waited = 0.0
        while True:
            state = str((await self._client.files.retrieve(file_id)).status or "")
            if state != "pending" and state != "uploaded" and state != "running":
                if state == "error":
                    raise UnsupportedError(
                        f"azure: the batch input file {file_id} failed Azure's processing",
                        code="batch_input_refused",
                    )
                return
            if waited >= most:
                raise WaitError(
                    f"azure: the batch input file {file_id} is still {state} after {most:.0f} s",
                    retry_after=60.0,
                )
            await asyncio.sleep(pause)
            waited += pause
            pause = min(longest, pause * 2)

    async def _list_batches(self) -> AsyncIterator[Any]:
        async for batch in self._client.batches.list(limit=100):
            yield batch


def prompt_filtered(provider: str, status: int, body: Any, request_id: str | None) -> FatalError:
    """Azure's refusal of a prompt by its content filter (HTTP 400, ``code:
    content_filter``), live or in a batch line: a final ``content_filter`` failure whose
    message names each filtered category and its severity, read from
    ``innererror.content_filter_result`` (or ``content_filter_results``)."""
    error = pick(body, "error") if isinstance(pick(body, "error"), Mapping) else body
    inner = pick(error, "innererror")
    results = pick(inner, "content_filter_result") or pick(inner, "content_filter_results")
    flagged = filter_detail(None, [{"content_filter_results": results}])
    said = f" (request id {request_id})" if request_id else ""
    return FatalError(
        f"{provider}: HTTP {status} [content_filter]: the provider's content filter refused "
        f"the prompt ({flagged or 'content filter: no category named'}){said}",
        status=status,
        code=CONTENT_FILTER,
        reason="content_filter",
        request_id=request_id,
    )


def _missing(option: str, variable: str) -> ConfigError:
    return ConfigError(
        problems=[
            Problem(
                "missing_credentials",
                f"provider 'azure' needs its {option}",
                hint=f"set {variable} or providers: azure: {option}: in agac.yml, " + EMULATOR_HINT,
            )
        ]
    )
