"""Input files in object storage: ``input.path: s3://bucket/prefix/`` (or ``gs://…``,
``az://…``), a prefix or a glob, read through obstore (:mod:`agac.objectstores` opens the
store, with the environment's credentials and ``object_options:``).

- **Listing.** A prefix names every object below it (``s3://lake/events/`` reads
  ``events/date=1/a.parquet`` too); a URL naming one object names that object; a glob
  (``s3://lake/events/*/*.parquet``: ``*`` and ``?`` within a segment, ``**`` across
  segments) the objects it matches. Objects (and folders) whose name starts with ``.``
  or ``_`` (``_SUCCESS``, ``_delta_log/``) are left out, and so are names of no format
  agac reads. Objects are sorted by key, so the order — and every ``<file>:<row>`` key
  — is stable. An object's name in keys and messages is its key below the prefix.
- **Versions.** The listing's ETag, version and size of each object are the input's
  identity (a run's snapshot records them). Every read asks for exactly that version
  (``If-Match`` on the ETag, the version id when the bucket has versions): an object
  changed since it was listed is :class:`~agac.data.files.InputChanged`, never read from
  its new version.
- **Streaming.** Row formats are streamed in one GET; columnar formats are read by
  ranges (the footer, then the column chunks asked for): no object is downloaded whole.
- **Errors** become one ConfigError naming the URL and the fix: ``input_not_found`` (no
  bucket, nothing under the prefix), ``missing_credentials`` (refused or unsigned),
  ``input_unreachable`` (no answer from the endpoint), ``unsupported_input``.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from agac.data.files import InputChanged
from agac.data.formats import InputFormat, format_of
from agac.errors import AgacError, ConfigError, Problem
from agac.objectstores import open_cloud_store, require_obstore

__all__ = ["Bucket", "ObjectEntry", "ObjectFile", "list_objects", "split_url"]

_GLOB_CHARS = frozenset("*?[")
_READ_AHEAD = 1 << 20
_STREAM_CHUNK = 1 << 20
DEFAULT_OPTIONS = {"max_retries": 3, "retry_timeout": 15}
"""Retries of input reads unless ``object_options`` says otherwise: an endpoint that does
not answer is reported in seconds, not after obstore's default three minutes."""


@dataclass(frozen=True)
class ObjectEntry:
    """One listed object: where it is, what keys call it, and the version listed."""

    url: str
    key: str
    name: str
    size: int
    etag: str | None
    version: str | None
    format: InputFormat

    def facts(self) -> dict[str, Any]:
        """What a run's snapshot records of the object."""
        return {"object": self.url, "etag": self.etag, "version": self.version, "size": self.size}


def split_url(url: str) -> tuple[str, str]:
    """(``scheme://bucket``, the key part) of an object URL."""
    scheme, _, rest = url.strip().partition("://")
    bucket, _, key = rest.partition("/")
    return f"{scheme.lower()}://{bucket}", key


