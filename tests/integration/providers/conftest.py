"""Fixtures of the provider contract suite: one emulator per session, a clean slate per
test (``emulator``, tests/conftest.py), and adapters built from the emulator's environment
(base URLs and dummy keys) exactly as a user's shell would configure them.

Every test that builds an adapter runs twice, once per online transport (docs/providers.md
P1): ``lean`` (agac's own HTTP client, the default) and ``sdk`` (the official SDK).
Batch and file calls go through the SDK on both. Nothing is mocked: both talk to the
emulator over loopback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agac.providers.base import TRANSPORTS, ProviderSettings, Transport
from agac.providers.registry import provider_class

ProviderFactory = Callable[..., Any]


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Transport:
    """The online transport the adapters of this test use."""
    value: Transport = request.param
    return value


@pytest.fixture
async def make_provider(emulator: Any, transport: Transport) -> AsyncIterator[ProviderFactory]:
    """Build adapters from the environment (``options`` go to ProviderSettings) on this
    test's transport; every adapter built is closed after the test."""
    built: list[Any] = []

    def factory(name: str, **options: Any) -> Any:
        settings = ProviderSettings(name=name, options=options, transport=transport)
        adapter = provider_class(name)(settings)
        built.append(adapter)
        return adapter

    yield factory
    for adapter in built:
        await adapter.aclose()
