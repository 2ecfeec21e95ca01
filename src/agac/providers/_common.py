"""Helpers shared by the built-in adapters: settings resolution, lazy SDK import,
reading fields off SDK objects and wire dicts alike, structured-output fallback and
streaming batch input to a temporary file.

Nothing here imports a provider SDK; each adapter imports its own on construction.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from agac.errors import BatchNotEnded, ConfigError, FatalError, Problem, UnsupportedError
from agac.installing import install_hint
from agac.media import Attachment, write_base64
from agac.providers.base import BatchHandle, BatchStatus, ProviderSettings, Request

__all__ = [
    "EMULATOR_HINT",
    "SCHEMA_NAME",
    "SpooledBatch",
    "as_int",
    "dump_line",
    "ended_or_raise",
    "enum_str",
    "fallback_system",
    "import_sdk",
    "parse_json",
    "pick",
    "read_lines",
    "require_custom_id",
    "resolve_api_key",
    "resolve_base_url",
    "spool_jsonl",
    "spool_jsonl_async",
    "stopwatch",
    "strict_compatible",
    "url_path",
    "url_segment",
]

EMULATOR_HINT = 'or run against the emulator: eval "$(agac emulator env --port 8765)"'
SCHEMA_NAME = "answer"


def import_sdk(module: str, extra: str) -> Any:
    """Import a provider SDK, or fail with ``provider_not_installed`` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        problem = Problem(
            "provider_not_installed",
            f"the {extra} provider needs the {module!r} package",
            hint=install_hint(extra),
        )
        raise ConfigError(problems=[problem]) from exc


def resolve_api_key(settings: ProviderSettings, env_names: tuple[str, ...]) -> str:
    """The API key from agac.yml, else the first of ``env_names`` that is set.

    Raises UnsupportedError (code ``missing_credentials``) naming the variables, so a
    run stops before any paid call instead of failing every unit one by one.
    """
    if settings.api_key:
        return settings.api_key
    for name in env_names:
        value = os.environ.get(name)
        if value:
            return value
    names = " or ".join(env_names)
    raise UnsupportedError(
        f"no API key for provider {settings.name!r}: set {names}, {EMULATOR_HINT}",
        code="missing_credentials",
    )


def resolve_base_url(settings: ProviderSettings, env_name: str) -> str | None:
    """The base URL from agac.yml, else the SDK's own environment variable, else None
    (the SDK's default endpoint)."""
    return settings.base_url or os.environ.get(env_name) or None


def pick(obj: Any, *path: str) -> Any:
    """Read a field path off an SDK object or a wire dict, ``None`` when absent.

    Batch result files arrive as JSON while live answers arrive as SDK objects; one
    normalizer reads both. Dict keys are tried as written and in camelCase (Gemini's
    wire form), attributes by their snake_case name.
    """
    for name in path:
        if obj is None:
            return None
        if isinstance(obj, dict):
            value = obj.get(name)
            if value is None and "_" in name:
                value = obj.get(_CAMEL.get(name) or _camel(name))
            obj = value
        else:
            obj = getattr(obj, name, None)
    return obj


_CAMEL: dict[str, str] = {}
"""snake_case field names already turned into camelCase (a few dozen)."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    found = _CAMEL[name] = head + "".join(p.title() for p in rest)
    return found


def enum_str(value: Any) -> str | None:
    """An SDK enum member or a plain string, as the provider's own word."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def as_int(value: Any) -> int:
    """Token counts: ints, numeric strings (Gemini int64 on the wire) or absent."""
    if value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def parse_json(text: str | None) -> Any:
    """The JSON value of an answer, or None when it does not parse.

    The engine validates against the action's schema itself; a non-parsing answer is
    its ``schema_invalid`` case, not an adapter error.
    """
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        stripped = text.strip()
        if stripped.startswith("```"):
            # Models in JSON-mode fallback sometimes fence their answer.
            body = stripped.strip("`")
            body = body.removeprefix("json")
            try:
                return json.loads(body)
            except ValueError:
                return None
        return None


def fallback_system(request: Request) -> str:
    """The system prompt with the schema spelled out, for models that cannot take a
    schema natively (JSON mode plus instruction)."""
    instruction = (
        "Answer with one JSON value, and nothing else, that conforms to this JSON Schema:\n"
        + json.dumps(request.schema, ensure_ascii=False)
    )
    return f"{request.system}\n\n{instruction}" if request.system else instruction


