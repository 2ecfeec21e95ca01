"""Cloud Storage objects of a provider's batch jobs (Vertex AI reads a job's input from a
``gs://`` prefix and writes its output under another): written, listed, read line by line
and deleted through obstore, opened by :func:`agac.objectstores.open_cloud_store` as every
other ``gs://`` address agac touches, so credentials and endpoints come from the same
environment (``GOOGLE_APPLICATION_CREDENTIALS`` or ``GOOGLE_SERVICE_ACCOUNT``; obstore
reads a service account's ``gcs_base_url`` too, which is how the tests reach the
emulator's Cloud Storage).

obstore's errors are translated here into agac's taxonomy: an object or bucket that is not
there is fatal for the batch (a misconfigured ``batch_bucket``), anything else retryable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agac.errors import ConfigError, FatalError, Problem, ProviderError, RetryableError
from agac.objectstores import open_cloud_store

__all__ = ["GcsPlace", "GcsStore"]

#: A file above this goes up in parts (obstore's multipart upload); below, in one PUT.
MULTIPART_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class GcsPlace:
    """Where one job's objects lie: its bucket and its folder (the job's name under the
    configured prefix)."""

    bucket: str
    folder: str

    @classmethod
    def of(cls, root: str, name: str, *, provider: str) -> GcsPlace:
        parts = urlsplit(root)
        if parts.scheme != "gs" or not parts.netloc:
            raise ConfigError(
                problems=[
                    Problem(
                        "invalid_provider_option",
                        f"provider {provider!r}: batch_bucket {root!r} is not a "
                        "gs://bucket/prefix address",
                        hint=f"set providers: {provider}: batch_bucket: gs://… in agac.yml",
                    )
                ]
            )
        prefix = parts.path.strip("/")
        return cls(parts.netloc, f"{prefix}/{name}" if prefix else name)

    def key(self, what: str) -> str:
        return f"{self.folder}/{what}"

    def uri(self, what: str) -> str:
        return f"gs://{self.bucket}/{self.folder}/{what}"

    @classmethod
    def parse(cls, uri: str) -> tuple[str, str]:
        """(bucket, key) of a ``gs://`` address."""
        parts = urlsplit(uri)
        return parts.netloc, parts.path.lstrip("/")


class GcsStore:
    """One obstore store per bucket, opened on first use. A file above
    ``multipart_bytes`` goes up as a multipart upload."""

    def __init__(self, provider: str, *, multipart_bytes: int = MULTIPART_BYTES) -> None:
        self._provider = provider
        self._multipart_bytes = multipart_bytes
        self._stores: dict[str, Any] = {}

    def _store(self, bucket: str) -> Any:
        store = self._stores.get(bucket)
        if store is None:
            with self._translated(f"gs://{bucket}"):
                store = open_cloud_store(f"gs://{bucket}", None, f"the batch bucket gs://{bucket}")
            self._stores[bucket] = store
        return store

    async def put_file(self, bucket: str, key: str, path: Path) -> None:
        import obstore

        multipart = path.stat().st_size > self._multipart_bytes
        with self._translated(f"gs://{bucket}/{key}"):
            await obstore.put_async(self._store(bucket), key, path, use_multipart=multipart)

    async def keys(self, bucket: str, prefix: str) -> list[str]:
        import obstore

        found: list[str] = []
        with self._translated(f"gs://{bucket}/{prefix}"):
            async for batch in obstore.list(self._store(bucket), prefix=prefix):
                found += [str(meta["path"]) for meta in batch]
        return sorted(found)

    async def lines(self, bucket: str, key: str) -> AsyncIterator[bytes]:
        """The object's non-blank lines, streamed."""
        import obstore

        with self._translated(f"gs://{bucket}/{key}"):
            got = await obstore.get_async(self._store(bucket), key)
            rest = b""
            async for chunk in got.stream(min_chunk_size=1 << 20):
                *whole, rest = (rest + bytes(chunk)).split(b"\n")
                for line in whole:
                    if line.strip():
                        yield line
            if rest.strip():
                yield rest

    async def delete(self, bucket: str, key: str) -> None:
        """Delete an object; one already gone is not an error."""
        import obstore
        from obstore import exceptions as ox

        with self._translated(f"gs://{bucket}/{key}"):
            try:
                await obstore.delete_async(self._store(bucket), key)
            except (FileNotFoundError, ox.NotFoundError):  # obstore raises the built-in
                return

    @contextmanager
    def _translated(self, where: str) -> Iterator[None]:
        from obstore import exceptions as ox

        try:
            yield
        except (ProviderError, ConfigError):
            raise
        except (FileNotFoundError, ox.NotFoundError) as exc:
            raise FatalError(f"{self._provider}: {where} is not there: {exc}") from exc
        except (
            ox.PermissionDeniedError,
            ox.UnauthenticatedError,
            ox.InvalidPathError,
            ox.UnknownConfigurationKeyError,
        ) as exc:
            raise FatalError(
                f"{self._provider}: {where}: {exc} (check the bucket and the credentials' "
                "access to it)"
            ) from exc
        except ox.BaseError as exc:
            raise RetryableError(f"{self._provider}: {where}: {exc}") from exc
