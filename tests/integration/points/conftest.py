"""Fixtures of the storage-point tests: one moto S3 server on loopback for the session,
behind a proxy that writes one key at a time (every S3 test goes through it), and ``point``,
which runs a test against S3 (through a fault-injecting proxy) and against a directory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from points_support import AWS_ENV, BUCKET, FaultProxy, Point, SerializingProxy


@pytest.fixture(scope="session")
def moto_server() -> Iterator[tuple[str, int]]:
    """Where every S3 request of the suite goes: a :class:`SerializingProxy` in front of
    moto's server, so that moto's unlocked conditional writes cannot both win a race."""
    server_mod = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    proxy = SerializingProxy(server.get_host_and_port()).start()
    host, port = proxy.address
    boto3.client("s3", endpoint_url=f"http://{host}:{port}", **_boto_keys()).create_bucket(
        Bucket=BUCKET
    )
    yield host, port
    proxy.stop()
    server.stop()


def _boto_keys() -> dict[str, str]:
    return {
        "aws_access_key_id": AWS_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": AWS_ENV["AWS_REGION"],
    }


def _s3_point(moto: tuple[str, int], name: str) -> Iterator[Point]:
    import boto3

    proxy = FaultProxy(moto).start()
    prefix = f"{name}-{uuid.uuid4().hex[:8]}"
    client: Any = boto3.client("s3", endpoint_url=f"http://{moto[0]}:{moto[1]}", **_boto_keys())
    env = {**AWS_ENV, "AWS_ENDPOINT_URL": proxy.url}
    yield Point("s3", f"s3://{BUCKET}/{prefix}", env, proxy=proxy, s3=client, prefix=prefix)
    proxy.stop()


@pytest.fixture(params=["s3", "dir"])
def point(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Point]:
    """A storage point on S3 (moto, behind a proxy) and on a directory; the test process's
    own environment reaches it, with its cache under the test's folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-here"))
    if request.param == "dir":
        root = tmp_path / "point"
        yield Point("dir", f"dir://{root.as_posix()}", {}, root=root)
        return
    moto = request.getfixturevalue("moto_server")
    for made in _s3_point(moto, request.node.name.split("[")[0][-40:].replace("_", "-")):
        for key, value in made.env.items():
            monkeypatch.setenv(key, value)
        yield made


@pytest.fixture
def s3_point(
    moto_server: tuple[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Point]:
    """An S3 point only (for what a directory cannot show, such as request counts)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-here"))
    for made in _s3_point(moto_server, "s3"):
        for key, value in made.env.items():
            monkeypatch.setenv(key, value)
        yield made


@pytest.fixture
def dir_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Point:
    """A directory point only (for commands whose behaviour does not depend on the kind)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-here"))
    root = tmp_path / "point"
    return Point("dir", f"dir://{root.as_posix()}", {}, root=root)
