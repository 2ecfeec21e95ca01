"""A throwaway PostgreSQL server for the test run (README.md, Contributing).

:func:`start_server` finds the server binaries (``pg_config --bindir``, else
``/usr/lib/postgresql/*/bin``), runs ``initdb`` into a fresh temporary folder and starts
``postgres`` on 127.0.0.1 at a free port, with its unix socket and log inside its data
directory, trust authentication and durability turned off (fsync, synchronous_commit,
full_page_writes) because a test database is thrown away. It creates the database
``agac_test`` and returns a :class:`PostgresServer` whose ``url`` is in docs/guarantees.md, The store's
plain form ``postgresql://postgres@127.0.0.1:<port>/agac_test``.

``initdb`` refuses to run as root. As root, the folder is handed to the system user
``postgres`` (created with ``useradd --system`` when missing) and the binaries run as
that user through ``runuser`` (or ``su``). Otherwise they run as the current user.

:meth:`PostgresServer.stop` stops the server and removes the folder; it is idempotent
and also registered with :mod:`atexit`, so an aborted test run leaves nothing behind.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "PG_USER",
    "PostgresServer",
    "PostgresUnavailable",
    "find_bindir",
    "in_ci",
    "skip_or_fail",
    "start_server",
]

PG_USER = "postgres"
TEST_DATABASE = "agac_test"
_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
}


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are not installed on this machine."""


@dataclass
class PostgresServer:
    """A running throwaway server; ``url`` names its ``agac_test`` database."""

    bindir: Path
    base: Path
    port: int
    run_as: str | None
    _stopped: bool = field(default=False, repr=False)

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def url(self) -> str:
        return self.url_for(TEST_DATABASE)

    def url_for(self, database: str) -> str:
        """The plain-scheme URL of another database on this server."""
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server log, for error messages."""
        try:
            text = (self.datadir / "server.log").read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server at once and remove its folder; safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        if (self.datadir / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _run(
                    self,
                    [
                        str(self.bindir / "pg_ctl"),
                        "-D",
                        str(self.datadir),
                        "-m",
                        "immediate",
                        "-w",
                        "stop",
                    ],
                    timeout=60,
                )
        shutil.rmtree(self.base, ignore_errors=True)


def in_ci() -> bool:
    """True when the suite runs in CI (env ``CI`` set to anything but 0/false/no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test, or fail it in CI: there the PostgreSQL half is not optional."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: PostgreSQL tests must run, not skip)")
    pytest.skip(reason)


def find_bindir(override: str | None = None) -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None.

    ``override`` names the folder to use instead of searching (None: search).
    """
    if override is not None:
        return Path(override) if _has_server_binaries(Path(override)) else None
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(Path(out.stdout.strip()))
    # Newest version first: the glob sorts "15" after "14".
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if _has_server_binaries(folder):
            return folder
    return None


def _has_server_binaries(folder: Path) -> bool:
    return all((folder / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres", "createdb"))


def start_server(bindir_override: str | None = None, attempts: int = 3) -> PostgresServer:
    """Start a server as described in the module docstring and return it.

    ``bindir_override`` is passed to :func:`find_bindir`. Raises :class:`PostgresUnavailable` when the binaries are missing and
    ``RuntimeError`` (with the server log) when they are there but fail.
    """
    bindir = find_bindir(bindir_override)
    if bindir is None:
        where = bindir_override or "no `pg_config --bindir`, no /usr/lib/postgresql/*/bin"
        raise PostgresUnavailable(
            f"PostgreSQL server binaries not found ({where}); "
            "install postgresql to run the PostgreSQL tests"
        )
    run_as = _unprivileged_user()
    base = _make_base(run_as)
    server = PostgresServer(bindir=bindir, base=base, port=0, run_as=run_as)
    atexit.register(server.stop)
    try:
        _initdb(server)
        _start_on_free_port(server, attempts)
        _create_database(server, TEST_DATABASE)
    except BaseException:
        server.stop()
        raise
    return server


def _unprivileged_user() -> str | None:
    """The user to run the binaries as: ``postgres`` when we are root, else None."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", PG_USER],
            check=True,
            capture_output=True,
        )
    return PG_USER


def _make_base(run_as: str | None) -> Path:
    # As root, a folder under /tmp: the postgres user must be able to reach it, which
    # it cannot under e.g. /root.
    parent = "/tmp" if run_as and os.path.isdir("/tmp") else None
    base = Path(tempfile.mkdtemp(prefix="agac-pg-", dir=parent))
    if run_as:
        entry = pwd.getpwnam(run_as)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    return base


def _initdb(server: PostgresServer) -> None:
    _run(
        server,
        [
            str(server.bindir / "initdb"),
            "-D",
            str(server.datadir),
            "-U",
            PG_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        ],
        timeout=180,
    )
    conf = server.datadir / "postgresql.conf"
    settings = dict(_SETTINGS, unix_socket_directories=f"'{server.datadir}'")
    with conf.open("a", encoding="utf-8") as handle:
        handle.write("\n# agac test harness\n")
        for name, value in settings.items():
            handle.write(f"{name} = {value}\n")


def _start_on_free_port(server: PostgresServer, attempts: int) -> None:
    """Start the server; another process may grab the port first, so try again."""
    error: Exception | None = None
    for _ in range(attempts):
        server.port = _free_port()
        try:
            _run(
                server,
                [
                    str(server.bindir / "pg_ctl"),
                    "-D",
                    str(server.datadir),
                    "-l",
                    str(server.datadir / "server.log"),
                    "-o",
                    f"-p {server.port}",
                    "-w",
                    "-t",
                    "60",
                    "start",
                ],
                timeout=90,
            )
            return
        except RuntimeError as exc:
            error = exc
            time.sleep(0.2)
    raise RuntimeError(f"PostgreSQL did not start:\n{error}\n{server.log_tail()}")


def _create_database(server: PostgresServer, name: str) -> None:
    _run(
        server,
        [
            str(server.bindir / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(server.port),
            "-U",
            PG_USER,
            name,
        ],
        timeout=60,
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(server: PostgresServer, argv: Sequence[str], timeout: float) -> None:
    """Run a server binary as ``server.run_as``, raising RuntimeError with its output."""
    command = _as_user(list(argv), server.run_as)
    # cwd inside our folder: the postgres user may not be able to read ours.
    result = subprocess.run(
        command, cwd=server.base, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )


def _as_user(argv: list[str], user: str | None) -> list[str]:
    if user is None:
        return argv
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", user, "--", *argv]
    su = shutil.which("su")
    if su:
        return [su, user, "-s", "/bin/sh", "-c", shlex.join(argv)]
    raise PostgresUnavailable("running as root, but neither runuser nor su is available")
