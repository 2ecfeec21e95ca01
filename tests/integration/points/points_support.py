"""Storage points under test: moto's S3 server on loopback behind a fault-injecting proxy,
or a directory; and ``agac`` run as a subprocess on "machines" (cache folders).

moto enforces ``If-None-Match`` and ``If-Match`` on PUT, but does not lock between checking
a condition and writing: two conditional creates of one key can both succeed when the
machine is busy. Every S3 request of the suite therefore goes through
:class:`SerializingProxy`, which writes one key at a time as S3 does; the race tests prove
the protocol's logic (every writer of ``head`` goes through compare-and-swap, and a loser
stops), never moto's atomicity.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}
BUCKET = "agac-points"
_DROPPED = (
    "AGAC_",
    "OPENAI_",
    "ANTHROPIC_",
    "GEMINI_",
    "GOOGLE_",
    "GROQ_",
    "OLLAMA_",
    "AWS_",
    "XDG_CACHE_HOME",
)


@dataclass
class Request:
    at: float
    method: str
    path: str
    status: int


@dataclass
class FaultProxy:
    """An HTTP proxy in front of moto that logs every request and, when asked, answers
    every write (PUT, POST, DELETE) with 503 as an overloaded server would."""

    upstream: tuple[str, int]
    log: list[Request] = field(default_factory=list)
    fail_writes: bool = False
    _server: ThreadingHTTPServer | None = None

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if proxy.fail_writes and self.command in ("PUT", "POST", "DELETE"):
                    self._answer(503, b"<Error><Code>SlowDown</Code></Error>", {})
                    return
                self._answer(*relay(self, body, proxy.upstream))

            def _answer(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
                proxy.log.append(Request(time.time(), self.command, self.path, status))
                answer(self, status, data, headers)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def writes(self) -> list[Request]:
        return [r for r in self.log if r.method in ("PUT", "POST", "DELETE") and r.status < 300]


def relay(
    handler: BaseHTTPRequestHandler, body: bytes | None, upstream: tuple[str, int]
) -> tuple[int, bytes, dict[str, str]]:
    """Send the request ``handler`` is serving to ``upstream``; its status, body and the
    headers worth passing back (a HEAD's Content-Length included: it is the object's size)."""
    conn = http.client.HTTPConnection(*upstream, timeout=120)
    try:
        conn.request(handler.command, handler.path, body=body, headers=dict(handler.headers))
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    hop = (
        "transfer-encoding",
        "connection",
        *(() if handler.command == "HEAD" else ("content-length",)),
    )
    return resp.status, data, {k: v for k, v in resp.getheaders() if k.lower() not in hop}


def answer(
    handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: Mapping[str, str]
) -> None:
    """Write a response: the headers given, and the body but for a HEAD."""
    handler.send_response(status)
    for k, v in headers.items():
        handler.send_header(k, v)
    if not any(k.lower() == "content-length" for k in headers):
        handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)


class KeyLocks:
    """One lock per object key, and how many requests wait on each (so a test can see a
    request held back without timing it)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: set[str] = set()
        self._waiting: Counter[str] = Counter()

    @contextlib.contextmanager
    def holding(self, key: str) -> Iterator[None]:
        with self._cond:
            self._waiting[key] += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: key not in self._held)
            self._waiting[key] -= 1
            self._held.add(key)
        try:
            yield
        finally:
            with self._cond:
                self._held.discard(key)
                self._cond.notify_all()

    def wait_for_waiters(self, key: str, count: int, timeout: float = 120.0) -> None:
        """Return once ``count`` requests wait for ``key`` (the timeout only guards a hang)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._waiting[key] >= count, timeout):
                raise AssertionError(f"{count} request(s) never waited for {key}")


def write_key(method: str, path: str) -> str | None:
    """The object a request replaces or deletes (its path), or None for a read or for one
    part of a multipart upload (which changes no object until the upload completes)."""
    if method not in ("PUT", "POST", "DELETE"):
        return None
    target, _, query = path.partition("?")
    if "partNumber=" in query:
        return None
    return target


@dataclass
class SerializingProxy:
    """An HTTP proxy in front of moto that forwards the writes of one key one at a time:
    a conditional PUT's check and write are then one step, as on S3 itself, however busy
    the machine is. Reads, and writes of different keys, pass side by side."""

    upstream: tuple[str, int]
    locks: KeyLocks = field(default_factory=KeyLocks)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> SerializingProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                key = write_key(self.command, self.path)
                if key is None:
                    answer(self, *relay(self, body, proxy.upstream))
                    return
                with proxy.locks.holding(key):
                    status, data, headers = relay(self, body, proxy.upstream)
                answer(self, status, data, headers)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None
        return "127.0.0.1", int(self._server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class Point:
    """One storage point of a test: its URL, the environment a process needs to reach it,
    and ways to look at and damage its objects."""

    def __init__(
        self,
        kind: str,
        url: str,
        env: dict[str, str],
        *,
        root: Path | None = None,
        proxy: FaultProxy | None = None,
        s3: Any = None,
        prefix: str = "",
    ) -> None:
        self.kind, self.url, self.env, self.root = kind, url, env, root
        self.proxy, self.s3, self.prefix = proxy, s3, prefix

    def object_keys(self) -> list[str]:
        if self.root is not None:
            return sorted(
                p.relative_to(self.root).as_posix()
                for p in self.root.rglob("*")
                if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".lock")
            )
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=self.prefix + "/"
        )
        return sorted(
            o["Key"][len(self.prefix) + 1 :] for page in pages for o in page.get("Contents", [])
        )

    def read(self, key: str) -> bytes:
        if self.root is not None:
            return (self.root / key).read_bytes()
        return bytes(self.s3.get_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}")["Body"].read())

    def write(self, key: str, data: bytes) -> None:
        """Overwrite an object behind agac's back (a torn or altered object)."""
        if self.root is not None:
            (self.root / key).write_bytes(data)
        else:
            self.s3.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{key}", Body=data)

    def head(self) -> dict[str, Any]:
        return json.loads(self.read("head"))

    @contextlib.contextmanager
    def failing_writes(self) -> Iterator[None]:
        """Every write to the point fails until the block ends (a server refusing writes;
        for a directory, its log folder replaced by a file)."""
        if self.proxy is not None:
            self.proxy.fail_writes = True
            try:
                yield
            finally:
                self.proxy.fail_writes = False
            return
        assert self.root is not None
        log, away = self.root / "log", self.root / "log.away"
        log.mkdir(exist_ok=True)
        log.rename(away)
        log.write_text("not a folder")
        try:
            yield
        finally:
            log.unlink()
            away.rename(log)

    def fail_writes_now(self) -> None:
        if self.proxy is not None:
            self.proxy.fail_writes = True
        else:
            assert self.root is not None
            log = self.root / "log"
            log.mkdir(exist_ok=True)
            log.rename(self.root / "log.away")
            log.write_text("not a folder")

    def heal(self) -> None:
        if self.proxy is not None:
            self.proxy.fail_writes = False
        else:
            assert self.root is not None
            (self.root / "log").unlink()
            (self.root / "log.away").rename(self.root / "log")


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:
        return f"exit {self.code}\n--stdout--\n{self.out[-3000:]}\n--stderr--\n{self.err[-3000:]}"


def machine_env(
    point: Point, cache: Path, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of ``agac`` on a machine whose cache is ``cache``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED)}
    env.pop("FORCE_COLOR", None)
    env.update(point.env)
    env["XDG_CACHE_HOME"] = str(cache)
    env["PYTHONWARNINGS"] = "error"
    env.update(extra or {})
    return env


def agac(
    root: Path,
    *args: str,
    point: Point,
    cache: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 240,
) -> Done:
    """``agac ARGS`` in project ``root`` on the machine with cache folder ``cache``."""
    proc = subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env=machine_env(point, cache, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Done(proc.returncode, proc.stdout, proc.stderr)


def spawn(
    root: Path, *args: str, point: Point, cache: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env=machine_env(point, cache, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def fresh_copy(src: Path, dst: Path) -> Path:
    """The project as a new machine checks it out: its files, none of agac's state."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".agac"))
    return dst


def wait_for(predicate: Any, timeout: float = 240.0, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError("condition not met in time")
