"""Run the emulator as a server (``agac emulator``)."""

from __future__ import annotations

import socket

import uvicorn

from agac.errors import UsageError

from .app import create_app
from .state import Config

__all__ = ["check_port", "serve"]


def check_port(host: str, port: int) -> None:
    """UsageError naming the port when ``host:port`` cannot be listened on (another server
    has it, or the address is not this machine's), so the emulator never announces a URL
    it cannot serve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(
            f"cannot serve on {host}: {exc.strerror or exc}",
            hint="give --host an address of this machine, e.g. 127.0.0.1",
        ) from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise UsageError(
                f"cannot serve on {host}:{port}: {exc.strerror or exc}",
                hint="another process listens there: stop it, or choose another port with --port",
            ) from exc


def serve(
    host: str = "127.0.0.1",
    port: int = 8765,
    latency_ms: int = 0,
    batch_seconds: float = 60.0,
    seed: int = 0,
) -> None:
    """Serve every provider on ``host:port`` until interrupted.

    ``latency_ms`` delays each live answer, ``batch_seconds`` is the emulator time a batch
    takes to end (0: batches end at once), ``seed`` varies every answer.
    """
    app = create_app(Config(latency_ms=latency_ms, batch_seconds=batch_seconds, seed=seed))
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
