"""Run the emulator as a server (``agac emulator``)."""

from __future__ import annotations

import uvicorn

from agac.ports import check_port

from .app import create_app
from .state import Config

__all__ = ["check_port", "serve"]


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
