"""Store factory: picks the dialect from the URL, applies per-dialect settings,
and brings the schema to the newest migration on first use.

Dialect differences live here and nowhere else: URL scheme mapping (plain
``postgresql://`` means psycopg 3), SQLite pragmas (WAL, foreign keys off, busy
timeout), the advisory lock that serializes migrations on PostgreSQL, and the few
:class:`DialectHooks` the repository calls where the two dialects write SQL differently.

Every driver error of a store engine is translated here, where it happens (SQLAlchemy's
``handle_error`` hook), into :class:`DriverFailure`, a :class:`StoreError` whose message
is the driver's own words about what failed — never the SQL statement or its bound
values, which may hold record data — plus where the store is and how to fix it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from agac.errors import ConfigError, Problem, StoreError
from agac.installing import install_hint

if TYPE_CHECKING:
    from agac.clock import Clock

__all__ = [
    "HEAD_REVISION",
    "WORK_CHANNEL",
    "DialectHooks",
    "DriverFailure",
    "create_store_engine",
    "describe_driver_error",
    "dialect_hooks",
    "display_url",
    "normalize_url",
    "upgrade",
]

HEAD_REVISION = "0017"
"""The newest migration; bump together with a new file under migrations/versions."""
IDLE_IN_TRANSACTION_MS = 10_000
"""PostgreSQL ends a session idle inside a transaction this long (ms); a third of the
default lease TTL."""

_MIGRATION_LOCK = 0x61676163  # "agac"
WORK_CHANNEL = "agac_work"
"""The PostgreSQL channel that wakes idle workers."""
_SQLITE_ROWS_PER_STATEMENT = (256, 64, 16, 4, 1)
"""Rows per multi-row INSERT on SQLite (a few fixed sizes, so a few cached statements)."""


class DialectHooks:
    """What the repository writes differently on SQLite and on PostgreSQL.

    - ``param``: the driver's placeholder, for the statements sent straight to the driver
      on the hot path (``_bulk``, the fence, answer lookups, item results);
    - ``rows_per_statement``: SQLite takes rows as multi-row ``VALUES`` lists of a few
      fixed sizes (the driver gives up the GIL once per statement, not once per row);
      PostgreSQL takes one ``executemany``;
    - ``insert``: the dialect's INSERT, which knows ``ON CONFLICT``;
    - ``for_update``: a row lock on PostgreSQL; SQLite's single writer serializes anyway;
    - ``now``: the time every process on the store agrees on (PostgreSQL's clock; on
      SQLite, one machine, the store's clock);
    - ``notify``: wake idle workers (PostgreSQL ``NOTIFY``; nothing on SQLite);
    - ``floor``: a non-negative number rounded down, in SQL (buckets of time);
    - ``shares_work``: workers on several machines can share the store (row locks, ``SKIP
      LOCKED``, ``LISTEN``/``NOTIFY``): PostgreSQL only.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.postgres = name == "postgresql"
        self.param = "%s" if self.postgres else "?"
        self.rows_per_statement = (1,) if self.postgres else _SQLITE_ROWS_PER_STATEMENT
        self.shares_work = self.postgres

    def insert(self, table: sa.Table) -> Any:
        # Imported here: the PostgreSQL dialect package alone costs ~45 ms of start-up,
        # which a run on SQLite never needs.
        if self.postgres:
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    def for_update(self, query: Any) -> Any:
        return query.with_for_update() if self.postgres else query

    def now(self, conn: Connection, clock: Clock) -> float:
        if self.postgres:
            return float(
                conn.execute(sa.text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one()
            )
        return clock.time()

    def floor(self, value: Any) -> Any:
        if self.postgres:
            return sa.func.floor(value)
        return sa.cast(value, sa.Integer)  # SQLite truncates: the same for values >= 0

    def notify(self, conn: Connection) -> None:
        if self.postgres:
            conn.execute(sa.text(f"SELECT pg_notify('{WORK_CHANNEL}', '')"))


def dialect_hooks(engine: Engine) -> DialectHooks:
    return DialectHooks(engine.dialect.name)


def normalize_url(url: str) -> str:
    """Map the documented store URLs (docs/workflow-reference.md) to SQLAlchemy driver URLs."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


class DriverFailure(StoreError):
    """The store's database driver reported an error."""


def display_url(url: str) -> str:
    """``url`` as a message may show it: a SQLite file as its path, any password hidden."""
    if url in ("memory", "sqlite://"):
        return "memory"
    try:
        parsed = sa.engine.make_url(normalize_url(url))
    except sa.exc.ArgumentError:
        return url.split("@")[-1]
    if parsed.get_backend_name() == "sqlite":
        return str(parsed.database or "memory")
    return parsed.render_as_string(hide_password=True)


def describe_driver_error(exc: BaseException, url: str) -> tuple[str, str | None]:
    """(message, hint) for a driver error on the store at ``url``.

    The message is the driver's first line about the failure — SQLite's text, or for
    PostgreSQL the error class and SQLSTATE (its messages can quote a bound value), or
    its connection message — never SQLAlchemy's rendering, which appends the statement
    and its parameters.
    """
    orig = getattr(exc, "orig", None) or exc
    where = display_url(url)
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate and not sqlstate.startswith("08"):
        said = f"{type(orig).__name__} (SQLSTATE {sqlstate})"
    else:
        lines = [line for line in str(orig).splitlines() if line.strip()]
        said = lines[0].strip() if lines else type(orig).__name__
    return f"{said} (store {where})", _driver_hint(said.lower(), where, url)


def _driver_hint(said: str, where: str, url: str) -> str | None:
    change = "or set AGAC_STORE (or store: in agac.yml) to another store"
    if "readonly" in said or "read-only" in said:
        return f"{where} is read-only: make the file and its folder writable, {change}"
    if "unable to open database file" in said:
        return f"check that the folder of {where} exists and is writable, {change}"
    if "locked" in said:
        return "another process held the store's write lock for 30 s; run again when it is done"
    if "disk" in said or "full" in said:
        return f"free space on the disk that holds {where}"
    if url.startswith(("postgresql", "postgres")) and ("connect" in said or "server" in said):
        return f"check that PostgreSQL is running at {where} and accepts this user, {change}"
    return None


def _translate_driver_errors(engine: Engine, url: str) -> None:
    @sa.event.listens_for(engine, "handle_error")
    def _translate(ctx: Any) -> None:
        message, hint = describe_driver_error(ctx.original_exception, url)
        raise DriverFailure(message, hint=hint) from ctx.original_exception


def create_store_engine(url: str, *, wal_autocheckpoint: int = 10000) -> Engine:
    """An Engine for ``url`` with agac's dialect settings. ``memory`` is an in-process SQLite.

    Its driver errors surface as :class:`DriverFailure` (see the module docstring).
    ``wal_autocheckpoint`` (pages; 0 = never) is SQLite's: a storage point's working copy
    turns it off, because its replica checkpoints the WAL only after shipping it (O1)."""
    engine = _engine_for(url, wal_autocheckpoint)
    _translate_driver_errors(engine, url)
    return engine


def _engine_for(url: str, wal_autocheckpoint: int) -> Engine:
    if url == "memory":
        url = "sqlite://"
    url = normalize_url(url)
    if url.startswith("sqlite"):
        return _sqlite_engine(url, wal_autocheckpoint)
    if url.startswith("postgresql"):
        postgres_table_options()
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                problems=[
                    Problem(
                        "provider_not_installed",
                        "a PostgreSQL store needs psycopg 3",
                        hint=install_hint("postgres"),
                    )
                ]
            ) from exc
        # A process frozen inside a transaction (SIGSTOP, a VM pause) must not hold its row
        # locks (the lease fence among them) for longer than a lease: the server ends such
        # a session, so another process can take the lease over; the frozen one finds its
        # write refused when it resumes (S3).
        return sa.create_engine(
            url,
            pool_pre_ping=True,
            pool_size=5,
            max_overflow=10,
            connect_args={
                "options": f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
            },
        )
    raise ConfigError(problems=[Problem("invalid_store", f"unsupported store URL {url!r}")])


def postgres_table_options() -> None:
    """Give the declared tables their PostgreSQL-only options, once a PostgreSQL store is
    opened (the dialect is loaded then): the partial unique index's ``WHERE``. Idempotent."""
    from agac.store.tables import OPEN_RUN, ux_runs_open

    ux_runs_open.dialect_options["postgresql"]["where"] = OPEN_RUN


def _sqlite_engine(url: str, wal_autocheckpoint: int) -> Engine:
    path = sa.engine.make_url(url).database
    if path and path != ":memory:":
        _make_folder(Path(path).parent)
        # LIFO: the connection used last is handed out again, so a run's store thread
        # keeps one connection whose page cache stays warm. With FIFO, connections
        # take turns and each finds its cache invalidated by the others' writes.
        engine = sa.create_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False}, pool_use_lifo=True
        )
    else:
        engine = sa.create_engine(
            "sqlite://",
            connect_args={"check_same_thread": False},
            poolclass=sa.pool.StaticPool,
        )

    @sa.event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=30000")
        _journal_wal(cur)
        cur.execute("PRAGMA synchronous=NORMAL")
        # Group commits write many small rows: a larger page cache and fewer WAL
        # checkpoints cut their cost. Durability is unchanged (WAL + NORMAL survives a
        # process crash; only an OS crash may lose the last commits).
        cur.execute("PRAGMA cache_size=-65536")
        cur.execute(f"PRAGMA wal_autocheckpoint={int(wal_autocheckpoint)}")
        cur.close()

    return engine