def strict_compatible(schema: Any) -> bool:
    """Whether OpenAI-style ``strict: true`` can take this schema unchanged.

    Strict mode needs every object to list all its properties as required and to set
    ``additionalProperties: false``. We never rewrite the action's schema (that would
    change its meaning); a schema that does not qualify is sent with ``strict: false``.
    """
    if isinstance(schema, list):
        return all(strict_compatible(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties", True) is not False:
            return False
        if set(schema.get("required") or []) != set(props):
            return False
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions", "patternProperties"):
            children = list(value.values()) if isinstance(value, dict) else []
        elif key in ("items", "anyOf", "allOf", "oneOf", "not", "prefixItems"):
            children = [value]
        else:
            continue
        if not all(strict_compatible(child) for child in children):
            return False
    return True


async def read_lines(path: Path, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
    """The non-empty lines of a local file, read in chunks off the event loop."""
    fh = await asyncio.to_thread(path.open, "rb")
    try:
        rest = b""
        while chunk := await asyncio.to_thread(fh.read, chunk_size):
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    yield line
        if rest.strip():
            yield rest
    finally:
        fh.close()


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """Measure a block's wall time in milliseconds into ``box[0]``."""
    box = [0.0]
    start = time.perf_counter()
    try:
        yield box
    finally:
        box[0] = (time.perf_counter() - start) * 1000.0


@dataclass
class SpooledBatch:
    """A JSONL batch input written to disk: its path, line count and size in bytes."""

    path: Path
    count: int
    size: int

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


Line = dict[str, Any] | bytes | list[bytes | Attachment]
"""A batch line: a dict, bytes already serialized (without the newline), or pieces —
bytes with an :class:`~agac.media.Attachment` wherever a file's base64 goes."""


def spool_jsonl(
    lines: Iterable[Line], *, max_count: int, max_bytes: int, provider: str
) -> SpooledBatch:
    """Write batch lines to a temporary ``.jsonl`` file, one at a time.

    Lines are dicts, bytes already serialized (without the newline), or pieces: bytes
    with an :class:`~agac.media.Attachment` between them wherever a file's base64 goes
    (:class:`agac.providers._attachments.Blobs`), streamed from the file into the batch
    file a chunk at a time and checked against its hash (AttachmentError
    ``attachment_changed`` when it is not those bytes: nothing is sent). Big batches
    never exist as one string in memory. Exceeding the provider's limits
    raises UnsupportedError (code ``batch_too_large``): the engine splits shards by
    these limits before it submits, so reaching them here is a planning bug.
    """
    with _Spool(max_count, max_bytes, provider) as spool:
        for line in lines:
            spool.add(line)
    return spool.done()


async def spool_jsonl_async(
    lines: AsyncIterator[Line], *, max_count: int, max_bytes: int, provider: str
) -> SpooledBatch:
    """:func:`spool_jsonl` for lines made by a coroutine (one that uploads files on the
    way: Gemini's Files API)."""
    with _Spool(max_count, max_bytes, provider) as spool:
        async for line in lines:
            spool.add(line)
    return spool.done()


class _Spool:
    """One batch file being written: a line at a time, removed if writing fails."""

    def __init__(self, max_count: int, max_bytes: int, provider: str) -> None:
        fd, name = tempfile.mkstemp(prefix="agac-batch-", suffix=".jsonl")
        self.path = Path(name)
        self._fh = os.fdopen(fd, "wb")
        self.count = self.size = 0
        self._limits = (max_count, max_bytes, provider)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._fh.close()
        if kind is not None:
            self.path.unlink(missing_ok=True)

    def add(self, line: Line) -> None:
        fh = self._fh
        if isinstance(line, list):
            for piece in line:
                if isinstance(piece, bytes):
                    fh.write(piece)
                    self.size += len(piece)
                else:
                    self.size += write_base64(piece, fh)
            fh.write(b"\n")
            self.size += 1
        else:
            data = line if isinstance(line, bytes) else dump_line(line)
            fh.write(data + b"\n")
            self.size += len(data) + 1
        self.count += 1
        max_count, max_bytes, provider = self._limits
        if self.count > max_count or self.size > max_bytes:
            raise UnsupportedError(
                f"{provider} batch exceeds {max_count} requests or {max_bytes} bytes",
                code="batch_too_large",
            )

    def done(self) -> SpooledBatch:
        if self.count == 0:
            self.path.unlink(missing_ok=True)
            raise ValueError("a batch needs at least one request")
        return SpooledBatch(self.path, self.count, self.size)


def dump_line(line: dict[str, Any]) -> bytes:
    """One compact JSONL line, without its newline."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode()


def require_custom_id(request: Request) -> str:
    """The request's custom_id; batch requests without one cannot be matched back."""
    if not request.custom_id:
        raise ValueError("every batch request needs a custom_id")
    return request.custom_id


def url_path(name: str) -> str:
    """A model name as a URL path: each ``/``-separated segment percent-encoded (``:``,
    ``?``, ``#``, ``%`` and anything outside ``A-Za-z0-9@+-._~`` included), so a name can
    only ever name a model, never another path or a query of the provider's host.

    Validation refuses such names already (``invalid_model``); a name that reaches an
    adapter another way (a plugin, the Python API's request objects) and holds an empty,
    ``.`` or ``..`` segment is refused here, since HTTP clients normalize dot segments
    away before sending (no encoding keeps them in place)."""
    return "/".join(_segment(segment, name) for segment in name.split("/"))


def url_segment(name: str) -> str:
    """A model name as one URL path segment: as :func:`url_path`, with ``/`` encoded too
    (how the Anthropic SDK fills ``/v1/models/{model_id}``)."""
    return _segment(name, name, safe="@+-._~:")


def _segment(segment: str, name: str, safe: str = "@+-._~") -> str:
    if segment in ("", ".", ".."):
        raise FatalError(
            f"model name {name!r} is not a model name: it holds an empty, '.' or "
            "'..' segment, which would send the request to another URL"
        )
    return quote(segment, safe=safe)


def ended_or_raise(handle: BatchHandle, status: BatchStatus) -> None:
    """What every adapter's ``batch_results`` checks of the batch it fetched right before
    reading (B7): results are read only from an ``ended`` batch; a batch now reported
    failed, expired or cancelled — or not ended at all — raises
    :class:`~agac.errors.BatchNotEnded` before anything is read."""
    if status.state != "ended":
        raise BatchNotEnded(
            f"batch {handle.id} is {status.raw_status or status.state} at the "
            "provider: there are no results to read",
            state=status.state,
            raw_status=status.raw_status,
        )
