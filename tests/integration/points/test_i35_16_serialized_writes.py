"""Issue 35 item 16 (a suite green under load): moto's server checks ``If-None-Match`` and
``If-Match`` and then writes without a lock between, so on a busy machine two conditional
creates of one key can both succeed. Every S3 test reaches moto through
:class:`SerializingProxy`, which forwards the writes of one key one at a time.

The first test proves the proxy serializes without depending on timing: an upstream with
moto's flaw made deterministic (it stops between its check and its write until told to go on)
lets two creates both win when reached directly, and exactly one win through the proxy, where
the second request is seen waiting for the key before the first is let go."""

from __future__ import annotations

import http.client
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from points_support import AWS_ENV, BUCKET, SerializingProxy

GUARD = 120.0  # seconds: only a hang ever reaches it


class CheckThenWrite:
    """An S3-like server whose conditional PUT checks, reports the check, waits until
    ``go`` is set, and only then writes: moto's unlocked window, held open on purpose."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.checks = 0
        self.go = threading.Event()
        self._cond = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = server.create(self.path, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.address = "127.0.0.1", int(self._server.server_address[1])

    def create(self, key: str, body: bytes) -> int:
        with self._cond:
            exists = key in self.objects
            self.checks += 1
            self._cond.notify_all()
        if exists:
            return 412
        assert self.go.wait(GUARD), "the test never let the write go on"
        self.objects[key] = body
        return 200

    def wait_for_checks(self, count: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.checks >= count, GUARD)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _create(address: tuple[str, int], path: str, body: bytes) -> int:
    conn = http.client.HTTPConnection(*address, timeout=GUARD)
    try:
        conn.request("PUT", path, body=body, headers={"If-None-Match": "*"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def _in_thread(call: Callable[[], int], into: list[int]) -> threading.Thread:
    thread = threading.Thread(target=lambda: into.append(call()), daemon=True)
    thread.start()
    return thread


@pytest.fixture
def racy() -> Iterator[CheckThenWrite]:
    server = CheckThenWrite()
    yield server
    server.go.set()
    server.stop()


def test_i35_16_the_racy_upstream_lets_two_conditional_creates_both_win(
    racy: CheckThenWrite,
) -> None:
    """The flaw the proxy removes, shown on the upstream alone (so the next test can fail)."""
    statuses: list[int] = []
    first = _in_thread(lambda: _create(racy.address, "/b/head", b"one"), statuses)
    second = _in_thread(lambda: _create(racy.address, "/b/head", b"two"), statuses)
    racy.wait_for_checks(2)  # both found no object before either wrote
    racy.go.set()
    first.join(GUARD)
    second.join(GUARD)
    assert statuses == [200, 200]


def test_i35_16_the_proxy_serializes_conditional_creates_of_one_key(
    racy: CheckThenWrite,
) -> None:
    proxy = SerializingProxy(racy.address).start()
    try:
        statuses: list[int] = []
        first = _in_thread(lambda: _create(proxy.address, "/b/head", b"one"), statuses)
        racy.wait_for_checks(1)  # the first create is inside the upstream's window
        second = _in_thread(lambda: _create(proxy.address, "/b/head", b"two"), statuses)
        proxy.locks.wait_for_waiters("/b/head", 1)  # the second is held at the proxy
        assert racy.checks == 1  # and has not reached the upstream
        other: list[int] = []
        third = _in_thread(lambda: _create(proxy.address, "/b/other", b"three"), other)
        racy.wait_for_checks(2)  # a write of another key is not held behind the first
        racy.go.set()
        for thread in (first, second, third):
            thread.join(GUARD)
    finally:
        proxy.stop()
    assert sorted(statuses) == [200, 412] and other == [200]
    assert racy.objects["/b/head"] == b"one"


def test_i35_16_concurrent_conditional_writes_on_moto_one_wins(
    moto_server: tuple[str, int],
) -> None:
    """The suite's own path to moto: pairs of creates (If-None-Match) and of replaces
    (If-Match on the same ETag) sent together; each pair has exactly one winner."""
    import boto3

    s3: Any = boto3.client(
        "s3",
        endpoint_url=f"http://{moto_server[0]}:{moto_server[1]}",
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=AWS_ENV["AWS_REGION"],
    )
    prefix = f"i35-16-{uuid.uuid4().hex[:8]}"
    for n in range(5):
        key = f"{prefix}/head-{n}"
        assert _together(s3, key, IfNoneMatch="*") == [200, 412]
        etag = s3.head_object(Bucket=BUCKET, Key=key)["ETag"]
        assert _together(s3, key, IfMatch=etag) == [200, 412]
        assert s3.head_object(Bucket=BUCKET, Key=key)["ETag"] != etag


def _together(s3: Any, key: str, **condition: str) -> list[int]:
    """The statuses of two conditional PUTs of ``key`` released at once."""
    from botocore.exceptions import ClientError

    barrier = threading.Barrier(2)
    statuses: list[int] = []
    lock = threading.Lock()

    def put(body: bytes) -> None:
        barrier.wait(GUARD)
        try:
            s3.put_object(Bucket=BUCKET, Key=key, Body=body, **condition)
            status = 200
        except ClientError as exc:
            status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        with lock:
            statuses.append(status)

    bodies = [uuid.uuid4().bytes for _ in range(2)]  # new bytes, so a new ETag, each time
    threads = [threading.Thread(target=put, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
    return sorted(statuses)
