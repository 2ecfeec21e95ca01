"""R4 deadlines and ``agac cancel``, through the library API."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest
from engine_helpers import BASIC, past_deadline_after, rows, run

from agac import api
from agac.config.project import find_project
from agac.engine.lifecycle.admission import admit_run
from agac.engine.lifecycle.options import RunOptions
from agac.errors import NotFound, RefusedError
from agac.store.repository import Store

DEADLINE = BASIC.replace("actions:", "deadline: 48h\nactions:", 1)


def _admit(project, wf: str = "wf"):
    store = Store(os.environ["AGAC_STORE"])
    try:
        proj = find_project(project)
        return admit_run(proj, store, api.load_workflow(wf, proj), RunOptions())
    finally:
        store.close()


def _move_deadline(run_id: str, deadline_at: float) -> None:
    store = Store(os.environ["AGAC_STORE"])
    try:
        row = store.get_run(run_id)
        store.update_run(run_id, settings=replace(row.settings, deadline_at=deadline_at))
    finally:
        store.close()


def _accounted(summary: dict) -> None:
    for a in summary["actions"].values():
        assert a["answered"] + a["failed"] + a["skipped"] == a["records"] and a["pending"] == 0


def test_r4_deadline_passed_while_nothing_ran_ends_timed_out_at_the_next_start(
    project, make
) -> None:
    make(project, DEADLINE)
    admitted = _admit(project)
    assert admitted.settings.deadline_at > time.time() + 47 * 3600
    _move_deadline(admitted.id, time.time() - 1)
    result = run(project)
    s = result.summary
    assert s["run_id"] == admitted.id and s["state"] == "timed_out" and result.exit_code == 1
    assert all(a["calls"] == 0 and a["reasons"] == {"deadline": 20} for a in s["actions"].values())
    _accounted(s)
    assert s["next"] == "agac run wf"


def test_r4_deadline_passing_mid_run_stops_sending(project, make, monkeypatch, clocked) -> None:
    wf = BASIC.replace("actions:", "deadline: 1h\nactions:", 1).replace(
        "max_concurrency: 8", "max_concurrency: 2"
    )
    make(project, wf, data={"data/a.jsonl": rows(60)})
    monkeypatch.setenv("AGAC_MOCK_LATENCY_MS", "60")
    clock, store = clocked
    s = run(project, store=store, on_progress=past_deadline_after(clock, "classify")).summary
    assert s["state"] == "timed_out"
    c = s["actions"]["classify"]
    assert 0 < c["answered"] < 60 and c["reasons"].get("deadline", 0) > 0
    _accounted(s)
    assert sum(a["calls"] for a in s["actions"].values()) == sum(
        a["answered"] for a in s["actions"].values()
    )


def test_r4_retry_keeps_the_original_deadline(project, make, monkeypatch) -> None:
    wf = DEADLINE.replace("retry: {max_attempts: 3", "retry: {max_attempts: 1")
    make(project, wf)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0.4")
    first = run(project).summary
    assert first["state"] == "partial"
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0")
    retried = api.retry("wf", project).summary
    assert retried["deadline_at"] == first["deadline_at"]


def test_r4_precedence_timed_out_before_exhausted(project, make) -> None:
    from agac.engine.lifecycle.ending import decide_state

    summary = {"actions": {"a": {"failed": 1, "answered": 1}}}
    assert (
        decide_state(summary, {}, True, frozenset({"budget_exhausted", "deadline"})) == "timed_out"
    )
    assert decide_state(summary, {}, True, frozenset({"budget_exhausted"})) == "exhausted"
    assert decide_state(summary, {"a": ("failed", "x")}, True, frozenset()) == "failed"


def test_cancel_ends_an_open_run_cancelled_and_a_final_state_never_changes(project, make) -> None:
    make(project)
    admitted = _admit(project)
    result = api.cancel("wf", project)
    s = result.summary
    assert s["run_id"] == admitted.id and s["state"] == "cancelled"
    assert all(a["reasons"] == {"cancelled": 20} and a["calls"] == 0 for a in s["actions"].values())
    _accounted(s)
    with pytest.raises(RefusedError):
        api.cancel(admitted.id, project)
    with pytest.raises(NotFound):
        api.cancel("wf", project)  # no open run left
    assert api.status(admitted.id, project)["state"] == "cancelled"
    # the next run is a new one and asks everything
    again = run(project).summary
    assert again["run_id"] != admitted.id and again["state"] == "succeeded"
