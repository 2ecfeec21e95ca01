"""The lifetime of a run's explicit context cache (docs/providers.md, Gemini explicit
caches): an hour online, the batch deadline for a batch action, never past the run's
deadline."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agac.engine.lifecycle.contextcaches import BATCH_TTL, ONLINE_TTL, cache_ttl


def _runtime(run_mode: str, batch_deadline: float | None = None) -> Any:
    action = SimpleNamespace(kind="llm", run_mode=run_mode, batch_deadline=batch_deadline)
    return SimpleNamespace(action=action, batch=object() if run_mode == "batch" else None)


@pytest.mark.parametrize(("deadline", "expected"), [(None, ONLINE_TTL), (1000.0 + 600, 600.0)])
def test_i24_gemini_context_cache_ttl_online(deadline: float | None, expected: float) -> None:
    assert cache_ttl(_runtime("online"), deadline, 1000.0) == expected


def test_i24_gemini_context_cache_ttl_batch_is_the_batch_deadline() -> None:
    rt = _runtime("batch", 6 * 3600.0)
    assert cache_ttl(rt, None, 1000.0) == 6 * 3600
    assert cache_ttl(rt, 1000.0 + 3600, 1000.0) == 3600
    assert cache_ttl(_runtime("batch"), None, 1000.0) == BATCH_TTL