class Bucket:
    """One bucket (or container) opened through obstore, with errors translated for an
    input named ``spec``."""

    def __init__(self, root: str, options: Mapping[str, Any] | None, spec: str) -> None:
        self.root = root
        self.spec = spec
        merged = {**DEFAULT_OPTIONS, **dict(options or {})}
        self._ob = require_obstore(f"the input {spec}")
        with self.errors(spec):
            self.store = open_cloud_store(root, merged, f"the input {spec}")

    def url(self, key: str) -> str:
        return f"{self.root}/{key}"

    @contextlib.contextmanager
    def errors(self, where: str, etag: str | None = None) -> Iterator[None]:
        """obstore's errors as agac's: InputChanged for a version gone (with ``etag``),
        ConfigError naming ``where`` and the fix for the rest."""
        from obstore import exceptions as ox

        try:
            yield
        except ox.PreconditionError as exc:
            raise InputChanged(where, f"its ETag is no longer {etag}") from exc
        except ox.NotFoundError as exc:
            if etag is not None:
                raise InputChanged(where, "it was deleted") from exc
            raise _problem(
                "input_not_found",
                f"{where} does not exist ({_first(exc)})",
                "check the bucket and the prefix (keys are case-sensitive)",
            ) from exc
        except (ox.PermissionDeniedError, ox.UnauthenticatedError) as exc:
            raise _credentials(where, exc) from exc
        except ox.UnknownConfigurationKeyError as exc:
            raise _problem(
                "invalid_store",
                f"object_options: {_first(exc)}",
                "object_options takes obstore's configuration keys (endpoint, "
                "region, allow_http, max_retries, …)",
                file="agac.yml",
            ) from exc
        except (ox.BaseError, OSError, ValueError, RuntimeError) as exc:
            raise _translated(where, exc) from exc

    def listing(self, prefix: str) -> list[dict[str, Any]]:
        with self.errors(self.url(prefix)):
            return [m for batch in self._ob.list(self.store, prefix) for m in batch]

    def head(self, key: str) -> dict[str, Any] | None:
        """The object ``key``'s listing entry; None when there is none (a prefix)."""
        from obstore.exceptions import NotFoundError

        try:
            with self.errors(self.url(key)):
                return dict(self._ob.head(self.store, key))
        except ConfigError as exc:
            if isinstance(exc.__cause__, NotFoundError):
                return None
            raise

    def children(self, prefix: str) -> list[str]:
        """Names right below ``prefix`` (folders end with ``/``), for a "did you mean"."""
        with contextlib.suppress(AgacError):
            with self.errors(self.url(prefix)):
                found = self._ob.list_with_delimiter(self.store, prefix or None)
            names = [p[len(prefix) :] for p in found["common_prefixes"]]
            names = [n if n.endswith("/") else n + "/" for n in names]
            return sorted(names + [str(m["path"])[len(prefix) :] for m in found["objects"]])
        return []

    def get(self, entry: ObjectEntry, byte_range: tuple[int, int] | None = None) -> Any:
        """The GET of ``entry``'s listed version (a range of it)."""
        options: dict[str, Any] = {}
        if entry.etag:
            options["if_match"] = entry.etag
        if entry.version:
            options["version"] = entry.version
        if byte_range is not None:
            options["range"] = byte_range
        with self.errors(entry.url, entry.etag or "(none)"):
            return self._ob.get(self.store, entry.key, options=options)


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _problem(code: str, message: str, hint: str, file: str = "") -> ConfigError:
    return ConfigError(problems=[Problem(code, message, file, 0, path="input.path", hint=hint)])


_CREDENTIALS_HINT = (
    "give agac credentials that may read it: AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), GOOGLE_APPLICATION_CREDENTIALS, "
    "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY, or the keys of "
    "object_options in agac.yml"
)


def _credentials(where: str, exc: BaseException) -> ConfigError:
    return _problem(
        "missing_credentials", f"{where}: access refused ({_first(exc)})", _CREDENTIALS_HINT
    )


def _translated(where: str, exc: BaseException) -> ConfigError:
    text = str(exc)
    if "NoSuchBucket" in text or "ContainerNotFound" in text or "bucket does not exist" in text:
        return _problem(
            "input_not_found",
            f"the bucket of {where} does not exist",
            "check the bucket's name (and the region or endpoint it lives in)",
        )
    lowered = text.lower()
    if "169.254.169.254" in text or "credential" in lowered:
        return _problem(
            "missing_credentials",
            f"{where}: agac found no credentials to read "
            "it (none in the environment or object_options, and none from the "
            "machine's metadata service)",
            _CREDENTIALS_HINT,
        )
    if "403" in text or "accessdenied" in lowered or "signature" in lowered:
        return _credentials(where, exc)
    return _problem(
        "input_unreachable",
        f"cannot reach {where} ({_first(exc)})",
        "check the endpoint (AWS_ENDPOINT_URL, or endpoint in object_options), "
        "the network, and AWS_ALLOW_HTTP=true for a plain-HTTP endpoint",
    )


# -- listing ----------------------------------------------------------------------------


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            if pattern.startswith("/", i):
                out[-1] = "(?:.*/)?"
                i += 1
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def _hidden(name: str) -> bool:
    return any(part.startswith((".", "_")) for part in name.split("/"))


def list_objects(
    spec: str,
    options: Mapping[str, Any] | None,
    format: str | None,
) -> tuple[Bucket, list[ObjectEntry]]:
    """The objects ``spec`` names, sorted by key, never empty (see the module docstring)."""
    root, key_part = split_url(spec)
    bucket = Bucket(root, options, spec)
    if _GLOB_CHARS.intersection(key_part):
        first = min(key_part.index(c) for c in _GLOB_CHARS if c in key_part)
        base = key_part[:first].rpartition("/")[0]
        base = base + "/" if base else ""
        regex = _glob_regex(key_part)
        listed = [m for m in bucket.listing(base) if regex.match(str(m["path"]))]
    else:
        exact = bucket.head(key_part) if key_part and not key_part.endswith("/") else None
        if exact is not None:
            parent = key_part.rpartition("/")[0]
            return bucket, _entries(
                bucket, spec, [exact], parent + "/" if parent else "", format, explicit=True
            )
        base = key_part.rstrip("/") + "/" if key_part else ""
        listed = bucket.listing(base)  # obstore lists by path: everything below base
    return bucket, _entries(bucket, spec, listed, base, format)


