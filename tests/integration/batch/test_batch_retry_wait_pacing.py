"""B10 (``agac retry`` for batch actions), B11 (``--wait`` and ``batch_deadline``) and
B12 (submission pacing)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_support import (
    MAIN,
    WORKFLOW,
    batches,
    counts,
    creates,
    events,
    make,
    ops,
    params,
    retry,
    rows,
    run,
)

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.errors import RefusedError
from agac.store.repository import Store
from agac.testing import ManualClock

ONE_ATTEMPT = "{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"


def _create_fault(provider: str, fault: dict[str, Any], nth: int = 1) -> dict[str, Any]:
    return {"provider": provider, "op": "batch.create", "nth": nth, "times": 1, "fault": fault}


# -- B10 --------------------------------------------------------------------------------------


@params(MAIN)
def test_b10_retry_submits_a_batch_of_only_the_failed_records_and_the_next_run_collects_it(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider, {"a": 3, "b": 2}, retry=ONE_ATTEMPT)
    emulator.add_fault(_create_fault(provider, {"batch_drop_records": 1}))
    first = run(project)
    emulator.advance(120)
    ended = run(project)
    assert ended.summary["state"] == "partial"
    (failed,) = [k for k, r in rows(project).items() if r["status"] == "failed"]
    assert failed in keys["a.jsonl"]

    again = retry(project)

    assert again.exit_code == 75
    assert again.summary["retry_of"] == first.summary["run_id"]
    last = batches(project)[-1]
    assert (last.file, last.request_count, last.run_id) == ("a.jsonl", 1, again.summary["run_id"])
    assert creates(emulator.stats(), provider) == 3
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0, done.notes
    classify = counts(done)
    assert (classify["answered"], classify["calls"], classify["reused"]) == (5, 1, 4)
    assert rows(project)[failed]["status"] == "answered"
    assert emulator.stats()["duplicate_answers"] == 0


def _failed_run_with_batches_out(provider: str, emulator: RunningEmulator, project: Path) -> None:
    make(project, provider, {"a": 2, "b": 2})
    emulator.add_fault(_create_fault(provider, {"http": 400}, nth=2))
    assert run(project).exit_code == 1  # b refused; a's batch stays out (B0)
    assert [b.file for b in batches(project) if b.state in ("submitted", "running")] == ["a.jsonl"]


@params(MAIN)
def test_b10_retry_is_refused_while_a_batch_of_the_workflow_is_out(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    _failed_run_with_batches_out(provider, emulator, project)

    with pytest.raises(RefusedError, match="abandon-in-flight"):
        retry(project)


@params(MAIN)
def test_b10_abandon_in_flight_fails_the_waiting_records_batch_abandoned_first(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    _failed_run_with_batches_out(provider, emulator, project)

    again = retry(project, abandon_in_flight=True)

    assert again.exit_code == 75
    assert any("abandoned" in n and "a.jsonl" in n for n in again.notes), again.notes
    states = [(b.file, b.state) for b in batches(project)]
    assert states[:2] == [("a.jsonl", "abandoned"), ("b.jsonl", "refused")]
    assert ops(emulator.stats(), provider).get("batch.cancel", 0) == 1
    # The retry sends the refused file and the abandoned one again.
    assert sorted(b.file for b in batches(project)[2:]) == ["a.jsonl", "b.jsonl"]
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0
    assert counts(done)["answered"] == 4


@params(MAIN)
def test_b10_batch_abandoned_shows_in_status_records_show_and_the_events(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    _failed_run_with_batches_out(provider, emulator, project)
    original = api.status(WORKFLOW, project)
    assert counts(original)["reasons"] == {"batch_refused": 2, "batch_outstanding": 2}
    (out,) = [b for b in batches(project) if b.file == "a.jsonl"]

    retry(project, abandon_in_flight=True)

    # The records that waited on the batch failed batch_abandoned in the run they waited in.
    status = api.status(original["run_id"], project)
    assert counts(status)["reasons"] == {"batch_refused": 2, "batch_abandoned": 2}
    assert counts(status, "summarize")["reasons"] == {"upstream_failed": 4}
    waited = rows(project, run_ref=original["run_id"])
    (key,) = [k for k, r in waited.items() if r["reason"] == "batch_abandoned"][:1]
    session = api.record_session(key, project, workflow=WORKFLOW, run_ref=original["run_id"])
    classify = next(a for a in session["actions"] if a["action"] == "classify")
    assert (classify["status"], classify["reason"]) == ("failed", "batch_abandoned")
    assert out.provider_batch_id in classify["detail"] and "a.jsonl" in classify["detail"]
    assert session["status"] == "failed"
    [event] = events(project, original["run_id"], kind="batch_abandoned")
    assert (event["data"]["batch_id"], event["data"]["file"]) == (out.provider_batch_id, "a.jsonl")
    assert event["data"]["units"] == 2 and "--abandon-in-flight" in event["data"]["why"]


# -- B11 --------------------------------------------------------------------------------------


@pytest.fixture
def moving_clock(emulator: RunningEmulator) -> Iterator[None]:
    """Batch time runs 100x faster than the wall clock while the test waits."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.1):
            emulator.advance(10)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


