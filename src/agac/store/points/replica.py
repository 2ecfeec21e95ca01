"""One process's hold on a storage point: ownership of ``head`` and shipping of the log.

The working copy is an ordinary SQLite store in a cache folder (O1). This module keeps
its durable copy at the point:

- **Owning (O2).** :meth:`Replica.acquire` replaces ``head`` with ``If-Match`` naming this
  process as owner, or creates it (``If-None-Match: *``) on a new point. A live owner
  elsewhere is reported (:class:`LeaseHeld`, exit 75, naming it); its lease has expired
  when the server's clock (the Last-Modified of a probe object written now) is a lease
  length past ``head``'s Last-Modified; a dead process on this host is taken over at once.
- **Shipping (O1, O5).** A background thread cuts the WAL at its last commit frame (under
  ``BEGIN IMMEDIATE`` on a connection of its own, so no commit is half-written), stores
  the new bytes as the next segment (create-if-absent) and then ``head`` naming it; a
  checkpoint is durable only then. Cuts are at least ``interval`` apart (about ten a
  second: two writes each), so commits coalesce. Units do not wait for this (their slots
  are released at the local commit); what must be durable before an effect waits on a
  :meth:`Replica.ticket`, answered by the next ship.
- **Lease.** Every ``head`` write renews the lease; an idle owner rewrites ``head`` every
  third of it. A 412 on ``head`` means another process took the point: the replica fails
  with :class:`LeaseTaken` (exit 75, naming the new owner) and every later write is
  refused, so nothing more is shipped and no effect starts. Any other failed write, after
  the client's retries, fails it with :class:`StoreError` (S2: the run stops).
- **Compaction (O4).** Past ``snapshot_bytes`` of log, and at close when asked, the WAL
  is checkpointed (TRUNCATE) and the database image stored as a new snapshot; ``head``
  then names it with an empty log, and only after that are the old snapshot and segments
  deleted.

SQLite facts this relies on (checked with SQLite 3.40): Python has no WAL hook, so the
log is read from the file; ``wal_autocheckpoint`` is off on every connection, so the WAL
resets only when this module checkpoints it; the last connection to close checkpoints
and deletes the WAL, so this module keeps one connection open until everything is
shipped; and the database file itself is never opened from Python (closing any
descriptor of it would drop SQLite's POSIX locks) — the snapshot is
``sqlite3.Connection.serialize()``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agac.errors import LeaseHeld, LeaseTaken, StoreError
from agac.store.points.head import HEAD_KEY, Head, Owner, SnapshotRef, segment_key
from agac.store.points.objects import ObjectChanged, ObjectExists, Objects
from agac.store.points.restore import DB_NAME, Restored, restore, wipe
from agac.store.points.wal import WAL_HEADER, commit_end, encode_segment, read_header

__all__ = ["PointSettings", "Replica"]

_COPY_STATE = "copy.json"
_LIVE_OWNERS: set[str] = set()
"""Owner ids of this process's open replicas: a hold of this pid that is not among them
was left by a store this process closed without handing the point back."""


@dataclass(frozen=True)
class PointSettings:
    """How a storage point is kept (``store_options:`` ``lease_ttl``, ``snapshot_after_mb``,
    ``checkpoints_per_second``)."""

    lease_ttl: float = 30.0
    snapshot_bytes: int = 64 << 20
    interval: float = 0.105
    """Seconds between the starts of two ships: at most ~10 a second (segment + head)."""


@dataclass(frozen=True)
class _Cut:
    generation: str
    start: int
    data: bytes
    salt: bytes


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Replica:
    """This process's ownership of one storage point and the shipping of its working copy."""

    def __init__(self, objects: Objects, folder: Path, settings: PointSettings) -> None:
        self.objects = objects
        self.release_readers: Callable[[], None] = lambda: None
        """Closes the store's idle pooled connections before a TRUNCATE checkpoint (one
        left holding a finished statement's read snapshot would block it)."""
        self.settings = settings
        self.owner = Owner(secrets.token_hex(6), socket.gethostname(), os.getpid())
        self.home = folder
        self.folder = folder
        self.head: Head | None = None
        self.took_over = False
        """True when the point was last owned by another process (its leases are moot)."""
        self._etag = ""
        self._confirmed = 0.0  # monotonic start of our last successful head write
        self._failure: StoreError | None = None
        self._ship_lock = threading.Lock()  # one cut/ship/compaction at a time
        self._head_lock = threading.Lock()  # head writes; never held while SQLite waits
        self._tickets: list[concurrent.futures.Future[None]] = []
        self._tickets_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._folder_lock: int | None = None
        self._private = False
        self._ready = False  # the working copy is the state head names
        # the WAL generation being shipped
        self._generation: str | None = None
        self._salt: bytes | None = None
        self._offset = 0
        self._seen_size = -1
        self._expect_reset = True
        self._generations = 0
        self._last_ship = 0.0
        self.ships = 0

    @property
    def db_path(self) -> Path:
        return self.folder / DB_NAME

    # -- owning ----------------------------------------------------------------------------

    def acquire(self, *, wait: bool = False) -> Head:
        """Own the point (see the module docstring); LeaseHeld names a live owner."""
        # Live before any write names this owner: another store of this same process racing
        # for the point must judge the head it finds as a live hold, never as one left by a
        # store this process closed.
        _LIVE_OWNERS.add(self.owner.id)
        try:
            return self._acquire(wait)
        except BaseException:
            _LIVE_OWNERS.discard(self.owner.id)
            raise

    def _acquire(self, wait: bool) -> Head:
        while True:
            stored = self.objects.get(HEAD_KEY)
            started = time.monotonic()
            if stored is None:
                head = Head(self.owner, self.settings.lease_ttl, None, (), 1)
                try:
                    self._etag = self.objects.create(HEAD_KEY, head.encode())
                except ObjectExists:
                    continue  # created by another process at the same moment: judge it
                self.head, self._confirmed = head, started
                return head
            current = Head.decode(stored.data, self.objects.where)
            owner = current.owner
            if (
                owner is not None
                and owner.id != self.owner.id
                and not self._may_take(current, stored.modified)
            ):
                if wait:
                    time.sleep(1.0)
                    continue
                until = time.strftime("%H:%M:%S UTC", time.gmtime(stored.modified + current.ttl))
                raise LeaseHeld(
                    f"the storage point {self.objects.where} is owned by "
                    f"{owner.describe()} (its lease runs to {until} by the "
                    "server's clock unless renewed); run again later, or with --wait"
                )
            head = current.next(owner=self.owner, ttl=self.settings.lease_ttl)
            try:
                self._etag = self.objects.replace(HEAD_KEY, head.encode(), stored.etag)
            except ObjectChanged:
                continue  # another process wrote head since we read it: judge again
            self.took_over = owner is not None
            self.head, self._confirmed = head, started
            return head

    def _may_take(self, head: Head, modified: float) -> bool:
        owner = head.owner
        assert owner is not None
        if owner.host == self.owner.host and not _pid_alive(owner.pid):
            return True  # S3: a dead process on this host is taken over at once
        if (
            owner.host == self.owner.host
            and owner.pid == self.owner.pid
            and owner.id not in _LIVE_OWNERS
        ):
            return True  # this process's own hold, left by a store it closed
        # Last-Modified has whole seconds: one more second keeps the judgement safe.
        return self.objects.server_now() - modified >= head.ttl + 1.0

    # -- the local copy ------------------------------------------------------------------------

    def prepare(self) -> Restored | None:
        """Make the working copy the state ``head`` names: reuse a clean local copy of that
        very state, else discard it and restore (O3); None when the copy was reused."""
        assert self.head is not None
        self._lock_folder()
        state = self._read_copy_state()
        self._write_copy_state(None)  # in use: a crash leaves it dirty
        wal = Path(str(self.db_path) + "-wal")
        if state == self.head.state_id and self.db_path.exists() and not wal.exists():
            done = None
        else:
            done = restore(self.objects, self.head, self.folder)
        self._open_connection()
        self._ready = True
        return done

    def _lock_folder(self) -> None:
        """One process per working copy on this machine. A process we took the point over
        from may still live here (paused past its lease): then we use a private folder."""
        import fcntl

        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.home / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.folder = self.home / f"private-{self.owner.id}"
            self._private = True
            self.folder.mkdir(parents=True, exist_ok=True)
            return
        self._folder_lock = fd

    def _read_copy_state(self) -> str | None:
        try:
            doc = json.loads((self.folder / _COPY_STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc.get("state") if doc.get("clean") else None

    def _write_copy_state(self, state: str | None) -> None:
        path = self.folder / _COPY_STATE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"state": state, "clean": state is not None}), encoding="utf-8")
        os.replace(tmp, path)

    def _open_connection(self) -> None:
        """The replica's own connection: it cuts the WAL and takes snapshots, and, kept open
        until the last ship, stops SQLite from checkpointing the WAL away on a close."""
        conn = sqlite3.connect(
            self.db_path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        self._conn = conn

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="agac-point", daemon=True)
        self._thread.start()

    # -- checks and tickets -------------------------------------------------------------------

    def check(self, *, strict: bool = False) -> None:
        """Before a transaction: refuse once the replica failed (S2) or lost the point (O2).
        A lease not confirmed for half its length (a process paused, a slow network) is
        confirmed first, so a process paused past its lease learns of it before it writes;
        ``strict`` (right before an effect) confirms one not confirmed for a third."""
        if self._failure is not None:
            raise self._failure
        if not self.confirmed(
            self.settings.lease_ttl / 3 if strict else self.settings.lease_ttl / 2
        ):
            self.renew()

    def confirmed(self, within: float | None = None) -> bool:
        """No failure, and ``head`` written successfully within ``within`` seconds (a third
        of the lease by default) by this process's clock."""
        limit = self.settings.lease_ttl / 3 if within is None else within
        return self._failure is None and time.monotonic() - self._confirmed <= limit

    def poke(self) -> None:
        """Something was committed: ship it when the interval allows."""
        self._wake.set()

    def ticket(self) -> concurrent.futures.Future[None]:
        """A future answered once everything committed before this call is stored at the
        point (the durability acknowledgement), or failed with the replica's error."""
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._failure is not None:
            fut.set_exception(self._failure)
            return fut
        with self._tickets_lock:
            self._tickets.append(fut)
        self._wake.set()
        return fut

    @property
    def failure(self) -> StoreError | None:
        return self._failure

    # -- shipping ------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.settings.interval)
            self._wake.clear()
            if self._stop.is_set() or self._failure is not None:
                continue
            pause = self._last_ship + self.settings.interval - time.monotonic()
            if pause > 0 and self._stop.wait(pause):
                break
            try:
                shipped = self.ship()
                if not shipped and time.monotonic() - self._confirmed > self.settings.lease_ttl / 3:
                    self.renew()
                assert self.head is not None
                if self.head.log_bytes > self.settings.snapshot_bytes:
                    self.compact()
            except StoreError:
                pass  # recorded in self._failure; writers and tickets learn of it
            except Exception as exc:  # noqa: BLE001 - never die silently: fail closed (S2)
                self._fail(StoreError(f"the storage point's writer stopped: {exc!r}"))

    def ship(self) -> bool:
        """Store what was committed since the last ship: a segment, then ``head`` naming
        it. True when something was shipped. Answers the tickets taken before it began."""
        with self._ship_lock:
            return self._ship_locked()

    def _ship_locked(self) -> bool:
        with self._tickets_lock:
            tickets, self._tickets = self._tickets, []
        try:
            self._raise_failure()
            self._last_ship = time.monotonic()
            cut = self._cut(force=bool(tickets))
            if cut is not None:
                self._store_segment(cut)
        except StoreError as exc:
            for fut in tickets:
                fut.set_exception(exc)
            raise
        for fut in tickets:
            fut.set_result(None)
        return cut is not None

    def _cut(self, *, force: bool) -> _Cut | None:
        """The WAL's committed bytes not shipped yet, read while no commit is in progress."""
        assert self._conn is not None
        wal = Path(str(self.db_path) + "-wal")
        try:
            size = wal.stat().st_size
        except FileNotFoundError:
            return None
        if size == self._seen_size and not force:
            return None
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                fd = os.open(wal, os.O_RDONLY)
                try:
                    size = os.fstat(fd).st_size
                    header = read_header(os.pread(fd, WAL_HEADER, 0))
                    if header is None:
                        return None
                    generation, start = self._generation, self._offset
                    if header.salt != self._salt:
                        if self._salt is not None and not self._expect_reset:
                            raise self._fail(
                                StoreError(
                                    f"the working copy's WAL at {wal} was reset outside agac (another "
                                    "process opened it?); its last commits cannot be shipped"
                                )
                            )
                        self._generations += 1
                        generation, start = f"{self.owner.id}-{self._generations}", 0
                    data = os.pread(fd, size - start, start) if size > start else b""
                finally:
                    os.close(fd)
            finally:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise self._fail(StoreError(f"cannot read the working copy's WAL: {exc}")) from exc
        self._seen_size = size
        end = commit_end(data, start, header)
        if end == start:
            return None
        assert generation is not None
        return _Cut(generation, start, data[: end - start], header.salt)

    def _store_segment(self, cut: _Cut) -> None:
        assert self.head is not None
        log = self.head.log
        number = log[-1].segments + 1 if log and log[-1].id == cut.generation else 1
        key = segment_key(cut.generation, number)
        try:
            self.objects.create(key, encode_segment(cut.start, cut.data))
        except ObjectExists as exc:
            raise self._fail(
                StoreError(
                    f"segment {key} of the storage point {self.objects.where} "
                    "exists already: another process writes this generation"
                )
            ) from exc
        except StoreError as exc:
            raise self._fail(exc) from exc
        with self._head_lock:
            self._put_head(self.head.with_segment(cut.generation, len(cut.data)))
        self._generation, self._salt = cut.generation, cut.salt
        self._offset = cut.start + len(cut.data)
        self._expect_reset = False
        self.ships += 1

    def renew(self) -> None:
        """Rewrite ``head`` unchanged but for its serial: the lease runs again from now."""
        with self._head_lock:
            self._raise_failure()
            assert self.head is not None
            self._put_head(self.head.next())

    def _put_head(self, head: Head) -> None:
        """Replace ``head`` with ``If-Match`` (the caller holds the head lock)."""
        started = time.monotonic()
        try:
            self._etag = self.objects.replace(HEAD_KEY, head.encode(), self._etag)
        except ObjectChanged as exc:
            raise self._fail(self._taken()) from exc
        except StoreError as exc:
            raise self._fail(exc) from exc
        self.head, self._confirmed = head, started

    def _taken(self) -> LeaseTaken:
        try:
            stored = self.objects.get(HEAD_KEY)
            owner = Head.decode(stored.data, self.objects.where).owner if stored else None
        except StoreError:
            owner = None
        who = owner.describe() if owner is not None else "another process"
        return LeaseTaken(
            f"the storage point {self.objects.where} was taken over by {who} "
            "while this process was paused or cut off (412 on head); this process "
            "stopped and started no effect; its commits since the last stored "
            "checkpoint are discarded, and the new owner continues the run"
        )

    def _fail(self, exc: StoreError) -> StoreError:
        if self._failure is None:
            self._failure = exc
        with self._tickets_lock:
            tickets, self._tickets = self._tickets, []
        for fut in tickets:
            fut.set_exception(self._failure)
        return self._failure

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    # -- compaction (O4) ---------------------------------------------------------------------

    def compact(self) -> bool:
        """A new snapshot in place of the log; False when SQLite could not checkpoint now."""
        with self._ship_lock:
            assert self._conn is not None and self.head is not None
            if self.head.snapshot is not None:
                self._ship_locked()  # (a point's first snapshot has no log before it)
            try:
                self.release_readers()
                busy, _log, _done = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy:
                    return False
                # The WAL is empty now; its next writer starts a new generation. Commits
                # that land before serialize() are in the image and in that generation
                # both: replaying a page image over itself changes nothing.
                self._expect_reset, self._seen_size = True, -1
                image = self._conn.serialize()
            except sqlite3.Error as exc:
                raise self._fail(
                    StoreError(f"cannot take a snapshot of the working copy: {exc}")
                ) from exc
            old = self.head
            key = f"snapshots/{int(time.time()):010d}-{self.owner.id}-{old.serial}.db"
            snapshot = SnapshotRef(key, len(image), hashlib.sha256(image).hexdigest(), time.time())
            try:
                self.objects.put(key, image)
            except StoreError as exc:
                raise self._fail(exc) from exc
            del image
            with self._head_lock:  # the log cannot change meanwhile: we hold the ship lock
                self._put_head(self.head.next(snapshot=snapshot, log=()))
            self._generation, self._salt, self._offset = None, None, 0
            self._collect(old)
            return True

    def _collect(self, old: Head) -> None:
        """Delete what ``head`` no longer names (after it names the new snapshot, O4):
        the old snapshot, the old log, and segments no head ever named (a crashed owner's
        last ones). Failures here lose nothing: the objects are garbage either way."""
        assert self.head is not None
        keep = {self.head.snapshot.key} if self.head.snapshot else set()
        keep |= {segment_key(g.id, n) for g in self.head.log for n in range(1, g.segments + 1)}
        with contextlib.suppress(StoreError):
            stale = [
                k
                for k in self.objects.list("snapshots/") + self.objects.list("log/")
                if k not in keep
            ]
            named = [segment_key(g.id, n) for g in old.log for n in range(1, g.segments + 1)]
            gone = sorted(
                set(stale)
                | (set(named) - keep)
                | ({old.snapshot.key} - keep if old.snapshot else set())
            )
            self.objects.delete(gone)

    # -- closing -----------------------------------------------------------------------------

    def finish(self, *, compact: bool) -> None:
        """Stop the thread and ship everything (a new snapshot too when ``compact`` or the
        log is long). Call before the working copy's engine is disposed (fact 3)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._failure is not None:
            raise self._failure
        assert self.head is not None
        self.ship()
        if (
            compact
            or self.head.log_bytes > self.settings.snapshot_bytes // 4
            or len(self.head.log) > 16
        ):
            self.compact()

    def release(self, *, clean: bool = True) -> None:
        """After the engine is disposed: close the last connection (SQLite checkpoints and
        removes the WAL), record the copy as clean for reuse (unless ``clean`` is False:
        opening failed half-way), and hand the point back."""
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        wal = Path(str(self.db_path) + "-wal")
        clean = (
            clean
            and self._ready
            and self._failure is None
            and not wal.exists()
            and self.head is not None
        )
        if self._private:
            wipe(self.folder)
            with contextlib.suppress(OSError):
                for leftover in self.folder.iterdir():
                    leftover.unlink()
                self.folder.rmdir()
        elif clean:
            assert self.head is not None
            self._write_copy_state(self.head.state_id)
        if self._folder_lock is not None:
            os.close(self._folder_lock)
            self._folder_lock = None
        _LIVE_OWNERS.discard(self.owner.id)
        if not isinstance(self._failure, LeaseTaken) and self.head is not None:
            with contextlib.suppress(StoreError), self._head_lock:
                self._put_head(self.head.next(owner=None))

    def stop_quietly(self) -> None:
        """Stop the thread without shipping (the process is failing anyway)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # -- describing ---------------------------------------------------------------------------

    def describe(self) -> dict[str, object]:
        assert self.head is not None
        return describe_head(self.head)


def describe_head(head: Head) -> dict[str, object]:
    snap = head.snapshot
    return {
        "owner": None if head.owner is None else {"host": head.owner.host, "pid": head.owner.pid},
        "lease_ttl": head.ttl,
        "snapshot": None
        if snap is None
        else {"key": snap.key, "bytes": snap.size, "taken_at": snap.taken_at},
        "log": {
            "generations": len(head.log),
            "segments": head.log_segments,
            "bytes": head.log_bytes,
        },
    }
