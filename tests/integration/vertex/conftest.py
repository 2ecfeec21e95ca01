"""Fixtures of the Vertex AI suite: a Vertex user's environment pointed at the emulator
(its token endpoint, its Vertex routes and its Cloud Storage), and adapters on this
test's ``gs://`` prefix."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from vertex_support import BUCKET

from agac.providers.base import ProviderSettings
from agac.providers.vertex import VertexProvider


@pytest.fixture
def gcp(emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment a Vertex user's shell would have, against the emulator."""
    env: dict[str, str] = emulator.vertex_env(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def prefix(gcp: Any) -> str:
    """A fresh ``gs://`` prefix for this test's batch jobs."""
    return f"gs://{BUCKET}/jobs-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def vertex(gcp: Any, prefix: str) -> AsyncIterator[Any]:
    """A factory of Vertex adapters on this test's prefix (options override)."""
    built: list[VertexProvider] = []

    def factory(transport: str = "lean", **options: Any) -> VertexProvider:
        settings = ProviderSettings(
            name="vertex",
            options={"batch_bucket": prefix, **options},
            transport=transport,  # type: ignore[arg-type]
            batch=True,
        )
        adapter = VertexProvider(settings)
        built.append(adapter)
        return adapter

    yield factory
    for adapter in built:
        await adapter.aclose()
