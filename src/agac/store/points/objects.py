"""The objects a storage point is made of, and the two places that hold them.

A storage point needs four operations from wherever it keeps its objects (docs/guarantees.md, Storage points):
read an object with its ETag and its Last-Modified time by the server's clock, create one
only if it is absent (``If-None-Match: *``), replace one only if it is unchanged since it
was read (``If-Match``), and delete. :class:`Objects` is that contract;
:class:`CloudObjects` speaks it to S3, Google Cloud Storage and Azure through obstore, and
:class:`DirectoryObjects` to a folder (a mounted share): create-if-absent with ``link``,
compare-and-swap under a lock file.

Errors are translated here: nothing above this module sees an obstore exception.
:class:`ObjectExists` and :class:`ObjectChanged` are the two answers the protocol acts on
(a lost race); every other failure is a :class:`StoreError` naming the point, after the
client's own retries (S2: the caller fails closed).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agac.errors import ConfigError, Problem, StoreError
from agac.objectstores import CLOUD_SCHEMES, open_cloud_store, require_obstore

__all__ = [
    "CLOUD_SCHEMES",
    "CloudObjects",
    "DirectoryObjects",
    "ObjectChanged",
    "ObjectExists",
    "Objects",
    "Stored",
    "open_objects",
]


class ObjectExists(Exception):  # an answer of the protocol, not a failure
    """A create-if-absent found the object already there."""


class ObjectChanged(Exception):
    """A replace found the object changed (or gone) since it was read: HTTP 412."""


@dataclass(frozen=True)
class Stored:
    """One object as read: its bytes, its ETag, and when the server last wrote it."""

    data: bytes
    etag: str
    modified: float
    """Epoch seconds by the server's clock (S3 gives whole seconds)."""


class Objects(Protocol):
    """Where a storage point's objects live (see the module docstring)."""

    where: str
    """The point's URL, for messages."""

    def get(self, key: str) -> Stored | None: ...

    def create(self, key: str, data: bytes) -> str:
        """Store ``data`` only if ``key`` is absent; its ETag. ObjectExists otherwise."""
        ...

    def replace(self, key: str, data: bytes, etag: str) -> str:
        """Store ``data`` only if ``key`` still has ``etag``; the new ETag. ObjectChanged otherwise."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` unconditionally (for objects with a name nobody else uses)."""
        ...

    def delete(self, keys: Sequence[str]) -> None: ...

    def list(self, prefix: str) -> list[str]: ...

    def server_now(self) -> float:
        """The server's clock now, read from the Last-Modified of an object written now."""
        ...


# -- object storage through obstore ------------------------------------------------------