def _make_folder(folder: Path) -> None:
    """The store's folder, created when missing; StoreError naming it when it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the store's folder {folder}: {exc.strerror or exc}",
            hint="set AGAC_STORE (or store: in agac.yml) to a path you can write, e.g. "
            "sqlite:///.agac/agac.db under the project",
        ) from exc


def _journal_wal(cur: Any) -> None:
    """Switch to WAL. A new database stays in its first journal mode until its first write
    commits, and while another connection writes it (e.g. creating the store) the switch
    fails at once with "database is locked", without the busy handler: wait for it."""
    deadline = time.monotonic() + 30.0
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine, *, force: bool = False) -> str:
    """Migrate the schema to HEAD_REVISION; a no-op (without importing Alembic) when it is there.

    On PostgreSQL the migration runs under an advisory lock so that several workers
    starting at once migrate exactly once.
    """
    try:
        if not force and current_revision(engine) == HEAD_REVISION:
            return HEAD_REVISION
        with _sqlite_file_lock(engine):
            if not force and current_revision(engine) == HEAD_REVISION:
                return HEAD_REVISION  # another process migrated while we waited
            if not force and engine.dialect.name == "sqlite" and _create_declared(engine):
                return HEAD_REVISION  # a brand-new SQLite store
            return _run_alembic(engine)
    except DriverFailure as exc:
        raise StoreError(
            f"cannot create or migrate the store: {exc.message}", hint=exc.hint
        ) from exc
    except sa.exc.SQLAlchemyError as exc:
        message, hint = describe_driver_error(exc, str(engine.url))
        raise StoreError(f"cannot create or migrate the store: {message}", hint=hint) from exc


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """Serialize first-use migrations of one SQLite file across processes (PostgreSQL
    uses an advisory lock inside the migration transaction instead)."""
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    if not path or path == ":memory:":
        yield
        return
    import fcntl

    try:
        handle = open(f"{path}.migrate-lock", "a+")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise StoreError(
            f"cannot open {path}.migrate-lock next to the store: {exc.strerror or exc}",
            hint=f"make the folder of {path} writable, or set AGAC_STORE (or "
            "store: in agac.yml) to another store",
        ) from exc
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_ALEMBIC_VERSION = (
    "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
    "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
)


def _create_declared(engine: Engine) -> bool:
    """A brand-new SQLite store gets the declared tables directly, stamped at HEAD, in one
    transaction; True when it did. Importing Alembic and replaying every migration costs a
    first run ~0.2 s; the migrations produce exactly the declared tables (tested by
    tests/integration/store/test_migrations.py), so the result is the same store. A store
    that has any table already is left to Alembic."""
    from sqlalchemy.schema import CreateIndex, CreateTable

    from agac.store.tables import metadata

    statements = []
    for table in metadata.sorted_tables:
        statements.append(str(CreateTable(table).compile(dialect=engine.dialect)))
        statements += [
            str(CreateIndex(ix).compile(dialect=engine.dialect))
            for ix in sorted(table.indexes, key=lambda ix: str(ix.name))
        ]
    try:
        return _create_in_one_transaction(engine, statements)
    except sqlite3.Error as exc:
        message, hint = describe_driver_error(exc, str(engine.url))
        raise StoreError(f"cannot create the store: {message}", hint=hint) from exc


def _create_in_one_transaction(engine: Engine, statements: list[str]) -> bool:
    raw = engine.raw_connection()
    try:
        db = raw.driver_connection
        assert db is not None
        level = db.isolation_level
        db.isolation_level = None  # we say BEGIN and COMMIT ourselves: DDL inside them
        try:
            cur = db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                if cur.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    cur.execute("ROLLBACK")
                    return False
                for sql in statements:
                    cur.execute(sql)
                cur.execute(_ALEMBIC_VERSION)
                cur.execute(
                    "INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD_REVISION,)
                )
                cur.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    cur.execute("ROLLBACK")
                raise
        finally:
            db.isolation_level = level
    finally:
        raw.close()
    return True


def _run_alembic(engine: Engine) -> str:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    return HEAD_REVISION
