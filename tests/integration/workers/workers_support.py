"""Helpers of the scale-out suite: a project on a PostgreSQL store and worker subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg


def agac(
    root: Path, env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        check=False,
        cwd=root,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_worker(
    root: Path, env: dict[str, str], *args: str, log: Path | None = None
) -> subprocess.Popen[str]:
    """``agac worker --json …`` in the background; stderr goes to ``log`` (a file) so a
    chatty worker never blocks on a full pipe."""
    if log is None:
        log = root / f"worker-{time.monotonic_ns()}.log"
    err = open(log, "w", encoding="utf-8")  # noqa: SIM115 - the child writes it
    proc = subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", "worker", "--json", *args],
        cwd=root,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
    )
    proc.log = log  # type: ignore[attr-defined]
    err.close()
    STARTED.append(proc)
    return proc


STARTED: list[subprocess.Popen[str]] = []
"""Every worker a test started; the suite's conftest kills and reaps what is left after
each test, so a failed assertion never leaves a worker running into the next test."""


def reap_all() -> None:
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=240)


def log_of(proc: subprocess.Popen[str]) -> str:
    return Path(proc.log).read_text(encoding="utf-8")  # type: ignore[attr-defined]


def finish(proc: subprocess.Popen[str], timeout: float = 240) -> dict[str, Any]:
    """Wait for a worker started with --exit-when-done (or stopped); its JSON report."""
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, log_of(proc)[-3000:]
    return dict(json.loads(out))


def terminate(proc: subprocess.Popen[str], timeout: float = 240) -> dict[str, Any]:
    proc.send_signal(signal.SIGTERM)
    return finish(proc, timeout)


def query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return list(conn.execute(sql, params).fetchall())


def wait_for(check: Callable[[], bool], timeout: float, what: str, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def status(root: Path, env: dict[str, str], ref: str) -> dict[str, Any]:
    done = agac(root, env, "status", ref, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))
