"""Claude on Google Vertex AI: model ``vertex/claude-…`` (``vertex/claude-sonnet-4-5@20250929``),
or a publisher path (``vertex/publishers/anthropic/models/claude-…``). The Vertex adapter
(:mod:`agac.providers.vertex`) hands a Claude model's calls and batch lines to this module;
project, location, credentials and bucket are the adapter's.

The body is the Anthropic Messages body (:mod:`agac.providers.anthropic`: stops, usage,
prompt caching markers, images and PDFs, structured output and its forced-tool fallback,
paused turns), with two differences Vertex makes: the model is in the path, not the body,
and the body carries ``anthropic_version: vertex-2023-10-16``.

- Live, on agac's lean transport: ``POST {base}/v1/projects/{p}/locations/{l}/publishers/
  anthropic/models/{model}:rawPredict`` with the credentials' bearer token (renewed before
  it expires); on ``transport: sdk``: Anthropic's own Vertex client
  (``anthropic.AsyncAnthropicVertex``) with the same credentials, which makes that call.
- Batch: lines ``{"custom_id", "request"}`` in the job's Cloud Storage folder, the job's
  model ``publishers/anthropic/models/{model}``; each output line ``{"custom_id",
  "request", "response", "status"}`` is read by its ``custom_id`` (:func:`claude_result`).
  Vertex runs at most a few Claude batch jobs of a project at once (4 by default): a
  create beyond ``claude_batch_jobs`` running ones waits (B12), as does a create refused
  for that quota.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from agac.errors import ProviderError, RetryableError, UnsupportedError
from agac.providers._anthropic_wire import item_error, message_response
from agac.providers._attachments import ANTHROPIC_LIMITS
from agac.providers._common import dump_line, pick, require_custom_id, stopwatch, url_segment
from agac.providers._errors import classify, connection_error, request_id_of
from agac.providers._gemini_wire import status_error
from agac.providers._tool_wire import offered
from agac.providers.anthropic import AnthropicProvider
from agac.providers.base import TRANSPORTS, ProviderSettings, Request, Response, Result
from agac.providers.spec import ProviderSpec

__all__ = [
    "CLAUDE_JOBS",
    "CLAUDE_PUBLISHER",
    "VERTEX_VERSION",
    "VertexClaude",
    "claude_id",
    "claude_result",
    "is_claude",
    "is_claude_job",
]

#: The ``anthropic_version`` of every Claude body on Vertex (live and in batch).
VERTEX_VERSION = "vertex-2023-10-16"
CLAUDE_PUBLISHER = "publishers/anthropic/models/"
#: Vertex's default quota of a project's Claude batch jobs running at once.
CLAUDE_JOBS = 4

TokenSource = Callable[[], Awaitable[str]]


def is_claude(model: str) -> bool:
    """Whether ``model`` (a Vertex model name) is one of Anthropic's."""
    return model.startswith(("claude-", CLAUDE_PUBLISHER))


def claude_id(model: str) -> str:
    """The model's id as Vertex's path names it (``claude-sonnet-4-5@20250929``)."""
    return model.removeprefix(CLAUDE_PUBLISHER)


def is_claude_job(job: Any) -> bool:
    """Whether a batch prediction job runs a Claude model (its ``model`` is Anthropic's
    publisher path, possibly under ``projects/…``)."""
    return "/anthropic/models/" in f"/{pick(job, 'model') or ''}"


def claude_root(location: str) -> str:
    """Vertex's endpoint for ``location`` as Anthropic's Vertex client chooses it."""
    if location == "global":
        return "https://aiplatform.googleapis.com"
    if location in ("us", "eu"):
        return f"https://aiplatform.{location}.rep.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


@dataclasses.dataclass(frozen=True, slots=True)
class VertexPlace:
    """Where the Vertex adapter runs: its project, location, endpoint root (None: Vertex's
    own for the location), google-auth credentials and the source of their bearer token."""

    project: str
    location: str
    root: str | None
    credentials: Any
    token: TokenSource