class CloudObjects:
    """S3 (``s3://bucket/prefix``), GCS (``gs://…``) and Azure (``az://…``) through obstore.

    Endpoint, region and credentials come from the standard environment (``AWS_*``,
    ``GOOGLE_*``, ``AZURE_*``), which obstore reads; ``options`` (``store_options:`` in
    agac.yml) add to it or override it, as :mod:`agac.objectstores` says for every user of
    object storage.
    """

    def __init__(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        self.where = url
        self._ob = require_obstore(f"the storage point {url}")
        with self._errors("open"):
            self._store = open_cloud_store(url, options, f"the storage point {url}")

    @contextlib.contextmanager
    def _errors(self, what: str, key: str = "") -> Iterator[None]:
        from obstore import exceptions as ox

        try:
            yield
        except ox.AlreadyExistsError as exc:
            raise ObjectExists(key) from exc
        except ox.PreconditionError as exc:
            raise ObjectChanged(key) from exc
        except ox.UnknownConfigurationKeyError as exc:
            raise ConfigError(
                problems=[
                    Problem(
                        "invalid_store",
                        f"the storage point {self.where}: {_first_line(exc)}",
                        file="agac.yml",
                        path="store_options",
                        hint="store_options takes obstore's configuration keys (endpoint, region, "
                        "allow_http, max_retries, …)",
                    )
                ]
            ) from exc
        except (ox.BaseError, OSError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise StoreError(
                f"cannot {what} {key or ''} at the storage point {self.where}: {_first_line(exc)}"
            ) from exc

    def get(self, key: str) -> Stored | None:
        try:
            with self._errors("read", key):
                result = self._ob.get(self._store, key)
                data = bytes(result.bytes())
        except FileNotFoundError:
            return None
        meta = result.meta
        return Stored(data, str(meta["e_tag"]), meta["last_modified"].timestamp())

    def create(self, key: str, data: bytes) -> str:
        with self._errors("create", key):
            return str(self._ob.put(self._store, key, data, mode="create")["e_tag"])

    def replace(self, key: str, data: bytes, etag: str) -> str:
        try:
            with self._errors("replace", key):
                return str(self._ob.put(self._store, key, data, mode={"e_tag": etag})["e_tag"])
        except FileNotFoundError as exc:
            raise ObjectChanged(key) from exc

    def put(self, key: str, data: bytes) -> None:
        with self._errors("write", key):
            self._ob.put(self._store, key, data)

    def delete(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = list(keys[start : start + 1000])
            try:
                with self._errors("delete", chunk[0]):
                    self._ob.delete(self._store, chunk)
            except FileNotFoundError:
                pass

    def list(self, prefix: str) -> list[str]:
        with self._errors("list", prefix):
            return [
                str(meta["path"]) for batch in self._ob.list(self._store, prefix) for meta in batch
            ]

    def server_now(self) -> float:
        key = f"clock/{secrets.token_hex(8)}"
        with self._errors("write", key):
            self._ob.put(self._store, key, b"")
            modified = self._ob.head(self._store, key)["last_modified"].timestamp()
        with contextlib.suppress(StoreError, FileNotFoundError):
            self.delete([key])
        return modified


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# -- a directory -------------------------------------------------------------------------


class DirectoryObjects:
    """A folder as a storage point (``dir:///path``, e.g. a mounted share).

    Create-if-absent writes a temporary file and ``link``s it to its name, which fails if
    the name exists; compare-and-swap holds an exclusive ``flock`` on ``<key>.lock`` while
    it compares and renames. The ETag is the content's hash; Last-Modified is the file's
    modification time, set by the file server's clock on a network share.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = f"dir://{root.as_posix()}"
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the storage point {self.where}: {exc}") from exc

    def _path(self, key: str) -> Path:
        return self.root / key

    @contextlib.contextmanager
    def _errors(self, what: str, key: str) -> Iterator[None]:
        try:
            yield
        except (ObjectExists, ObjectChanged):
            raise
        except FileNotFoundError:
            if what == "read":
                raise  # get: no such object
            raise StoreError(  # a write whose folder vanished under it is a failed write
                f"cannot {what} {key} at the storage point {self.where}: its folder is gone"
            ) from None
        except OSError as exc:
            raise StoreError(
                f"cannot {what} {key} at the storage point {self.where}: {exc}"
            ) from exc

    def get(self, key: str) -> Stored | None:
        path = self._path(key)
        try:
            with self._errors("read", key):
                data = path.read_bytes()
                modified = path.stat().st_mtime
        except FileNotFoundError:
            return None
        return Stored(data, _etag(data), modified)

    def _write_temp(self, path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        return tmp

    def create(self, key: str, data: bytes) -> str:
        path = self._path(key)
        with self._errors("create", key):
            tmp = self._write_temp(path, data)
            try:
                os.link(tmp, path)
            except FileExistsError as exc:
                raise ObjectExists(key) from exc
            finally:
                tmp.unlink(missing_ok=True)
            _sync_dir(path.parent)
        return _etag(data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        import fcntl

        path = self._path(key)
        with self._errors("replace", key):
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    current = path.read_bytes()
                except FileNotFoundError as exc:
                    raise ObjectChanged(key) from exc
                if _etag(current) != etag:
                    raise ObjectChanged(key)
                tmp = self._write_temp(path, data)
                os.replace(tmp, path)
                _sync_dir(path.parent)
            finally:
                os.close(lock)  # closing releases the flock
        return _etag(data)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        with self._errors("write", key):
            os.replace(self._write_temp(path, data), path)
            _sync_dir(path.parent)

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            with self._errors("delete", key):
                self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix) if prefix else self.root
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return []
        out = []
        for path in start.rglob("*"):
            key = path.relative_to(self.root).as_posix()
            if (
                path.is_file()
                and key.startswith(prefix)
                and not path.name.startswith(".")
                and not key.endswith(".lock")
            ):
                out.append(key)
        return sorted(out)

    def server_now(self) -> float:
        key = f"clock/{secrets.token_hex(8)}"
        self.put(key, b"")
        try:
            return self._path(key).stat().st_mtime
        finally:
            self.delete([key])


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_objects(url: str, options: Mapping[str, Any] | None = None) -> Objects:
    """The objects of the storage point ``url`` (``dir:///path`` or a cloud URL)."""
    scheme = url.partition("://")[0].lower()
    if scheme == "dir":
        path = url.partition("://")[2]
        if not path.startswith("/"):
            raise ConfigError(
                problems=[
                    Problem(
                        "invalid_store",
                        f"the storage point {url} needs an absolute path",
                        hint="write dir:///absolute/path (three slashes)",
                    )
                ]
            )
        return DirectoryObjects(Path(path))
    if scheme in CLOUD_SCHEMES:
        return CloudObjects(url, options)
    raise ConfigError(problems=[Problem("invalid_store", f"unsupported store URL {url!r}")])
