"""The repository API on a storage point: a SQLite working copy kept durable at the point.

:class:`PointStore` is an ordinary :class:`Store` on a local SQLite file (every query is
the same), plus the few hooks through which its :class:`Replica` keeps the durable copy:

- opening **for writing** owns the point (O2; a live owner elsewhere: exit 75 naming
  it) and restores the working copy when it is not a clean copy of what ``head`` names
  (O3); opening **for reading** (status, export, …) restores a private copy and owns
  nothing, so a run's progress can be read from anywhere while it runs;
- every transaction first checks the replica (a failed write refuses all later ones,
  S2; a lost point, O2); each group commit wakes the shipper;
- :meth:`durability_ticket` is the durability acknowledgement the engine awaits before
  an effect or a batch submission (S1 on these points);
- :meth:`close` ships everything *before* the engine is disposed, takes a new snapshot
  when a run ended (O4), and hands the point back.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import math
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from agac.clock import SYSTEM, Clock
from agac.errors import ConfigError, Problem, StoreError
from agac.store.points.head import HEAD_KEY, Head
from agac.store.points.objects import Objects, open_objects
from agac.store.points.replica import PointSettings, Replica, describe_head
from agac.store.points.restore import DB_NAME, Restored, restore
from agac.store.repository import Store
from agac.store.rows import Checkpoint

__all__ = [
    "AGAC_OPTIONS",
    "PointStore",
    "cache_root",
    "describe_point",
    "point_folder",
    "split_options",
]

AGAC_OPTIONS = ("lease_ttl", "snapshot_after_mb", "checkpoints_per_second")
"""``store_options:`` keys agac reads itself; the others go to obstore."""

_READ_ATTEMPTS = 5


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/agac``, else ``~/.cache/agac``: where working copies live."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agac"


def point_folder(url: str, environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder of the storage point ``url``'s working copy on this machine."""
    return cache_root(environ) / "points" / hashlib.sha256(url.encode()).hexdigest()[:16]


def split_options(
    url: str, options: Mapping[str, Any] | None
) -> tuple[PointSettings, dict[str, Any]]:
    """(agac's settings, obstore's options) from ``store_options:``."""
    rest = dict(options or {})
    values: dict[str, float] = {}
    for key in AGAC_OPTIONS:
        if key in rest:
            try:
                values[key] = float(rest.pop(key))
                if not (math.isfinite(values[key]) and values[key] > 0):
                    raise ValueError
            except (TypeError, ValueError) as exc:
                raise ConfigError(
                    problems=[
                        Problem(
                            "invalid_store",
                            f"store_options.{key} must be a positive finite number",
                            file="agac.yml",
                            path=f"store_options.{key}",
                        )
                    ]
                ) from exc
    settings = PointSettings(
        lease_ttl=values.get("lease_ttl", PointSettings.lease_ttl),
        snapshot_bytes=int(
            values.get("snapshot_after_mb", PointSettings.snapshot_bytes / 2**20) * 2**20
        ),
        interval=(
            1.0 / values["checkpoints_per_second"]
            if "checkpoints_per_second" in values
            else PointSettings.interval
        ),
    )
    if (
        url.startswith(("s3://", "gs://", "az://", "azure://", "abfs://", "abfss://"))
        and "max_retries" not in rest
        and "retry_timeout" not in rest
    ):
        # A write still failing after a third of a lease fails the run (S2) rather than
        # shipping after the lease could have passed to another process.
        rest["retry_timeout"] = settings.lease_ttl / 3
    return settings, rest


