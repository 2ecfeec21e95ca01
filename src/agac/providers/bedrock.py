"""Amazon Bedrock (``pip install -e '.[bedrock]'``): model ``bedrock/<model id or inference
profile>`` (``bedrock/anthropic.claude-3-5-haiku-20241022-v1:0``,
``bedrock/us.amazon.nova-lite-v1:0``, an ARN).

Everything goes through boto3 with the standard AWS credential chain (environment,
``AWS_PROFILE`` and ``~/.aws``, SSO, a role, the instance's metadata) and region
(``providers: bedrock: region:``, else ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / the
profile's); endpoints as boto3 reads them (``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``,
``AWS_ENDPOINT_URL_BEDROCK``, ``AWS_ENDPOINT_URL_S3``). boto3 is synchronous: its calls run
on a thread pool of the adapter's own, as wide as the connections the run asks for.
There is no lean transport: every call needs SigV4 signing with credentials the chain may
refresh at any time (SSO, assumed roles), which is botocore's work; a second HTTP client
around botocore's signer would save nothing that matters next to a model's latency.

Live calls use the Converse API: one body for every model family
(:mod:`agac.providers._converse_wire`), images and PDFs as Converse blocks, a schema as a
forced ``answer`` tool, cache points for the families that cache (Anthropic, Nova).

Batches are model invocation jobs over S3 (``providers: bedrock: batch_bucket: s3://…,
role_arn: …``):

- the lines ``{"recordId", "modelInput"}`` (``modelInput`` a Converse body: the job's
  ``modelInvocationType`` is ``Converse``) are written to
  ``<batch_bucket>/<job name>/input/records.jsonl``; the job writes its output under
  ``<batch_bucket>/<job name>/output/<job id>/``: ``records.jsonl.out`` (``{"recordId",
  "modelInput", "modelOutput" | "error"}``, in no order) and ``manifest.json.out`` (the
  record and token counts);
- the job is created with a name and a client token both derived from agac's batch key:
  a create repeated after a crash is the same job at Bedrock (never a second), and a
  submission whose answer was lost is found again by its name (B2);
- statuses: ``Submitted``, ``Validating``, ``Scheduled``, ``InProgress`` (running),
  ``Completed`` and ``PartiallyCompleted`` (ended: what it answered is read, the records
  it did not process are missing and sent again, B6), ``Failed`` (failed), ``Stopping``
  (cancelling), ``Stopped`` (cancelled) and ``Expired`` (expired: nothing read, B7); any
  other is running (B9);
- limits: at least 100 and at most 50,000 records a job (Bedrock's default quotas), a
  1 GB file; agac splits above them (B1) and, below the minimum, sends the file's records
  live or holds them (``below_minimum``). A create refused for the account's quota of
  jobs in flight (``ServiceQuotaExceededException``) waits (B12), never fails the file;
- the input object is deleted once the job has ended (``batch_input: keep`` keeps it);
  the output stays in the user's bucket.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import os
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from agac.errors import ConfigError, Problem, ProviderError, UnsupportedError, WaitError
from agac.media import read_verified
from agac.providers._attachments import Blobs
from agac.providers._common import (
    EMULATOR_HINT,
    SpooledBatch,
    as_int,
    dump_line,
    ended_or_raise,
    require_custom_id,
    spool_jsonl,
    stopwatch,
)
from agac.providers._converse_wire import bedrock_cache_minimum, converse_params, converse_response
from agac.providers._errors import classify, connection_error, retry_after_seconds
from agac.providers.adapter import ProviderBase
from agac.providers.base import (
    AttachmentLimits,
    BatchHandle,
    BatchState,
    BatchStatus,
    BilledWork,
    ProviderSettings,
    Request,
    Response,
    Result,
    Usage,
)
from agac.providers.options import TIMEOUT, Option
from agac.providers.spec import BatchSpec, ProviderSpec

__all__ = [
    "BEDROCK_STATES",
    "BatchPlace",
    "BedrockProvider",
    "bedrock_status",
    "client_token",
    "job_name",
]

BEDROCK_STATES: dict[str, BatchState] = {
    "Submitted": "running",
    "Validating": "running",
    "Scheduled": "running",
    "InProgress": "running",
    "Completed": "ended",
    # Not every record was processed in the job's time: the output holds what was; the
    # rest are missing from it and sent again (B6).
    "PartiallyCompleted": "ended",
    "Failed": "failed",
    "Stopping": "cancelling",
    "Stopped": "cancelled",
    # Scheduled but never started before its timeout: nothing to read (B7).
    "Expired": "expired",
}

#: Bedrock's default quotas of a batch inference job: records (the fewest and the most)
#: and the bytes of one input file.
MIN_RECORDS = 100
MAX_RECORDS = 50_000
MAX_FILE_BYTES = 1024 * 1024 * 1024
#: Seconds before a create refused for the quota of jobs in flight is tried again.
QUOTA_WAIT = 300.0
#: The input file's name under the job's input prefix.
INPUT_NAME = "records.jsonl"

MB = 1024 * 1024
BEDROCK_LIMITS = AttachmentLimits(
    kinds=frozenset({"image", "pdf"}),
    max_file_bytes={"image": 3 * MB + 3 * MB // 4, "pdf": 4 * MB + MB // 2},
    max_files=20,
)
"""Converse: images up to 3.75 MB (20 a request), documents up to 4.5 MB."""

BEDROCK_OPTIONS = (
    TIMEOUT,
    Option("region", "text", "the AWS region (the credential chain's when not set)"),
    Option(
        "batch_bucket",
        "text",
        "the S3 prefix batch jobs read their input from and write their output to, "
        "`s3://bucket/prefix` (needed for `run_mode: batch`)",
    ),
    Option(
        "role_arn",
        "text",
        "the IAM service role Bedrock assumes to read and write `batch_bucket` "
        "(needed for `run_mode: batch`)",
    ),
    Option(
        "below_minimum",
        "choice",
        "a file with fewer records than a job's minimum: `live` sends them as live "
        "calls, `wait` holds them (the run waits, naming the file)",
        default="live",
        choices=("live", "wait"),
    ),
    Option(
        "batch_min_records",
        "integer",
        "the fewest records Bedrock takes in a job (its quota, when raised or lowered)",
        default=MIN_RECORDS,
        minimum=1,
    ),
    Option(
        "batch_max_records",
        "integer",
        "the most records Bedrock takes in a job (its quota); a larger file is split",
        default=MAX_RECORDS,
        minimum=1,
    ),
    Option(
        "batch_input",
        "choice",
        "`delete` the input object once its job has ended, or `keep` it",
        default="delete",
        choices=("delete", "keep"),
    ),
    Option(
        "job_timeout",
        "seconds",
        "how long a job may run before Bedrock ends it, in whole hours from 24 to 168 "
        "(a shorter or longer one is taken as the nearest)",
        default="24h",
    ),
)


def bedrock_status(job: Any) -> BatchStatus:
    """Normalize a model invocation job; an unknown status is running (B9)."""
    raw = str(job.get("status") or "")
    state = BEDROCK_STATES.get(raw)
    return BatchStatus(
        state=state or "running",
        raw_status=raw,
        request_count=as_int(job.get("totalRecordCount")),
        completed=as_int(job.get("successRecordCount")),
        failed=as_int(job.get("errorRecordCount")),
        known=state is not None,
    )


def job_name(key: str) -> str:
    """The job name of batch ``key`` (Bedrock: letters, digits and ``-``, 63 at most)."""
    name = "agac-" + re.sub(r"[^A-Za-z0-9]+", "-", key).strip("-")
    if len(name) <= 63:
        return name
    return "agac-" + hashlib.sha256(key.encode()).hexdigest()[:58]


def client_token(key: str) -> str:
    """The client request token of batch ``key``'s create: the same key is the same job."""
    return hashlib.sha256(f"agac-batch:{key}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class BatchPlace:
    """Where one job's objects lie: the bucket, the job's folder (its name under the
    configured prefix) and the keys below it."""

    bucket: str
    folder: str

    @classmethod
    def of(cls, root: str, name: str) -> BatchPlace:
        parts = urlsplit(root)
        if parts.scheme != "s3" or not parts.netloc:
            raise _config("batch_bucket", f"{root!r} is not an s3://bucket/prefix address")
        prefix = parts.path.strip("/")
        return cls(parts.netloc, f"{prefix}/{name}" if prefix else name)

    @property
    def input_key(self) -> str:
        return f"{self.folder}/input/{INPUT_NAME}"

    def uri(self, what: str) -> str:
        return f"s3://{self.bucket}/{self.folder}/{what}/"

    def output_prefix(self, job_arn: str) -> str:
        """The output folder of the job: Bedrock puts it under the job's id."""
        return f"{self.folder}/output/{job_arn.rsplit('/', 1)[-1]}/"


class BedrockProvider(ProviderBase):
    """Bedrock Converse and model invocation jobs; see the module docstring."""

    spec = ProviderSpec(
        name="bedrock",
        extra="bedrock",
        sdk_module="boto3",
        # Redacted wherever agac writes; the chain finds credentials without them too.
        credential_env=(
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_BEARER_TOKEN_BEDROCK",
        ),
        ambient_credentials="boto3",
        batch=BatchSpec(
            input="file",
            max_requests=MAX_RECORDS,
            max_bytes=MAX_FILE_BYTES,
            min_requests=MIN_RECORDS,
        ),
        cache_kinds=("marker",),
        cache_minimum=bedrock_cache_minimum,
        attachments=BEDROCK_LIMITS,
        vision=True,
        options=BEDROCK_OPTIONS,
        function_tools=True,
    )

    def __init__(self, settings: ProviderSettings) -> None:
        options = settings.options
        # boto3 reads AWS_DEFAULT_REGION and the profile; AWS_REGION is what the other
        # AWS SDKs (and many users) set.
        self._region = str(options.get("region") or os.environ.get("AWS_REGION") or "") or None
        self._bucket = str(options.get("batch_bucket") or "")
        self._role = str(options.get("role_arn") or "")
        self._keep_input = options.get("batch_input") == "keep"
        hours = math.ceil(float(options.get("job_timeout") or 86_400) / 3600)
        self._job_hours = min(168, max(24, hours))
        self.below_minimum: Literal["live", "wait"] = (
            "wait" if options.get("below_minimum") == "wait" else "live"
        )
        self.min_records = int(options.get("batch_min_records") or MIN_RECORDS)
        self.max_records = int(options.get("batch_max_records") or MAX_RECORDS)
        if self.min_records > self.max_records:
            raise _config(
                "batch_min_records",
                f"batch_min_records ({self.min_records}) is above batch_max_records "
                f"({self.max_records}): no job could be sent",
            )
        self._workers = max(8, settings.connections)
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="agac-bedrock")
        super().__init__(settings)
        self._client  # noqa: B018 - region and credentials are checked before any call

    def _resolve_key(self, settings: ProviderSettings) -> str:
        return ""  # the AWS credential chain, read by boto3

    # -- clients -------------------------------------------------------------

    def _make_client(self) -> Any:
        """boto3's clients (runtime, control plane, S3) over one session, each made on
        first use: retries off (the engine owns them), a connection per worker thread.
        The parsed service models are shared by every adapter of the process."""
        import botocore.session

        botocore_config = self._sdk_module_botocore().Config
        core = botocore.session.Session()
        core.register_component("data_loader", _shared_loader(core))
        session = self._sdk.session.Session(botocore_session=core, region_name=self._region)
        if session.region_name is None:
            raise _config("region", "no AWS region is set")
        if session.get_credentials() is None:
            raise ConfigError(
                problems=[
                    Problem(
                        "missing_credentials",
                        "provider 'bedrock' found no AWS credentials",
                        hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE, "
                        "or sign in (aws sso login), " + EMULATOR_HINT,
                    )
                ]
            )
        config = botocore_config(
            retries={"total_max_attempts": 1},
            max_pool_connections=self._workers,
            read_timeout=self._timeout,
            connect_timeout=min(self._timeout, 60.0),
        )
        return _Clients(session, config)

    @staticmethod
    def _sdk_module_botocore() -> Any:
        import botocore.config

        return botocore.config

    async def _call(self, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        """One boto3 call on the adapter's threads, its errors translated."""
        loop = asyncio.get_running_loop()
        with self._translate_errors():
            return await loop.run_in_executor(self._pool, functools.partial(fn, **kwargs))

    # -- errors --------------------------------------------------------------

    def _sdk_error(self, exc: Exception) -> ProviderError | None:
        import botocore.exceptions as bx

        if isinstance(exc, bx.ClientError):
            return self._client_error(exc.response)
        if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
            return UnsupportedError(
                f"bedrock: {exc}: set AWS credentials, {EMULATOR_HINT}",
                code="missing_credentials",
            )
        if isinstance(exc, bx.HTTPClientError | bx.ConnectionError):
            return connection_error(self.name, exc)
        return None

    def _client_error(self, response: dict[str, Any]) -> ProviderError:
        meta = response.get("ResponseMetadata") or {}
        err = response.get("Error") or {}
        code = str(err.get("Code") or "") or None
        status = as_int(meta.get("HTTPStatusCode")) or None
        hint = retry_after_seconds(meta.get("HTTPHeaders"))
        found = classify(
            self.name,
            status,
            message=err.get("Message"),
            retry_after=hint,
            code=code,
            kind=code,
            request_id=meta.get("RequestId"),
        )
        if code == "ServiceQuotaExceededException":
            return WaitError(
                f"{found} (the account's quota of batch jobs in flight is full: agac creates "
                "the job again when earlier jobs have ended)",
                retry_after=hint or QUOTA_WAIT,
                status=status,
                code=code,
            )
        return found

    def _sdk_root_errors(self) -> tuple[type[BaseException], ...]:
        import botocore.exceptions as bx

        return (bx.BotoCoreError, bx.ClientError)

    # -- live ----------------------------------------------------------------

    async def complete(self, request: Request) -> Response:
        params = converse_params(request, read_verified)
        with stopwatch() as took:
            answer = await self._call(
                self._client.runtime.converse, modelId=request.model, **params
            )
        meta = answer.get("ResponseMetadata") or {}
        return converse_response(
            answer,
            latency_ms=took[0],
            request_id=meta.get("RequestId"),
            offered=frozenset(t.name for t in request.tools),
            model=request.model,
        )

    # -- batch ---------------------------------------------------------------

    def _place(self, key: str) -> BatchPlace:
        if not self._bucket or not self._role:
            missing = "batch_bucket" if not self._bucket else "role_arn"
            raise _config(missing, "batch jobs need an S3 prefix and an IAM service role")
        return BatchPlace.of(self._bucket, job_name(key))

    async def submit_batch(self, requests: Iterable[Request], key: str) -> BatchHandle:
        """Write the lines to S3, then create the job (its name and token from ``key``)."""
        place = self._place(key)
        model: list[str] = []
        spooled = spool_jsonl(
            _lines(requests, model),
            max_count=self.max_records,
            max_bytes=MAX_FILE_BYTES,
            provider=self.name,
        )
        try:
            if spooled.count < self.min_records:
                raise UnsupportedError(
                    f"bedrock: a batch job takes at least {self.min_records} records; this "
                    f"one has {spooled.count}",
                    code="batch_too_small",
                )
            await self._upload(spooled, place)
        finally:
            spooled.discard()
        created = await self._call(
            self._client.control.create_model_invocation_job,
            jobName=job_name(key),
            roleArn=self._role,
            clientRequestToken=client_token(key),
            modelId=model[0],
            inputDataConfig={
                "s3InputDataConfig": {"s3Uri": place.uri("input"), "s3InputFormat": "JSONL"}
            },
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": place.uri("output")}},
            timeoutDurationInHours=self._job_hours,
            modelInvocationType="Converse",
        )
        meta = {"request_count": spooled.count, "folder": place.folder, "bucket": place.bucket}
        return BatchHandle(self.name, str(created["jobArn"]), key, meta)

    async def _upload(self, spooled: SpooledBatch, place: BatchPlace) -> None:
        await self._call(
            self._client.s3.upload_file,
            Filename=str(spooled.path),
            Bucket=place.bucket,
            Key=place.input_key,
        )

    async def _job(self, handle: BatchHandle) -> dict[str, Any]:
        job: dict[str, Any] = await self._call(
            self._client.control.get_model_invocation_job, jobIdentifier=handle.id
        )
        return job

    async def poll_batch(self, handle: BatchHandle) -> BatchStatus:
        """The job's status; once it has ended, its input object is deleted (unless kept)."""
        job = await self._job(handle)
        status = bedrock_status(job)
        if status.state in ("ended", "failed", "cancelled", "expired"):
            await self._drop_input(handle, job)
        return status

    async def _drop_input(self, handle: BatchHandle, job: dict[str, Any]) -> None:
        if self._keep_input:
            return
        place = self._job_place(handle, job)
        await self._call(self._client.s3.delete_object, Bucket=place.bucket, Key=place.input_key)

    def _job_place(self, handle: BatchHandle, job: dict[str, Any]) -> BatchPlace:
        """Where the job's objects lie, from the job itself (its output address)."""
        uri = str(job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"])
        parts = urlsplit(uri)
        return BatchPlace(parts.netloc, parts.path.strip("/").removesuffix("/output"))

    async def batch_results(self, handle: BatchHandle) -> AsyncIterator[Result]:
        """Each output line by its recordId; a record missing from the output is not
        returned (B6). Nothing is read unless the job has ended when fetched here (B7)."""
        job = await self._job(handle)
        ended_or_raise(handle, bedrock_status(job))
        place = self._job_place(handle, job)
        for key in await self._output_keys(place, handle.id):
            async for line in self._object_lines(place.bucket, key):
                yield self._result(json.loads(line))

    async def _output_keys(self, place: BatchPlace, job_arn: str) -> list[str]:
        prefix = place.output_prefix(job_arn)
        listed = await self._call(
            self._client.s3.list_objects_v2, Bucket=place.bucket, Prefix=prefix
        )
        keys = [str(o["Key"]) for o in listed.get("Contents") or ()]
        return sorted(k for k in keys if k.endswith(".jsonl.out"))

    async def _object_lines(self, bucket: str, key: str) -> AsyncIterator[bytes]:
        got = await self._call(self._client.s3.get_object, Bucket=bucket, Key=key)
        body = got["Body"]
        try:
            rest = b""
            while chunk := await self._call(body.read, amt=1 << 20):
                *lines, rest = (rest + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line
            if rest.strip():
                yield rest
        finally:
            body.close()

    def _result(self, line: dict[str, Any]) -> Result:
        record = str(line.get("recordId") or "")
        error = line.get("error")
        output = line.get("modelOutput")
        if error or not isinstance(output, dict):
            return Result(record, "errored", error=self._record_error(error))
        answer = converse_response(output, latency_ms=0.0, service_tier="batch")
        return Result(record, "succeeded", response=answer)

    def _record_error(self, error: Any) -> ProviderError:
        """A record's ``{"errorCode", "errorMessage"}``, classified like an HTTP answer."""
        fields = error if isinstance(error, dict) else {}
        code = fields.get("errorCode")
        status = as_int(code) if str(code or "").isdigit() else 400
        return classify(
            self.name,
            status,
            message=str(fields.get("errorMessage") or "the record has no output"),
            code=str(code) if code is not None else None,
        )

    async def billed_work(self, handle: BatchHandle) -> BilledWork:
        """The records the job answered and their tokens, from its manifest when it
        wrote one (else its counts; agac estimates the tokens)."""
        job = await self._job(handle)
        status = bedrock_status(job)
        manifest = await self._manifest(self._job_place(handle, job), handle.id)
        if manifest is None:
            return BilledWork(status, status.completed)
        usage = Usage(
            input_tokens=as_int(manifest.get("inputTokenCount")),
            output_tokens=as_int(manifest.get("outputTokenCount")),
        )
        return BilledWork(status, as_int(manifest.get("successRecordCount")), usage)

    async def _manifest(self, place: BatchPlace, job_arn: str) -> dict[str, Any] | None:
        key = place.output_prefix(job_arn) + "manifest.json.out"
        import botocore.exceptions as bx

        try:
            got = await asyncio.get_running_loop().run_in_executor(
                self._pool,
                functools.partial(self._client.s3.get_object, Bucket=place.bucket, Key=key),
            )
        except bx.ClientError as exc:
            if (exc.response.get("Error") or {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._client_error(exc.response) from exc
        body = await self._call(got["Body"].read)
        found = json.loads(body or b"{}")
        return found if isinstance(found, dict) else None

    async def cancel_batch(self, handle: BatchHandle) -> None:
        await self._call(self._client.control.stop_model_invocation_job, jobIdentifier=handle.id)

    async def find_batch(self, key: str) -> BatchHandle | None:
        """The job named after ``key`` (B2): its name is unique in the account and region."""
        name = job_name(key)
        listed = await self._call(
            self._client.control.list_model_invocation_jobs, nameContains=name, maxResults=100
        )
        for job in listed.get("invocationJobSummaries") or ():
            if job.get("jobName") == name:
                meta = {"request_count": as_int(job.get("totalRecordCount"))}
                return BatchHandle(self.name, str(job["jobArn"]), key, meta)
        return None

    async def aclose(self) -> None:
        if self._sdk_client is not None:
            self._sdk_client.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Clients:
    """boto3's runtime, control-plane and S3 clients of one session, each made when it is
    first asked for (on the event loop's thread): a live-only run never loads the
    control plane's or S3's service model."""

    def __init__(self, session: Any, config: Any) -> None:
        self._session = session
        self._config = config
        self._made: dict[str, Any] = {}

    def _get(self, service: str) -> Any:
        client = self._made.get(service)
        if client is None:
            client = self._made[service] = self._session.client(service, config=self._config)
        return client

    @property
    def runtime(self) -> Any:
        return self._get("bedrock-runtime")

    @property
    def control(self) -> Any:
        return self._get("bedrock")

    @property
    def s3(self) -> Any:
        return self._get("s3")

    def close(self) -> None:
        for client in self._made.values():
            client.close()


_LOADER: list[Any] = []


def _shared_loader(core: Any) -> Any:
    """One botocore data loader for the process (it caches the service models it has
    parsed; making a client otherwise parses its model again). boto3 adds its own data
    folder to a session's loader: kept once."""
    if not _LOADER:
        _LOADER.append(core.get_component("data_loader"))
    loader = _LOADER[0]
    paths = loader.search_paths
    paths[:] = list(dict.fromkeys(paths))
    return loader


def _lines(requests: Iterable[Request], model: list[str]) -> Iterator[list[bytes | Any]]:
    """``{"recordId", "modelInput"}`` lines, each attachment's base64 streamed in place;
    the first request's model is put in ``model`` (a job runs one model)."""
    blobs = Blobs()
    for request in requests:
        if not model:
            model.append(request.model)
        line = {
            "recordId": require_custom_id(request),
            "modelInput": converse_params(request, blobs.token),
        }
        yield blobs.pieces(dump_line(line))


def _config(option: str, what: str) -> ConfigError:
    return ConfigError(
        problems=[
            Problem(
                "missing_credentials" if option == "region" else "invalid_provider_option",
                f"provider 'bedrock': {what}",
                hint=f"set providers: bedrock: {option}: in agac.yml"
                + (" or AWS_REGION" if option == "region" else ""),
            )
        ]
    )
