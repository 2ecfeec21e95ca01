"""Run the emulator inside a test process: :class:`RunningEmulator`.

It serves on 127.0.0.1 on a free port from a background thread, so official SDKs reach it
over real loopback HTTP (no mocks; ``openai`` 3.x runs on ``httpx2``, which transport
mocks for ``httpx`` do not intercept). Its helpers talk to the control API over HTTP, so
they are safe to call from the test's thread::

    with RunningEmulator(batch_seconds=60) as emu:
        client = OpenAI(base_url=emu.env()["OPENAI_BASE_URL"], api_key="x")
        ...
        emu.add_fault({"provider": "openai", "op": "chat", "fault": {"http": 503}})
        emu.advance(60)
        assert emu.stats()["duplicate_answers"] == 0
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import uvicorn

from .app import create_app
from .env import variables
from .google_auth import vertex_env
from .state import Config, EmulatorState

__all__ = ["RunningEmulator"]


class RunningEmulator:
    """A live emulator for the duration of a ``with`` block (or ``start()``/``stop()``).

    ``state`` is the server's :class:`~agac.emulator.state.EmulatorState`; read it for
    assertions, but change it only through the methods below (they go through the
    server's own event loop, via HTTP).
    """

    def __init__(
        self,
        *,
        latency_ms: int = 0,
        batch_seconds: float = 60.0,
        seed: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        self.host = host
        self.state = EmulatorState(
            Config(latency_ms=latency_ms, batch_seconds=batch_seconds, seed=seed)
        )
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The server's root URL, e.g. ``http://127.0.0.1:43121``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        """Bind a free port and serve until :meth:`stop`; returns once it accepts calls."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        self._socket = sock
        config = uvicorn.Config(
            create_app(state=self.state), log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"agac-emulator-{self.port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the emulator did not start within 10 s")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The environment variables that point every SDK here (see :mod:`.env`)."""
        return variables(self.port, self.host)

    def vertex_env(self, folder: Path) -> dict[str, str]:
        """The environment of a Vertex AI user pointed here, with a service account key
        written in ``folder`` (see :mod:`.google_auth`)."""
        return vertex_env(folder, self.url)

    def advance(self, seconds: float) -> dict[str, Any]:
        """Move emulator time forward by ``seconds`` for every batch."""
        return self._call("POST", "/_emulator/clock", {"advance": seconds})

    def clock(self) -> dict[str, Any]:
        """Emulator time: ``{"now", "offset", "held"}``."""
        return self._call("GET", "/_emulator/clock")

    def hold_clock(self) -> dict[str, Any]:
        """Stop emulator time following the wall clock until the next :meth:`reset`: batches
        then progress only when a test advances them, however slow the machine is."""
        return self._call("POST", "/_emulator/clock", {"hold": True})

    def advance_batch(self, batch_id: str, seconds: float | None = None) -> dict[str, Any]:
        """Move one batch forward by ``seconds``, or to its end when ``None``."""
        body = {} if seconds is None else {"seconds": seconds}
        return self._call("POST", f"/_emulator/batches/{batch_id}/advance", body)

    def add_fault(self, *rules: dict[str, Any]) -> dict[str, Any]:
        """Append fault rules (issue 3's RULE objects)."""
        return self._call("POST", "/_emulator/faults", {"rules": list(rules)})

    def clear_faults(self) -> dict[str, Any]:
        """Remove every rule and release batches stuck in cancelling."""
        return self._call("DELETE", "/_emulator/faults")

    def stats(self) -> dict[str, Any]:
        """``GET /_emulator/stats``."""
        return self._call("GET", "/_emulator/stats")

    def requests(self) -> list[dict[str, Any]]:
        """``GET /_emulator/requests``: the requests received since the last reset, oldest
        first (see :mod:`.app`)."""
        return list(self._call("GET", "/_emulator/requests")["requests"])

    def context_caches(self) -> dict[str, Any]:
        """``GET /_emulator/context_caches``: every Gemini context cache created since the last
        reset, with the requests that named it (see :mod:`.app`)."""
        return dict(self._call("GET", "/_emulator/context_caches"))

    def cache(self) -> dict[str, Any]:
        """``GET /_emulator/cache``: how many prompt prefixes are cached."""
        return self._call("GET", "/_emulator/cache")

    def clear_cache(self) -> dict[str, Any]:
        """``DELETE /_emulator/cache``: forget every cached prompt prefix."""
        return self._call("DELETE", "/_emulator/cache")

    def reset_stats(self) -> dict[str, Any]:
        """``DELETE /_emulator/stats``: zero the counters."""
        return self._call("DELETE", "/_emulator/stats")

    def set_models(self, models: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """What the Models API says of these models (``{id: {"lifecycle": "deprecated",
        "retires_at": "2026-10-01T00:00:00Z"}}``); models not listed are active."""
        return self._call("POST", "/_emulator/models", {"models": models})

    def entra(self, token_seconds: float | None = None) -> dict[str, Any]:
        """``/_emulator/entra``: the Entra ID tokens issued so far; with ``token_seconds``,
        first set how long the next ones live."""
        if token_seconds is None:
            return self._call("GET", "/_emulator/entra")
        return self._call("POST", "/_emulator/entra", {"token_seconds": token_seconds})

    def reset(self) -> dict[str, Any]:
        """Forget everything: files, batches, faults, counters and the clock offset."""
        return self._call("POST", "/_emulator/reset")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            exc.close()
            raise ValueError(f"{method} {path} failed: {exc.code} {detail}") from None