class PointStore(Store):
    """A :class:`Store` whose durable copy lives at a storage point (module docstring)."""

    WAL_AUTOCHECKPOINT = 0

    def __init__(
        self,
        url: str,
        options: Mapping[str, Any] | None = None,
        *,
        writes: bool = True,
        wait: bool = False,
        migrate: bool = True,
        environ: Mapping[str, str] | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        settings, client = split_options(url, options)
        self.objects: Objects = open_objects(url, client)
        self.replica: Replica | None = None
        self.restored: Restored | None = None
        self._read_folder: Path | None = None
        self._ran_to_end = False
        folder = point_folder(url, environ)
        if writes:
            replica = Replica(self.objects, folder, settings)
            replica.acquire(wait=wait)
            try:
                self.restored = replica.prepare()
            except BaseException:
                replica.release(clean=False)
                raise
            self.replica = replica
            path = replica.db_path
        else:
            path = self._restore_private(folder)
        try:
            super().__init__(f"sqlite:///{path.as_posix()}", migrate=migrate, clock=clock)
        except BaseException:
            self._abandon()
            raise
        self.url = url
        self._note_torn()
        if self.replica is None:
            # A private copy: a write would vanish with it, so none is allowed (a reading
            # command that wrote would be a bug, and it fails loudly here).
            sa.event.listen(
                self.engine, "connect", lambda dbapi, _rec: dbapi.execute("PRAGMA query_only=1")
            )
            self.engine.dispose()
        else:
            try:
                self._start_owning()
            except BaseException:
                self.engine.dispose()
                self._abandon()
                raise

    # -- opening -----------------------------------------------------------------------------

    def _restore_private(self, folder: Path) -> Path:
        """A private copy for reading; retried when the owner compacts meanwhile (it deletes
        the objects of the state we were reading)."""
        for attempt in range(_READ_ATTEMPTS):
            stored = self.objects.get(HEAD_KEY)
            self._read_folder = folder / f"read-{os.getpid()}-{secrets.token_hex(4)}"
            if stored is None:  # nothing stored yet: an empty store to read
                self._read_folder.mkdir(parents=True, exist_ok=True)
                return self._read_folder / DB_NAME
            head = Head.decode(stored.data, self.objects.where)
            try:
                self.restored = restore(self.objects, head, self._read_folder)
            except StoreError:
                if attempt == _READ_ATTEMPTS - 1 or self._head_unchanged(stored.etag):
                    raise
                continue
            if self.restored.torn and not self._head_unchanged(stored.etag):
                continue  # the owner compacted while we read: read its new state
            return self._read_folder / DB_NAME
        raise AssertionError("unreachable")

    def _head_unchanged(self, etag: str) -> bool:
        stored = self.objects.get(HEAD_KEY)
        return stored is not None and stored.etag == etag

    def _note_torn(self) -> None:
        if self.restored is not None and self.restored.torn:
            self.notes += [
                f"{line} (O3): commits stored in it and after it are lost"
                for line in self.restored.torn
            ]

    def _start_owning(self) -> None:
        replica = self.replica
        assert replica is not None and replica.head is not None
        sa.event.listen(self.engine, "begin", lambda _conn: replica.check())
        replica.release_readers = self.engine.dispose
        if replica.took_over or self.restored is not None:
            # The point's lease (head) is what owns runs here: run leases restored from
            # another process's copy are moot, and judging them by this machine's clock
            # would make a run wait for a lease nobody holds.
            with self._write("clear the run leases") as conn:
                if sa.inspect(conn).has_table("leases"):
                    conn.execute(sa.text("UPDATE leases SET expires_at = 0 WHERE expires_at > 0"))
        if replica.head.snapshot is None or (self.restored is not None and self.restored.torn):
            # A new point's first snapshot; after a torn log, a snapshot of what was
            # restored, so head stops naming segments that cannot be read.
            replica.compact()
        replica.start()

    def _abandon(self) -> None:
        if self.replica is not None:
            self.replica.stop_quietly()
            self.replica.release(clean=False)
        if self._read_folder is not None:
            shutil.rmtree(self._read_folder, ignore_errors=True)

    # -- the hooks ----------------------------------------------------------------------------

    @property
    def point(self) -> bool:
        return True

    def durability_ticket(self) -> concurrent.futures.Future[None] | None:
        if self.replica is None:
            return None
        return self.replica.ticket()

    def owner_confirmed(self) -> bool:
        return self.replica is None or self.replica.confirmed()

    def confirm_owner(self) -> None:
        if self.replica is not None:
            self.replica.check(strict=True)

    def checkpoint(self, group: Checkpoint, *, lease: tuple[str, int, float] | None = None) -> None:
        super().checkpoint(group, lease=lease)
        if self.replica is not None:
            self.replica.poke()

    def end_run(self, run_id: str, state: str, error: str | None = None) -> bool:
        ended = super().end_run(run_id, state, error)
        self._ran_to_end = self._ran_to_end or ended
        return ended

    def close(self) -> None:
        """Ship everything, then dispose the engine, then hand the point back (fact 3:
        the last connection's close checkpoints the WAL away, so shipping comes first)."""
        replica = self.replica
        failure: StoreError | None = None
        if replica is not None:
            known = replica.failure  # already raised to the run, which stopped on it
            try:
                replica.finish(compact=self._ran_to_end)
            except StoreError as exc:
                failure = None if exc is known else exc
        self.engine.dispose()
        if replica is not None:
            replica.release()
            self.replica = None
        if self._read_folder is not None:
            shutil.rmtree(self._read_folder, ignore_errors=True)
            self._read_folder = None
        if failure is not None:
            raise failure

    def info(self) -> dict[str, Any]:
        """What ``agac store info`` shows of this point."""
        assert self.replica is not None
        return self.replica.describe()


def describe_point(
    url: str, options: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``agac store info`` for a storage point, read without owning it."""
    import time

    _settings, client = split_options(url, options)
    objects = open_objects(url, client)
    stored = objects.get(HEAD_KEY)
    folder = point_folder(url, environ)
    doc: dict[str, Any] = {
        "store": url,
        "kind": "directory" if url.startswith("dir://") else "object storage",
        "working_copy": str(folder / DB_NAME),
    }
    if stored is None:
        doc.update(exists=False)
        return doc
    head = Head.decode(stored.data, objects.where)
    doc.update(exists=True, **describe_head(head))
    now = objects.server_now()
    doc["head_written_at"] = stored.modified
    doc["lease_expires_at"] = stored.modified + head.ttl if head.owner is not None else None
    doc["owned"] = head.owner is not None and now - stored.modified < head.ttl + 1.0
    snap = head.snapshot
    doc["snapshot_age_seconds"] = None if snap is None else max(0.0, time.time() - snap.taken_at)
    doc["bytes"] = (snap.size if snap else 0) + head.log_bytes
    return doc
