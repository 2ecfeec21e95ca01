"""A run is admitted only when it can start (docs/python.md): every call that fails before
execution leaves no open run behind — a bad workflow, missing credentials, a held lease,
an event loop on the calling thread, a failure while the engine starts."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agac
from agac import api
from agac.errors import ConfigError, LeaseHeld, UsageError

GOOD: dict[str, Any] = {
    "name": "adm",
    "input": {"path": "data.jsonl"},
    "actions": [{"name": "ask", "model": "mock/m", "prompt": "Say {{ source.text }}"}],
}


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agac.yml").write_text("")
    (tmp_path / "data.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    return tmp_path


def _runs(proj: Path) -> list[dict[str, Any]]:
    return api.list_runs(project=proj)


def test_a_bad_workflow_admits_nothing(proj: Path) -> None:
    bad = {**GOOD, "actions": [{"name": "ask", "model": "mock/m", "promt": "x"}]}
    with pytest.raises(ConfigError) as caught:
        agac.run(bad, proj, progress=False)
    assert "unknown_key" in [p.code for p in caught.value.problems]
    assert _runs(proj) == []


def test_missing_credentials_admit_nothing(proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    wf = {**GOOD, "actions": [{"name": "ask", "model": "openai/gpt-4o-mini", "prompt": "x"}]}
    with pytest.raises(ConfigError) as caught:
        agac.run(wf, proj, progress=False)
    assert "missing_credentials" in [p.code for p in caught.value.problems]
    assert _runs(proj) == []


def test_a_failure_while_the_engine_starts_undoes_the_admission(
    proj: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agac.engine.lifecycle import runs

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ConfigError("the provider could not be opened")

    monkeypatch.setattr(runs, "open_providers", broken)
    with pytest.raises(ConfigError):
        agac.run(GOOD, proj, progress=False)
    assert _runs(proj) == []
    monkeypatch.undo()
    assert agac.run(GOOD, proj, progress=False).state == "succeeded"


async def test_the_engine_refuses_a_running_loop_before_admitting(proj: Path) -> None:
    from agac.engine.lifecycle.options import RunOptions
    from agac.engine.lifecycle.runs import start_run

    project = api.project_of(proj)
    workflow = api.load_workflow(GOOD, project)
    store = api.open_store(project)
    try:
        with pytest.raises(UsageError, match="agac.arun"):
            start_run(project, store, workflow, RunOptions())
    finally:
        store.close()
    assert _runs(proj) == []


@pytest.fixture
def other_owner() -> Any:
    """A live process on this host, to hold a run's lease."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def test_s3_a_held_lease_admits_nothing_and_ends_nothing(proj: Path, other_owner: Any) -> None:
    from agac.engine.lifecycle.admission import open_or_admit
    from agac.engine.lifecycle.options import RunOptions

    project = api.project_of(proj)
    workflow = api.load_workflow(GOOD, project)
    store = api.open_store(project)
    try:
        open_run, _, _ = open_or_admit(project, store, workflow, RunOptions())  # admitted, not run
        store.acquire_lease(
            f"run:{open_run.id}", host=socket.gethostname(), pid=other_owner.pid, ttl=60
        )
    finally:
        store.close()
    for new in (False, True):
        with pytest.raises(LeaseHeld, match=f"pid {other_owner.pid}"):
            agac.run(GOOD, proj, new=new, progress=False)
        runs = _runs(proj)
        assert [(r["run_id"], r["state"]) for r in runs] == [(open_run.id, "queued")], new
    other_owner.kill()
    other_owner.wait()  # a dead owner on this host is taken over at once (S3)
    result = agac.run(GOOD, proj, progress=False)
    assert (result.run_id, result.state) == (open_run.id, "succeeded")


def test_different_records_while_a_run_is_open_are_refused_naming_new(proj: Path) -> None:
    from agac.engine.lifecycle.admission import open_or_admit
    from agac.engine.lifecycle.options import RunOptions

    wf = {**GOOD, "name": "recs"}
    del wf["input"]
    project = api.project_of(proj)
    first = [{"text": "a"}, {"text": "b"}]
    from agac.api.inline import given_records

    store = api.open_store(project)
    try:
        with given_records(first, project) as source:
            open_run, _, _ = open_or_admit(
                project,
                store,
                api.load_workflow(wf, project, records=True),
                RunOptions(source=source),
            )
    finally:
        store.close()
    with pytest.raises(UsageError, match=r"new=True"):
        agac.run(wf, proj, records=[{"text": "c"}], progress=False)
    assert [r["run_id"] for r in _runs(proj)] == [open_run.id]
    # The same records, or none: the open run continues with its own snapshot.
    assert agac.run(wf, proj, progress=False).run_id == open_run.id
    replaced = agac.run(wf, proj, records=[{"text": "c"}], new=True, progress=False)
    assert replaced.run_id != open_run.id and replaced.actions["ask"]["records"] == 1
    assert [r["state"] for r in _runs(proj)] == ["succeeded", "succeeded"]


def test_a_budget_estimate_over_the_cap_admits_nothing(proj: Path) -> None:
    from agac.errors import RefusedError

    wf = {**GOOD, "budget": {"tokens": 5}}
    with pytest.raises(RefusedError, match="exceeds its budget"):
        agac.run(wf, proj, progress=False)
    assert _runs(proj) == []