class VertexClaude(AnthropicProvider):
    """The Anthropic Messages adapter on Vertex's paths and credentials (see the module
    docstring). Built by the Vertex adapter; never registered on its own."""

    spec = ProviderSpec(
        name="vertex",
        extra="vertex",
        sdk_module="anthropic",
        transports=TRANSPORTS,
        cache_kinds=("marker",),
        attachments=ANTHROPIC_LIMITS,
        vision=True,
        function_tools=True,
    )
    _body_extra: ClassVar[Mapping[str, Any]] = {"anthropic_version": VERTEX_VERSION}

    def __init__(self, settings: ProviderSettings, place: VertexPlace) -> None:
        self._place = place
        root = place.root or claude_root(place.location)
        self._root = root.rstrip("/")
        # Batches are the Vertex adapter's jobs: this one needs no batch client.
        super().__init__(dataclasses.replace(settings, batch=False, base_url=None))

    def _resolve_key(self, settings: ProviderSettings) -> str:
        return ""  # Google credentials: a bearer token with each call

    def _lean_headers(self) -> dict[str, str]:
        return {}

    def _open_lean(self) -> None:
        p, loc = self._place.project, self._place.location
        self._predict_root = (
            f"{self._root}/v1/projects/{p}/locations/{loc}/publishers/anthropic/models/"
        )

    def _make_client(self) -> Any:
        """Anthropic's Vertex client on the adapter's credentials, project, location and
        endpoint (its retries off: the engine owns retries)."""
        return self._sdk.AsyncAnthropicVertex(
            region=self._place.location,
            project_id=self._place.project,
            credentials=self._place.credentials,
            base_url=f"{self._root}/v1",
            timeout=self._timeout,
            max_retries=0,
        )

    # -- errors --------------------------------------------------------------

    def _status_error(
        self, status: int, headers: Any, body: Any, text: str, code: str | None = None
    ) -> ProviderError:
        """Anthropic's error body, or Google's (``{"error": {"code", "message",
        "status", "details"}}``, alone or as the one item of a list: Vertex's own
        refusals, such as its quota, a permission or a model not enabled), read as for
        Gemini (a ``RetryInfo`` delay is waited)."""
        if isinstance(body, list) and len(body) == 1:
            body = body[0]
        if pick(body, "error", "status") and not pick(body, "error", "type"):
            return status_error(self.name, status, body, headers)
        return super()._status_error(status, headers, body, text, code)

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        from google.auth import exceptions as gx

        if isinstance(exc, gx.RefreshError):
            if exc.retryable:
                return RetryableError(f"vertex: the credentials' token was refused: {exc}")
            return UnsupportedError(
                f"vertex: the credentials' token was refused: {exc}: check the credentials "
                "file or run `gcloud auth application-default login`",
                code="missing_credentials",
            )
        if isinstance(exc, gx.TransportError):
            return connection_error(self.name, exc)
        return super()._sdk_error(exc)

    # -- calls ---------------------------------------------------------------

    def _params(self, request: Request, *, tool: bool) -> dict[str, Any]:
        """The Messages body with the model's Vertex id; attachments are checked against
        Claude's limits first (Vertex's own are Gemini's)."""
        if request.attachments:
            ANTHROPIC_LIMITS.check(self.name, request.model, request.attachments)
        return {**super()._params(request, tool=tool), "model": claude_id(request.model)}

    async def _send(self, request: Request, params: dict[str, Any]) -> Response:
        """rawPredict on the lean transport; the SDK's Vertex client otherwise."""
        if self._http is None:
            return await super()._send(request, params)
        body = vertex_body(params)
        url = self._predict_root + url_segment(str(params["model"])) + ":rawPredict"
        headers = {"Authorization": f"Bearer {await self._place.token()}"}
        with stopwatch() as took:
            answer, got = await self._http.post_with_headers(
                url, body, errors=self._status_error, timeout=request.timeout, headers=headers
            )
        return message_response(
            answer,
            latency_ms=took[0],
            parse=request.schema is not None,
            request_id=request_id_of(got),
            offered=offered(request),
        )

    def _ask_lifecycle(self, model: str) -> None:
        """Vertex has no Anthropic Models API to ask a model's lifecycle of."""

    def batch_line(self, request: Request) -> bytes:
        """One batch input line: ``{"custom_id", "request"}``, the request a Vertex body."""
        params = self._params(request, tool=self._use_tool(request.model))
        return dump_line({"custom_id": require_custom_id(request), "request": vertex_body(params)})


def vertex_body(params: dict[str, Any]) -> dict[str, Any]:
    """A Messages body as Vertex takes it: no model, the Vertex ``anthropic_version``."""
    body = {k: v for k, v in params.items() if k != "model"}
    body["anthropic_version"] = VERTEX_VERSION
    return body


def claude_result(line: dict[str, Any], offered: frozenset[str] = frozenset()) -> Result | None:
    """One output line of a Claude job as its record's result: ``response`` an Anthropic
    message, else ``status`` the error (text, often ending in the error's JSON). A line
    naming no ``custom_id`` answers no record (it stays missing: B6)."""
    custom_id = str(line.get("custom_id") or "")
    if not custom_id:
        return None
    response = line.get("response")
    status = line.get("status")
    if isinstance(response, dict) and pick(response, "type") != "error" and not status:
        answer = message_response(response, latency_ms=0.0, service_tier="batch", offered=offered)
        return Result(custom_id, "succeeded", response=answer)
    return Result(custom_id, "errored", error=_line_error(status, response))


def _line_error(status: Any, response: Any) -> ProviderError:
    """An errored line's error: an Anthropic error body in ``response``, or the JSON at
    the end of ``status``'s text (Anthropic's or Google's), else the text itself."""
    if isinstance(response, dict) and pick(response, "type") == "error":
        return item_error("vertex", response)
    text = str(status or "the line has no response")
    start = text.find("{")
    if start >= 0:
        try:
            body = json.loads(text[start:])
        except ValueError:
            body = None
        if isinstance(body, dict) and pick(body, "error", "type"):
            return item_error("vertex", body)
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            err = body["error"]
            status_code = err.get("code") if isinstance(err.get("code"), int) else 500
            return classify(
                "vertex", status_code, message=err.get("message"), code=err.get("status")
            )
    return classify("vertex", 500, message=text)