@params(MAIN)
def test_b11_wait_polls_every_poll_interval_until_the_run_is_final(
    provider: str, emulator: RunningEmulator, project: Path, moving_clock: None
) -> None:
    make(project, provider, retry=ONE_ATTEMPT, defaults="poll_interval: 1s")

    result = run(project, wait=True)

    assert result.exit_code == 0, result.notes
    assert counts(result)["answered"] == 5 and counts(result, "summarize")["answered"] == 5
    polls = [e for e in events(project, kind="awaiting") if "status" in e["data"]]
    assert len(polls) >= 2
    assert {e["data"]["poll_interval"] for e in polls} == {1.0}
    assert creates(emulator.stats(), provider) == 2


@params(MAIN)
def test_b11_at_batch_deadline_the_batch_is_cancelled_and_its_records_fail(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, retry=ONE_ATTEMPT, defaults="batch_deadline: 700ms")
    clock = ManualClock()
    st = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    try:
        assert run(project, store=st).exit_code == 75
        clock.advance(0.75)  # past the batch deadline; the batches are still running
        second = run(project, store=st)
    finally:
        st.close()

    assert second.exit_code == 1 and second.summary["state"] == "failed"
    assert counts(second)["reasons"] == {"batch_deadline": 5}
    assert counts(second, "summarize")["reasons"] == {"upstream_failed": 5}
    assert ops(emulator.stats(), provider)["batch.cancel"] == 2
    again = retry(project)
    assert again.exit_code == 75
    assert creates(emulator.stats(), provider) == 4


# -- B12 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai"])
def test_b12_submissions_are_paced_per_provider_and_polling_never_is(
    provider: str, emulator: RunningEmulator, project: Path, monkeypatch: Any
) -> None:
    from agac.engine.limits.rates import RateLimiter
    from agac.providers.registry import provider_class

    monkeypatch.setattr(RateLimiter, "WINDOW", 0.5)  # "a minute" is half a second here
    cls = provider_class(provider)
    calls: list[tuple[str, float]] = []
    for name in ("submit_batch", "poll_batch"):
        original = getattr(cls, name)

        def timed(
            self: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any
        ) -> Any:
            calls.append((_name, time.monotonic()))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, timed)
    make(
        project,
        provider,
        {"a": 1, "b": 1, "c": 1},
        agac_yml=f"providers:\n  {provider}: {{batch_submissions_per_minute: 1}}\n",
    )

    assert run(project).exit_code == 75

    submits = [t for n, t in calls if n == "submit_batch"]
    polls = [t for n, t in calls if n == "poll_batch"]
    assert len(submits) == 3 and len(polls) >= 3
    assert all(b - a >= 0.45 for a, b in itertools.pairwise(submits))
    # The pacer's window is full after the last submission; polls go at once.
    assert min(polls) > submits[-1] and polls[2] - submits[-1] < 0.4
