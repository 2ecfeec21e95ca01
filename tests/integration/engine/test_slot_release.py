"""S1: a live call keeps its concurrency slot until its answer is committed. The slot goes
back in the store's writer, right after that commit, in the order the group's units
answered — never before: with commits slowed down, the calls in flight plus the answers
not yet committed never exceed ``max_concurrency``."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import rows, run

from agac.providers.base import Request, Response
from agac.providers.mock import MockProvider
from agac.store.repository import Store
from agac.store.rows import Checkpoint
from agac.testing import write_project

WORKFLOW = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""


class _Held:
    """Calls in flight and answers not yet committed, seen from the provider and the store
    (the store may write in its own thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.uncommitted = 0
        self.peak = 0
        self.calls = 0
        self.overlapped = 0
        """Calls that started while an earlier answer was still uncommitted."""

    def sent(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.calls += 1
            self.peak = max(self.peak, self.in_flight + self.uncommitted)
            self.overlapped += self.uncommitted > 0

    def answered(self) -> None:
        with self.lock:
            self.in_flight -= 1
            self.uncommitted += 1

    def committed(self, n: int) -> None:
        with self.lock:
            self.uncommitted -= n


def test_s1_slot_held_until_answer_durable_with_slow_commits(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(project, WORKFLOW, data={"data/a.jsonl": rows(60)})
    monkeypatch.setenv("AGAC_MOCK_LATENCY_MS", "5")
    # Commits in the store thread, 20 ms each: the loop keeps sending meanwhile, so a
    # slot given back before its answer's commit would let a fifth call out.
    monkeypatch.setattr(Store, "commits_inline", property(lambda self: False))
    held = _Held()
    complete, checkpoint = MockProvider.complete, Store.checkpoint

    async def counted(self: MockProvider, request: Request) -> Response:
        held.sent()
        await asyncio.sleep(0.004 * (held.calls % 5))  # answers come back out of step
        response = await complete(self, request)
        held.answered()
        return response

    def slow(self: Store, group: Checkpoint, **kw: Any) -> None:
        time.sleep(0.02)
        checkpoint(self, group, **kw)
        held.committed(sum(1 for o in group.outcomes if o.status == "answered"))

    monkeypatch.setattr(MockProvider, "complete", counted)
    monkeypatch.setattr(Store, "checkpoint", slow)
    result = run(project)
    assert result.state == "succeeded"
    assert held.uncommitted == 0 and held.in_flight == 0
    assert held.peak == 4  # the slots were all used, and never one more
    assert held.overlapped > 0  # calls did go out while other answers waited for their commit
