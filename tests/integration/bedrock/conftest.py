"""Fixtures of the Bedrock suite: moto's S3 server on loopback for the session (the
bucket batch jobs read and write), the emulator's Bedrock runtime and control plane, and
fake AWS credentials with the metadata service off, so that nothing leaves 127.0.0.1."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from bedrock_support import AWS_ENV, BUCKET, ROLE

from agac.providers.base import ProviderSettings
from agac.providers.bedrock import BedrockProvider


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """moto's S3 server; its endpoint URL. One bucket, created once."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    keys = {
        "aws_access_key_id": AWS_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": AWS_ENV["AWS_REGION"],
    }
    boto3.client("s3", endpoint_url=url, **keys).create_bucket(Bucket=BUCKET)
    yield url
    server.stop()


@pytest.fixture
def aws(s3_server: str, emulator: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The environment of a Bedrock user pointed at the emulator and moto: fake keys, a
    region, the metadata service off; returns a boto3 S3 client on moto."""
    import boto3

    for name, value in {**AWS_ENV, "AWS_ENDPOINT_URL_S3": s3_server}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return boto3.client("s3", endpoint_url=s3_server)


@pytest.fixture
def prefix(aws: Any) -> str:
    """A fresh ``s3://`` prefix for this test's batch jobs."""
    return f"s3://{BUCKET}/jobs-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def bedrock(aws: Any, prefix: str) -> AsyncIterator[Any]:
    """A factory of Bedrock adapters on this test's prefix (options override)."""
    built: list[BedrockProvider] = []

    def factory(**options: Any) -> BedrockProvider:
        settings = ProviderSettings(
            name="bedrock",
            options={"batch_bucket": prefix, "role_arn": ROLE, **options},
            batch=True,
        )
        adapter = BedrockProvider(settings)
        built.append(adapter)
        return adapter

    yield factory
    for adapter in built:
        await adapter.aclose()
