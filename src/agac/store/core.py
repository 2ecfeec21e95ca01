"""The plumbing every part of the repository shares: the engine, the dialect hooks, the
clock, and the one error guard around every read and write.

Every query runs inside :meth:`StoreCore._read` or :meth:`StoreCore._write`, which
translate a driver error into :class:`agac.errors.StoreError` naming what failed, so
nothing above ``store/`` ever sees ``sqlalchemy`` or ``psycopg`` errors (S2: fail
closed, say what failed). ``tests/integration/store/test_store_boundary.py`` checks that
no query bypasses them.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import operator
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from agac.clock import SYSTEM, Clock
from agac.errors import LeaseLost, StoreError, StoreGone
from agac.store.database import (
    DriverFailure,
    create_store_engine,
    describe_driver_error,
    dialect_hooks,
    upgrade,
)

__all__ = ["StoreCore"]


class StoreCore:
    """A connection pool to one agac store (SQLite file, PostgreSQL, or ``memory``)."""

    WAL_AUTOCHECKPOINT = 10000
    """SQLite's automatic checkpoint, in pages (a storage point's working copy: 0)."""

    def __init__(self, url: str, *, migrate: bool = True, clock: Clock = SYSTEM) -> None:
        self.url = url
        self.clock = clock
        """The clock rows are stamped with and leases expire by; a run takes its own from
        its store."""
        self.engine: Engine = create_store_engine(url, wal_autocheckpoint=self.WAL_AUTOCHECKPOINT)
        self.hooks = dialect_hooks(self.engine)
        self.memory = url == "memory"
        self._bulk_cache: dict[tuple[str, str, int, tuple[str, ...] | None], str] = {}
        self.notes: list[str] = []
        """What the user should hear about the store itself (a storage point's torn log, O3)."""
        self._file = _sqlite_file(self.engine)
        self._identity: tuple[int, int] | None = None
        if migrate:
            upgrade(self.engine)
        self._remember_file()

    @property
    def dialect(self) -> str:
        """Which database this is: ``sqlite`` or ``postgresql`` (a fact to report; the
        differences themselves are the dialect hooks')."""
        return self.hooks.name

    @property
    def shares_work(self) -> bool:
        """Whether workers on several machines can share this store (PostgreSQL)."""
        return self.hooks.shares_work

    def close(self) -> None:
        self.engine.dispose()

    # -- durability and ownership (a storage point overrides these) ----------------------------

    def durability_ticket(self) -> concurrent.futures.Future[None] | None:
        """The durability acknowledgement: None when a commit is durable as it returns (SQL
        stores); else a future answered once everything committed so far is stored durably
        (a storage point ships its log, O1), which an effect waits for before it starts."""
        return None

    def owner_confirmed(self) -> bool:
        """True while this process's hold needs no confirming before an effect: always on
        SQL stores (every write checks the fencing token); a storage point says whether
        its lease was confirmed lately (O2)."""
        return True

    def confirm_owner(self) -> None:
        """Confirm this process still owns what it writes (a storage point rewrites its
        ``head``); raises LeaseLost/StoreError otherwise. Nothing to do on SQL stores."""

    @property
    def point(self) -> bool:
        """True for a storage point (object storage or a directory)."""
        return False

    @property
    def commits_inline(self) -> bool:
        """Whether the engine writes its group commits from the event loop's own thread:
        true for a SQLite file, whose commit is local and takes a fraction of a millisecond
        (WAL), so handing it to the store thread (two thread hops and a GIL hand-over per
        driver call) costs more than it saves. PostgreSQL (network round trips), a storage
        point (log shipping) and the in-memory store (one connection shared between threads)
        keep the store thread."""
        return self.hooks.name == "sqlite" and not self.memory and not self.point

    # -- the guard ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _read(self, what: str = "read the store") -> Iterator[Connection]:
        """A connection for reading, inside the error guard."""
        with _guard(what, self.url), self.engine.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[Connection]:
        """One transaction, inside the error guard: committed on success, rolled back on
        any error. A SQLite file store first checks that its path still names the file it
        opened (S7)."""
        if self._file is not None:
            self._check_file(what)
        with _guard(what, self.url), self.engine.begin() as conn:
            yield conn
        if self._identity is None:
            self._remember_file()

    # -- the file under a SQLite store (S7) -----------------------------------------------------

    def files(self) -> tuple[Path, ...]:
        """The files of a SQLite file store — its database and what SQLite and agac keep
        beside it (``-wal``, ``-shm``, ``-journal``, ``.migrate-lock``) — which nothing but
        the store may write (an export refuses them, X1); none for other stores."""
        if self._file is None:
            return ()
        db = Path(self._file)
        return (
            db,
            *(db.with_name(db.name + end) for end in ("-wal", "-shm", "-journal", ".migrate-lock")),
        )

    def _remember_file(self) -> None:
        """Note which file the store's path names now: device and inode (None until it
        exists; the first write creates it)."""
        if self._file is None:
            return
        try:
            st = os.stat(self._file)
        except OSError:
            return
        self._identity = (st.st_dev, st.st_ino)

    def _check_file(self, what: str) -> None:
        """StoreGone when the store's path no longer names the file this store opened (it
        was deleted, or replaced by another file): whatever is written from here on would
        be lost with the deleted file, or mixed into a store that is not this one."""
        if self._identity is None:
            return
        try:
            st = os.stat(self._file)  # type: ignore[arg-type]  # _identity implies a file
        except FileNotFoundError:
            now = "no longer exists"
        except OSError as exc:
            raise StoreError(
                f"cannot {what}: cannot check the store file {self._file}: {exc.strerror or exc}"
            ) from exc
        else:
            if (st.st_dev, st.st_ino) == self._identity:
                return
            now = "now names another file"
        raise StoreGone(
            f"cannot {what}: the store file {self._file} {now} — it was deleted or replaced "
            "while this process had it open, so nothing more is written",
            hint="restore the store file from a backup if you have one; otherwise the state "
            "written by this process is gone, and the next `agac run` starts afresh",
        )

    # -- the fence (S3) -----------------------------------------------------------------------

    def _fence(self, conn: Connection, name: str, token: int, ttl: float) -> None:
        """Extend lease ``name`` inside the caller's transaction, or LeaseLost when its
        token moved on (another process owns it now). Straight to the driver: every
        checkpoint begins with it."""
        mark = self.hooks.param
        res = conn.exec_driver_sql(
            f"UPDATE leases SET expires_at = {mark} WHERE name = {mark} AND token = {mark}",
            (self.clock.time() + ttl, name, token),
        )
        if res.rowcount != 1:
            raise LeaseLost(f"lease {name} was taken over by another process; stopping")

    # -- bulk inserts -------------------------------------------------------------------------

    def _bulk(
        self,
        conn: Connection,
        table: sa.Table,
        rows: Sequence[Any],
        suffix: str = "",
        *,
        tenant: str | None = None,
    ) -> None:
        """INSERT straight to the driver: the hot path of every checkpoint.

        Rows are typed rows (agac/store/rows.py: named tuples whose fields are columns of
        ``table``), or dicts keyed by column name. A typed row's fields are mapped to the
        table's columns once per row type: a row whose fields are the columns in the
        table's order (most are) is bound as it is, and the ``tenant`` given is appended to
        each row of a table that has one. Columns a row type does not name keep their
        server defaults. Statements are sent as the dialect hooks say (multi-row
        ``VALUES`` of a few fixed sizes on SQLite, one ``executemany`` on PostgreSQL).
        """
        if not rows:
            return
        values: list[Any]
        first = rows[0]
        if isinstance(first, dict):
            sql_key: tuple[str, ...] | None = None
            cols = self._columns(table)
            try:
                get = operator.itemgetter(*cols)
                values = [get(r) for r in rows]
            except KeyError:
                values = [tuple(r.get(c) for c in cols) for r in rows]
            if len(cols) == 1:
                values = [(v,) for v in values]
        else:
            fields: tuple[str, ...] = first._fields
            with_tenant = tenant is not None and "tenant" in table.c and "tenant" not in fields
            sql_key = (*fields, "tenant") if with_tenant else fields
            cols = sql_key
            values = [(*r, tenant) for r in rows] if with_tenant else list(rows)
        at = 0
        for size in self.hooks.rows_per_statement:
            n = (len(values) - at) // size
            if not n:
                continue
            sql = self._bulk_sql(table, suffix, size, sql_key)
            if size == 1:
                conn.exec_driver_sql(sql, values[at:])
                return
            chunks = [
                tuple(itertools.chain.from_iterable(values[i : i + size]))
                for i in range(at, at + n * size, size)
            ]
            conn.exec_driver_sql(sql, chunks)
            at += n * size

    def _columns(self, table: sa.Table) -> tuple[str, ...]:
        """The columns a row of ``table`` gives (an autoincrement ``id`` is the database's)."""
        return tuple(
            c.name for c in table.columns if not (c.primary_key and c.autoincrement is True)
        )

    def _bulk_sql(
        self, table: sa.Table, suffix: str, size: int, cols: tuple[str, ...] | None
    ) -> str:
        """``INSERT`` of ``size`` rows into ``cols`` (None: every column a row gives), built
        once per shape."""
        key = (table.name, suffix, size, cols)
        sql = self._bulk_cache.get(key)
        if sql is None:
            names = cols if cols is not None else self._columns(table)
            unknown = [c for c in names if c not in table.c]
            if unknown:
                raise ValueError(f"{table.name} has no column {unknown[0]!r}")
            mark = self.hooks.param
            row = f"({', '.join([mark] * len(names))})"
            sql = self._bulk_cache[key] = (
                f"INSERT INTO {table.name} ({', '.join(names)}) VALUES "
                f"{', '.join([row] * size)} {suffix}"
            )
        return sql


def _sqlite_file(engine: Engine) -> str | None:
    """The absolute path of a SQLite file store's database; None for other stores."""
    if engine.dialect.name != "sqlite":
        return None
    path = engine.url.database
    if not path or path == ":memory:":
        return None
    return os.path.abspath(path)


@contextlib.contextmanager
def _guard(what: str, url: str) -> Iterator[None]:
    """Say what failed (S2: fail closed): a driver failure becomes StoreError "cannot
    <what>: <the driver's words>", without the SQL or its values (see
    :func:`agac.store.database.describe_driver_error`)."""
    try:
        yield
    except DriverFailure as exc:
        raise StoreError(f"cannot {what}: {exc.message}", hint=exc.hint) from exc
    except sa.exc.SQLAlchemyError as exc:
        message, hint = describe_driver_error(exc, url)
        raise StoreError(f"cannot {what}: {message}", hint=hint) from exc
