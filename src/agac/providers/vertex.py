"""Google Vertex AI, Gemini models (``pip install -e '.[vertex]'``): model
``vertex/<gemini model>`` (``vertex/gemini-2.5-flash``), or a publisher path
(``vertex/publishers/google/models/gemini-2.5-flash``). Claude models
(``vertex/claude-…``) go through :mod:`agac.providers.vertex_claude` on the same
project, location, credentials and bucket.

Credentials are Google's Application Default Credentials, read by google-auth:
``providers: vertex: credentials: <file>`` (a service account's key or any credentials
file google-auth reads), else ``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's
``application-default login``, or the metadata server of a Google Cloud machine. The
project is ``providers: vertex: project:``, else ``GOOGLE_CLOUD_PROJECT``, else the
credentials' own; the location ``location:``, else ``GOOGLE_CLOUD_LOCATION``, else
``global`` (batch jobs need a region). The endpoint is Vertex's
(``GOOGLE_VERTEX_BASE_URL``, the SDK's own variable, or ``base_url:`` to point it
elsewhere).

Live calls are Gemini's ``generateContent`` on Vertex's path
(``projects/<p>/locations/<l>/publishers/google/models/<m>:generateContent``), on agac's
lean transport (a bearer token from the credentials, renewed before it expires, on a
worker thread) or on google-genai in Vertex mode (``transport: sdk``); the request and the
answer are the Gemini API's (:mod:`agac.providers.gemini`: stops, usage, tools, schemas,
images and PDFs inline). Vertex has no Files API and no flex tier here; its prompt caching
is implicit.

Batches are batch prediction jobs over Cloud Storage (``providers: vertex: batch_bucket:
gs://bucket/prefix``; BigQuery input is not used):

- the lines ``{"request": GenerateContentRequest}`` are written to
  ``<batch_bucket>/<job name>/input/records.jsonl``; the job writes its output under
  ``<batch_bucket>/<job name>/output/`` (Vertex adds a ``prediction-model-<time>/`` folder
  of ``predictions*.jsonl``, each line ``{"status", "processed_time", "request",
  "response"}``, in no order);
- the output names no custom id, so agac's key of each record travels in the request's
  ``labels`` (``agac_key``), which the output echoes, beside a digest of the request's text
  (``agac_digest``): a line whose echoed text does not match its digest is an error of
  that record, never another record's answer;
- the job's ``displayName`` is derived from agac's batch key: a submission whose answer
  was lost is found again by it (B2), and a submit finds it before creating (never two
  jobs for one key);
- states: ``JOB_STATE_QUEUED``, ``PENDING``, ``RUNNING``, ``UPDATING``, ``PAUSED`` (running),
  ``SUCCEEDED`` and ``PARTIALLY_SUCCEEDED`` (ended: what the output holds is read, records
  missing from it are sent again, B6), ``FAILED``, ``CANCELLING``, ``CANCELLED``,
  ``EXPIRED`` (nothing read, B7); any other is running (B9);
- limits: 200,000 requests and a 1 GB file a job (agac splits above, B1;
  ``batch_max_records`` makes smaller jobs); a create refused 429 (the project's quota of
  concurrent jobs) waits (B12);
- the input object is deleted once the job has ended (``batch_input: keep`` keeps it); the
  output stays in the user's bucket.

A Claude model's calls and batch lines are :mod:`agac.providers.vertex_claude`'s; its jobs
are these same jobs (display name, states, output folder, input deleted), their output
read by ``custom_id``, and the project's running Claude jobs counted before each create
(``claude_batch_jobs``, B12).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, Literal

from agac.errors import (
    ConfigError,
    Problem,
    ProviderError,
    RetryableError,
    UnsupportedError,
    WaitError,
)
from agac.providers._attachments import Blobs
from agac.providers._cache_wire import anthropic_minimum, gemini_minimum
from agac.providers._common import (
    dump_line,
    ended_or_raise,
    import_sdk,
    pick,
    require_custom_id,
    spool_jsonl_async,
)
from agac.providers._errors import classify, connection_error
from agac.providers._gcs import GcsPlace, GcsStore
from agac.providers._gemini_wire import batch_status, content_response, item_error
from agac.providers._search_wire import gemini_schema_with_search
from agac.providers.base import (
    TRANSPORTS,
    AttachmentLimits,
    BatchHandle,
    BatchStatus,
    BilledWork,
    ProviderSettings,
    Request,
    Response,
    Result,
    Usage,
)
from agac.providers.gemini import GeminiProvider, wire_request
from agac.providers.options import FIND_BATCH_SCAN, TIMEOUT, Option, structured_output
from agac.providers.spec import BatchSpec, ProviderSpec, WebSearchSpec
from agac.providers.vertex_claude import (
    CLAUDE_JOBS,
    CLAUDE_PUBLISHER,
    VertexClaude,
    VertexPlace,
    claude_id,
    claude_result,
    is_claude,
    is_claude_job,
)

__all__ = ["VertexProvider", "job_name", "request_digest"]

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
#: Vertex's documented limits of a Gemini batch prediction job.
MAX_REQUESTS = 200_000
MAX_FILE_BYTES = 1024 * 1024 * 1024
#: Seconds before a create refused for the quota of concurrent jobs is tried again.
QUOTA_WAIT = 300.0
#: Seconds before a Claude job held back by ``claude_batch_jobs`` looks again.
CLAUDE_SLOT_WAIT = 60.0
INPUT = "input/records.jsonl"
OUTPUT = "output"
KEY_LABEL = "agac_key"
DIGEST_LABEL = "agac_digest"
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{1,63}$")

MB = 1024 * 1024
VERTEX_LIMITS = AttachmentLimits(
    kinds=frozenset({"image", "pdf"}),
    max_file_bytes={"image": 7 * MB, "pdf": 7 * MB},
    max_files=3000,
    max_pdf_pages=1000,
)
"""Images and PDFs inline, 7 MB each (Vertex's limit of inline data)."""

VERTEX_OPTIONS = (
    TIMEOUT,
    structured_output("json_mode", "JSON mode with the schema in the prompt"),
    Option("project", "text", "the Google Cloud project (else GOOGLE_CLOUD_PROJECT)"),
    Option(
        "location",
        "text",
        "the region, e.g. `us-central1` (else GOOGLE_CLOUD_LOCATION, else `global`)",
    ),
    Option(
        "credentials",
        "text",
        "a credentials file google-auth reads (else Application Default Credentials)",
    ),
    Option(
        "batch_bucket",
        "text",
        "the Cloud Storage prefix batch jobs read their input from and write their "
        "output to, `gs://bucket/prefix` (needed for `run_mode: batch`)",
    ),
    Option(
        "batch_input",
        "choice",
        "`delete` the input object once its job has ended, or `keep` it",
        default="delete",
        choices=("delete", "keep"),
    ),
    Option(
        "claude_batch_jobs",
        "integer",
        "the most Claude batch jobs agac keeps running in the project at once (Vertex's "
        "quota, 4 by default); a job beyond them waits",
        default=CLAUDE_JOBS,
        minimum=1,
    ),
    Option(
        "batch_max_records",
        "integer",
        "the most records agac puts in one batch job (Vertex takes 200,000); a larger file "
        "is split into jobs",
        default=MAX_REQUESTS,
        minimum=1,
    ),
    FIND_BATCH_SCAN,
)


def vertex_cache_minimum(model: str) -> int:
    """The fewest prefix tokens cached: Claude's for a Claude model, else Gemini's."""
    return anthropic_minimum(claude_id(model)) if is_claude(model) else gemini_minimum(model)


def job_name(key: str) -> str:
    """The display name of batch ``key``'s job (128 characters at most)."""
    name = "agac-" + re.sub(r"[^A-Za-z0-9_-]+", "-", key).strip("-")
    return name if len(name) <= 128 else "agac-" + hashlib.sha256(key.encode()).hexdigest()


def request_digest(request: Any) -> str:
    """A digest of a request's turns as text (role and text parts, in order): what the
    output's echo of the request must still say. Other fields may come back normalized."""
    turns = [
        [str(c.get("role") or ""), [str(p["text"]) for p in c.get("parts") or () if "text" in p]]
        for c in pick(request, "contents") or ()
        if isinstance(c, dict)
    ]
    return hashlib.sha256(json.dumps(turns, ensure_ascii=False).encode()).hexdigest()[:32]


class VertexProvider(GeminiProvider):
    """Gemini on Vertex AI: generateContent and batch prediction jobs; see the module
    docstring."""

    spec = ProviderSpec(
        name="vertex",
        extra="vertex",
        sdk_module="google.genai",
        # A path, not a secret; google-auth finds credentials without it too.
        credential_env=("GOOGLE_APPLICATION_CREDENTIALS",),
        ambient_credentials="google.auth",
        transports=TRANSPORTS,
        batch=BatchSpec(input="file", max_requests=MAX_REQUESTS, max_bytes=MAX_FILE_BYTES),
        cache_kinds=("implicit", "marker"),
        cache_minimum=vertex_cache_minimum,
        attachments=VERTEX_LIMITS,
        vision=True,
        function_tools=True,
        # Gemini models only (Claude on Vertex goes through Anthropic's adapter); not in
        # batch prediction jobs yet.
        web_search=WebSearchSpec(
            "Google Search grounding on Vertex AI (google_search)",
            models=lambda model: not model.startswith("claude"),
            model_hint="use a Gemini model on Vertex AI, or anthropic/claude-… directly",
            batch=False,
            batch_note="agac does not offer web search in Vertex AI batch prediction jobs yet",
            with_schema=gemini_schema_with_search,
        ),
        options=VERTEX_OPTIONS,
    )
    base_url_env = "GOOGLE_VERTEX_BASE_URL"

    def __init__(self, settings: ProviderSettings) -> None:
        options = settings.options
        self._credentials, found_project = _google_credentials(
            str(options.get("credentials") or "") or None
        )
        project = options.get("project") or os.environ.get("GOOGLE_CLOUD_PROJECT")
        self._project = str(project or found_project or "")
        if not self._project:
            raise _config("project", "no Google Cloud project is set", "GOOGLE_CLOUD_PROJECT")
        location = options.get("location") or os.environ.get("GOOGLE_CLOUD_LOCATION")
        self._location = str(location or "global")
        self._bucket = str(options.get("batch_bucket") or "")
        self._keep_input = options.get("batch_input") == "keep"
        # SupportsBatchQuota: the records of one job (no minimum; nothing held back).
        self.max_records = int(options.get("batch_max_records") or MAX_REQUESTS)
        if self.max_records > MAX_REQUESTS:
            raise _config(
                "batch_max_records",
                f"batch_max_records ({self.max_records}) is above the {MAX_REQUESTS:,} "
                "records Vertex takes in a job",
                None,
            )
        self.min_records = 1
        self.below_minimum: Literal["live", "wait"] = "live"
        self._claude_jobs = int(options.get("claude_batch_jobs") or CLAUDE_JOBS)
        self._claude: VertexClaude | None = None
        self._token_lock = asyncio.Lock()
        self._gcs = GcsStore("vertex")
        super().__init__(settings)

    def _resolve_key(self, settings: ProviderSettings) -> str:
        return ""  # Application Default Credentials, read by google-auth

    # -- clients -------------------------------------------------------------

    def _lean_headers(self) -> dict[str, str]:
        return {}  # the bearer token goes with each call (it is renewed)

    def _open_lean(self) -> None:
        root = (self._base_url or _default_root(self._location)).rstrip("/")
        self._root = root
        self._models_url = (
            f"{root}/{vertex_api_version()}/projects/{self._project}/locations/{self._location}/"
        )
        self._server_timeouts: dict[float, dict[str, str]] = {}

    def _client_args(self) -> dict[str, Any]:
        return {
            "vertexai": True,
            "project": self._project,
            "location": self._location,
            "credentials": self._credentials,
        }

    def _model_name(self, model: str) -> str:
        if model.startswith(("publishers/", "projects/")):
            return model
        if is_claude(model):
            return CLAUDE_PUBLISHER + model
        return f"publishers/google/models/{model}"

    def _claude_adapter(self) -> VertexClaude:
        """The adapter of Claude models, on this one's project, location, endpoint and
        credentials (built at the first Claude call)."""
        if self._claude is None:
            place = VertexPlace(
                self._project, self._location, self._base_url, self._credentials, self._token
            )
            self._claude = VertexClaude(self.settings, place)
        return self._claude

    async def complete(self, request: Request) -> Response:
        if is_claude(request.model):
            return await self._claude_adapter().complete(request)
        return await super().complete(request)

    async def continue_turn(self, request: Request, paused: Response) -> Response:
        """A Claude turn paused (``pause_turn``) continued live; Gemini never pauses."""
        if not is_claude(request.model):
            return paused
        return await self._claude_adapter().continue_turn(request, paused)

    async def _call_headers(self, seconds: float) -> dict[str, str]:
        return {**self._server_timeout(seconds), "Authorization": f"Bearer {await self._token()}"}

    async def _token(self) -> str:
        """The credentials' access token, renewed on a worker thread when it is missing or
        near its expiry (google-auth's ``valid`` allows for the clock's skew)."""
        creds = self._credentials
        if not (creds.token and creds.valid):
            async with self._token_lock:
                if not (creds.token and creds.valid):
                    with self._translate_errors():
                        await asyncio.to_thread(_refresh, creds)
        return str(creds.token)

    async def _file_uris(self, request: Request, *, batch: bool = False) -> dict[str, str]:
        return {}  # no Files API on Vertex: every attachment goes inline

    # -- errors --------------------------------------------------------------

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

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        from google.auth import exceptions as gx

        return (gx.GoogleAuthError,)

    # -- batch ---------------------------------------------------------------

    def _place(self, key: str) -> GcsPlace:
        if not self._bucket:
            raise _config("batch_bucket", "batch jobs need a Cloud Storage prefix", None)
        return GcsPlace.of(self._bucket, job_name(key), provider=self.name)

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Write the lines to Cloud Storage, then create the job named after ``key`` (a
        job of that name already there is the one returned: never two)."""
        place = self._place(key)
        found = await self.find_batch(key)
        if found is not None:
            return found
        models: set[str] = set()
        spooled = await spool_jsonl_async(
            self._lines(requests, models),
            max_count=self.max_records,
            max_bytes=MAX_FILE_BYTES,
            provider=self.name,
        )
        try:
            if len(models) != 1:
                raise ValueError("a Vertex batch job takes one model")
            await self._gcs.put_file(place.bucket, place.key(INPUT), spooled.path)
        finally:
            spooled.discard()
        job = await self._create(models.pop(), place, key)
        meta = {"request_count": spooled.count, "bucket": place.bucket, "folder": place.folder}
        return BatchHandle(self.name, str(job.name), key, meta)

    async def _lines(self, requests: Iterable[Request], models: set[str]) -> AsyncIterator[Any]:
        for request in requests:
            models.add(request.model)
            if is_claude(request.model):
                yield self._claude_adapter().batch_line(request)
                continue
            yield _line(
                request, self._generation(request, native=self._native_schema(request.model))
            )

    async def _create(self, model: str, place: GcsPlace, key: str) -> Any:
        if is_claude(model):
            await self._claude_slot()
        config = {"display_name": job_name(key), "dest": place.uri(OUTPUT)}
        try:
            with self._translate_errors():
                return await self._aio.batches.create(
                    model=self._model_name(model), src=place.uri(INPUT), config=config
                )
        except ProviderError as err:
            if err.status != 429:
                raise
            raise WaitError(
                f"{err} (the project's quota of concurrent batch jobs is full: agac creates "
                "the job again when earlier jobs have ended)",
                retry_after=err.retry_after or QUOTA_WAIT,
                status=err.status,
                code=err.code,
            ) from err

    async def _claude_slot(self) -> None:
        """B12: a WaitError while the project already runs ``claude_batch_jobs`` Claude
        batch jobs (Vertex's quota: a create beyond it is refused). Counted over the
        ``find_batch_scan`` most recent jobs."""
        running = seen = 0
        with self._translate_errors():
            pager = await self._aio.batches.list(config={"page_size": 100})
            async for job in pager:
                if is_claude_job(job) and batch_status(job).state in ("running", "cancelling"):
                    running += 1
                seen += 1
                if seen >= self._scan_limit:
                    break
        if running >= self._claude_jobs:
            raise WaitError(
                f"vertex: {running} Claude batch jobs are running in project {self._project} "
                f"(claude_batch_jobs: {self._claude_jobs}): agac creates the next one when "
                "one of them has ended",
                retry_after=CLAUDE_SLOT_WAIT,
                code="claude_batch_jobs",
            )

    async def _job(self, handle: BatchHandle) -> Any:
        with self._translate_errors():
            return await self._aio.batches.get(name=handle.id)

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        """The job's state; once it has ended, its input object is deleted (unless kept)."""
        job = await self._job(handle)
        status = batch_status(job)
        if status.state in ("ended", "failed", "cancelled", "expired") and not self._keep_input:
            for uri in pick(job, "src", "gcs_uri") or ():
                await self._gcs.delete(*GcsPlace.parse(str(uri)))
        return status

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Each output line by the key its request carries; a record missing from the
        output is not returned (B6). Nothing is read unless the job has ended (B7)."""
        job = await self._job(handle)
        ended_or_raise(handle, batch_status(job))
        claude = is_claude_job(job)
        async for line in self._output_lines(job):
            result = claude_result(line, handle.tools) if claude else self._line_result(line)
            if result is not None:
                yield result

    async def _output_lines(self, job: Any) -> AsyncIterator[dict[str, Any]]:
        folder = pick(job, "output_info", "gcs_output_directory") or pick(job, "dest", "gcs_uri")
        if not folder:
            return
        bucket, prefix = GcsPlace.parse(str(folder))
        for key in await self._gcs.keys(bucket, prefix.rstrip("/") + "/"):
            if key.endswith(".jsonl"):
                async for raw in self._gcs.lines(bucket, key):
                    yield json.loads(raw)

    def _line_result(self, line: dict[str, Any]) -> Result | None:
        """One output line as the result of the record its labels name; a line naming
        none is no record's (it stays missing: B6)."""
        request = line.get("request") or {}
        labels = pick(request, "labels") or {}
        custom_id = str(labels.get(KEY_LABEL) or "")
        if not custom_id:
            return None
        if labels.get(DIGEST_LABEL) != request_digest(request):
            err = RetryableError(
                f"vertex: the output line of {custom_id} echoes a request whose text is not "
                "the one agac sent under that key",
                code="output_mismatch",
            )
            return Result(custom_id, "errored", error=err)
        response = line.get("response")
        status = line.get("status")
        if isinstance(response, dict) and not status:
            answer = content_response(response, latency_ms=0.0, service_tier="batch")
            return Result(custom_id, "succeeded", response=answer)
        return Result(custom_id, "errored", error=_line_error(status))

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The answered lines and their total usage, read from the output."""
        job = await self._job(handle)
        status = batch_status(job)
        total, answered = Usage(), 0
        claude = is_claude_job(job)
        async for line in self._output_lines(job):
            result = claude_result(line) if claude else self._line_result(line)
            if result is not None and result.response is not None:
                total, answered = total.plus(result.response.usage), answered + 1
        if not answered:
            return BilledWork(status, status.completed)
        return BilledWork(status, answered, total)

    async def cancel_batch(self, handle: BatchHandle) -> None:
        with self._translate_errors():
            await self._aio.batches.cancel(name=handle.id)

    async def aclose(self) -> None:
        if self._claude is not None:
            await self._claude.aclose()
        await super().aclose()

    async def find_batch(self, key: str) -> BatchHandle | None:
        """The job whose display name is ``key``'s (scans at most ``find_batch_scan``)."""
        name = job_name(key)
        seen = 0
        with self._translate_errors():
            pager = await self._aio.batches.list(
                config={"page_size": 100, "filter": f'display_name="{name}"'}
            )
            async for job in pager:
                if pick(job, "display_name") == name:
                    return BatchHandle(self.name, str(job.name), key, {})
                seen += 1
                if seen >= self._scan_limit:
                    break
        return None


def _line(request: Request, config: dict[str, Any]) -> list[bytes | Any]:
    """``{"request"}`` with agac's key and the text's digest as labels; attachments'
    base64 streamed in place."""
    custom_id = require_custom_id(request)
    if not _LABEL_VALUE.match(custom_id):
        raise ValueError(f"custom_id {custom_id!r} cannot be a Vertex label value")
    blobs = Blobs()
    wire = wire_request(request, config, blobs.token)
    wire["labels"] = {KEY_LABEL: custom_id, DIGEST_LABEL: request_digest(wire)}
    return blobs.pieces(dump_line({"request": wire}))


def _line_error(status: Any) -> ProviderError:
    """An output line's ``status``: the error text Vertex writes, often ending in the
    ``google.rpc.Status`` JSON of the failed call."""
    text = str(status or "the line has no response")
    start = text.find("{")
    if start >= 0:
        try:
            body = json.loads(text[start:])
        except ValueError:
            body = None
        if isinstance(body, dict):
            return item_error("vertex", body.get("error", body))
    return classify("vertex", 500, message=text)


def vertex_api_version() -> str:
    """The API version in the path, chosen as the SDK chooses it for Vertex:
    ``GOOGLE_GENAI_API_VERSION`` (``beta`` meaning ``v1beta1``), else ``v1beta1``."""
    chosen = os.environ.get("GOOGLE_GENAI_API_VERSION")
    return "v1beta1" if not chosen or chosen == "beta" else chosen


def _default_root(location: str) -> str:
    if location == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def _google_credentials(path: str | None) -> tuple[Any, str | None]:
    """google-auth's credentials and their project: from ``path``, else ADC."""
    auth = import_sdk("google.auth", "vertex")
    gx = import_sdk("google.auth.exceptions", "vertex")
    try:
        if path:
            return _credentials_file(path)
        found = auth.default(scopes=[CLOUD_PLATFORM])
    except gx.DefaultCredentialsError as exc:
        raise ConfigError(
            problems=[
                Problem(
                    "missing_credentials",
                    f"provider 'vertex' found no Google credentials: {exc}",
                    hint="set GOOGLE_APPLICATION_CREDENTIALS or providers: vertex: "
                    "credentials:, or run `gcloud auth application-default login`",
                )
            ]
        ) from exc
    return found[0], found[1]


def _credentials_file(path: str) -> tuple[Any, str | None]:
    """A ``credentials:`` file: a service account's key or a user's authorized-user file,
    read by the class made for its type (google-auth's generic loader is deprecated for
    files it cannot vouch for). Any other type is refused with the way that reads it."""
    try:
        info = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _bad_file(path, f"cannot be read as JSON: {exc}") from exc
    kind = info.get("type") if isinstance(info, dict) else None
    if kind == "service_account":
        sa = import_sdk("google.oauth2.service_account", "vertex")
        creds = sa.Credentials.from_service_account_info(info, scopes=[CLOUD_PLATFORM])
        return creds, info.get("project_id")
    if kind == "authorized_user":
        user = import_sdk("google.oauth2.credentials", "vertex")
        creds = user.Credentials.from_authorized_user_info(info, scopes=[CLOUD_PLATFORM])
        return creds, info.get("quota_project_id")
    raise _bad_file(path, f"is of type {kind!r}: only service_account and authorized_user")


def _bad_file(path: str, why: str) -> ConfigError:
    return ConfigError(
        problems=[
            Problem(
                "missing_credentials",
                f"provider 'vertex': the credentials file {path} {why}",
                hint="name a service account key or an authorized-user file, or leave "
                "credentials: out and set GOOGLE_APPLICATION_CREDENTIALS (Application "
                "Default Credentials read every other type)",
            )
        ]
    )


def _refresh(creds: Any) -> None:
    from google.auth.transport.requests import Request as AuthRequest

    creds.refresh(AuthRequest())


def _config(option: str, what: str, variable: str | None) -> ConfigError:
    return ConfigError(
        problems=[
            Problem(
                "missing_credentials" if option == "project" else "invalid_provider_option",
                f"provider 'vertex': {what}",
                hint=f"set providers: vertex: {option}: in agac.yml"
                + (f" or {variable}" if variable else ""),
            )
        ]
    )
