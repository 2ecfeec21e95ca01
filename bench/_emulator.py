"""The emulator as its own process for the benchmarks, and its control API (imported by
the benchmark scripts beside it; ``python bench/<script>.py`` puts this folder on the path)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from typing import Any

AGAC = [sys.executable, "-m", "agac.cli.main"]


def control(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> Any:
    """One call of the emulator's control API (``/_emulator/...``), its JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=timeout) as response:
        return json.loads(response.read() or b"{}")


def start_emulator(
    port: int, *, batch_seconds: float | None = None, latency_ms: float = 0, wait: float = 20
) -> subprocess.Popen[bytes]:
    """``agac emulator`` on ``port`` in a child process, once it answers its health check."""
    args = ["emulator", "--port", str(port), "--latency-ms", str(latency_ms)]
    if batch_seconds is not None:
        args += ["--batch-seconds", str(batch_seconds)]
    proc = subprocess.Popen(AGAC + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            control(port, "GET", "/_emulator/health", timeout=5)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the emulator did not start")