def _entries(
    bucket: Bucket,
    spec: str,
    listed: Sequence[Mapping[str, Any]],
    base: str,
    format: str | None,
    explicit: bool = False,
) -> list[ObjectEntry]:
    entries: list[ObjectEntry] = []
    skipped = 0
    for meta in sorted(listed, key=lambda m: str(m["path"])):
        key = str(meta["path"])
        name = key[len(base) :]
        if not explicit and _hidden(name):
            continue
        fmt = format_of(name.rpartition("/")[2], format)
        if fmt is None:
            skipped += 1
            continue
        entries.append(
            ObjectEntry(
                bucket.url(key),
                key,
                name,
                int(meta["size"]),
                _text(meta.get("e_tag")),
                _text(meta.get("version")),
                fmt,
            )
        )
    if entries:
        return entries
    if skipped:
        raise _problem(
            "unsupported_input",
            f"input {spec!r} holds no object agac can read ({skipped} of other formats)",
            "name the format with input.format: "
            "when the names have no extension (part-0000), or narrow the prefix",
        )
    raise _problem("input_not_found", f"input {spec!r} names no objects", _nearby(bucket, base))


def _nearby(bucket: Bucket, base: str) -> str:
    """What is there, near a prefix that holds nothing: a "did you mean"."""
    parent, _, last = base.rstrip("/").rpartition("/")
    parent = parent + "/" if parent else ""
    names = bucket.children(parent)
    close = difflib.get_close_matches(last, [n.rstrip("/") for n in names], n=3, cutoff=0.5)
    if close:
        return (
            "did you mean " + " or ".join(repr(bucket.url(parent + c) + "/") for c in close) + "?"
        )
    shown = ", ".join(names[:8]) or "nothing"
    return (
        f"{bucket.url(parent)} holds: {shown}; a prefix is listed as written "
        "(case-sensitive), a glob needs * or ?"
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


# -- reading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectFile:
    """A listed object as an :class:`~agac.data.files.InputFile`: every read asks for the
    version listed."""

    bucket: Bucket = field(compare=False)
    entry: ObjectEntry

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def where(self) -> str:
        return self.entry.url

    @property
    def format(self) -> InputFormat:
        return self.entry.format

    def open_bytes(self) -> IO[bytes]:
        if self.entry.size == 0:
            return io.BytesIO(b"")
        result = self.bucket.get(self.entry)
        return io.BufferedReader(
            _Stream(self, result.stream(min_chunk_size=_STREAM_CHUNK)), _STREAM_CHUNK
        )

    def open_columnar(self) -> Any:
        return RangeReader(self)


class _Stream(io.RawIOBase):
    """The chunks of one GET as a raw stream; obstore's errors translated."""

    def __init__(self, file: ObjectFile, chunks: Any) -> None:
        self._file = file
        self._chunks = chunks
        self._left = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            with self._file.bucket.errors(self._file.where, self._file.entry.etag):
                chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = memoryview(bytes(chunk))
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


class RangeReader(io.RawIOBase):
    """A seekable file over one object's listed version, read by ranged GETs (at least
    1 MiB each, so pyarrow's small reads of a footer cost one request)."""

    def __init__(self, file: ObjectFile) -> None:
        self._file = file
        self._size = file.entry.size
        self._pos = 0
        self._buffer = b""
        self._buffer_at = 0
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._size - self._pos
        size = max(0, min(size, self._size - self._pos))
        if not size:
            return b""
        start, end = self._pos, self._pos + size
        if not (self._buffer_at <= start and end <= self._buffer_at + len(self._buffer)):
            self._fill(start, max(end, min(start + _READ_AHEAD, self._size)))
        data = self._buffer[start - self._buffer_at : end - self._buffer_at]
        self._pos = end
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _fill(self, start: int, end: int) -> None:
        result = self._file.bucket.get(self._file.entry, (start, end))
        with self._file.bucket.errors(self._file.where, self._file.entry.etag):
            self._buffer = bytes(result.bytes())
        self._buffer_at = start
        self.requests += 1
