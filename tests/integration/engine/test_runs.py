"""Run lifecycle rules R1-R3 and the exit codes, through the library API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_helpers import BASIC, rows, run

from agac import api
from agac.errors import RefusedError, UsageError
from agac.store.repository import Store


def _open(url: str) -> Store:
    return Store(url)


def test_r1_rerun_admits_new_run_reusing_answers(project: Path, make) -> None:
    make(project)
    first = run(project)
    assert first.exit_code == 0 and first.summary["state"] == "succeeded"
    second = run(project)
    assert second.summary["run_id"] != first.summary["run_id"]
    assert all(a["calls"] == 0 and a["reused"] == 20 for a in second.summary["actions"].values())


def test_r1_carried_failures_are_not_asked_again(project: Path, make, monkeypatch) -> None:
    make(project)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "1")
    first = run(project)
    assert first.summary["state"] == "failed"  # nothing could be answered
    c = first.summary["actions"]["classify"]
    assert c["failed"] == 20 and c["reasons"] == {"provider_error": 20}
    assert c["calls"] == 60  # 3 attempts each
    assert first.summary["next"] == "agac retry wf"
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0")
    second = run(project)
    c2 = second.summary["actions"]["classify"]
    assert c2["failed"] == 20 and c2["calls"] == 0  # same fingerprint: carried, no call
    assert second.summary["actions"]["summarize"]["reasons"] == {"upstream_failed": 20}


def test_r1_carried_failure_with_a_changed_request_is_asked_again(
    project: Path, make, monkeypatch
) -> None:
    make(project)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "1")
    run(project)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0")
    (project / "workflows/wf.yml").write_text(BASIC.replace("Classify:", "Label:"))
    summary = run(project).summary
    assert summary["state"] == "succeeded"
    assert summary["actions"]["classify"]["calls"] == 20


def test_r1_open_run_is_continued_and_changed_inputs_name_new(project: Path, make) -> None:
    make(project)
    store = _open(os.environ["AGAC_STORE"])
    try:
        # An admitted run that never executed stands for a run interrupted mid-way.
        from agac.config.project import find_project
        from agac.engine.lifecycle.admission import admit_run
        from agac.engine.lifecycle.options import RunOptions

        proj = find_project(project)
        wf = api.load_workflow("wf", proj)
        open_run = admit_run(proj, store, wf, RunOptions())
        with (project / "data/a.jsonl").open("a") as f:
            f.write('{"id": "extra", "text": "new"}\n')
        with pytest.raises(UsageError) as info:
            run(project)
        assert "--new" in str(info.value) and info.value.exit_code == 2
        result = run(project, new=True)
        assert result.summary["run_id"] != open_run.id
        assert result.summary["actions"]["classify"]["records"] == 21
        ended = store.get_run(open_run.id)
        assert ended.state == "cancelled"
        assert api.status(open_run.id, project)["actions"]["classify"]["reasons"] == {
            "cancelled": 20
        }
        assert api.status(open_run.id, project)["actions"]["classify"]["pending"] == 0
    finally:
        store.close()


def test_r1_fresh_reuses_nothing(project: Path, make) -> None:
    make(project)
    run(project)
    summary = run(project, fresh=True).summary
    assert summary["actions"]["classify"]["calls"] == 20
    assert summary["actions"]["classify"]["reused"] == 0


def test_r2_retry_reasks_only_failed_units_and_their_downstream(
    project: Path, make, monkeypatch
) -> None:
    make(project)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0.5")
    first = run(project).summary
    failed = first["actions"]["classify"]["failed"]
    assert 0 < failed < 20
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0")
    dry = api.retry("wf", project, dry_run=True)
    assert dry["retry_of"] == first["run_id"]
    assert len([u for u in dry["units"] if u["action"] == "classify"]) == failed
    retried = api.retry("wf", project)
    s = retried.summary
    assert s["retry_of"] == first["run_id"]
    assert s["state"] == "succeeded"
    c = s["actions"]["classify"]
    assert c["answered"] == 20 and c["failed"] == 0
    # only the failed units were asked (plus their downstream); the rest is carried over
    assert c["calls"] == failed
    own = first["actions"]["summarize"]["failed"]
    assert s["actions"]["summarize"]["calls"] <= failed + own
    assert s["actions"]["summarize"]["answered"] == 20


def test_r2_retry_is_refused_while_a_run_is_open(project: Path, make) -> None:
    make(project)
    run(project)
    store = _open(os.environ["AGAC_STORE"])
    try:
        from agac.config.project import find_project
        from agac.engine.lifecycle.admission import admit_run
        from agac.engine.lifecycle.options import RunOptions

        proj = find_project(project)
        admit_run(proj, store, api.load_workflow("wf", proj), RunOptions())
    finally:
        store.close()
    with pytest.raises(RefusedError) as info:
        api.retry("wf", project)
    assert info.value.exit_code == 2


def test_r2_retry_one_record(project: Path, make, monkeypatch) -> None:
    make(project)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "1")
    run(project)
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0")
    s = api.retry("wf", project, record="r00003").summary
    c = s["actions"]["classify"]
    assert c["answered"] == 1 and c["failed"] == 19 and c["calls"] == 1
    assert s["state"] == "partial"


def test_r3_events_are_stored_in_order_and_replayed(project: Path, make, monkeypatch) -> None:
    make(project, data={"data/a.jsonl": rows(5) + ["not json"]})
    summary = run(project).summary
    events = api.events(summary["run_id"], project)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_admitted" and kinds[-1] == "run_ended"
    assert "run_started" in kinds and "unit_failed" in kinds
    ids = [e["id"] for e in events]
    assert ids == sorted(ids)
    failed = [e for e in events if e["kind"] == "unit_failed"]
    assert failed[0]["data"]["reason"] == "invalid_input"
    again = api.events(summary["run_id"], project, after=ids[2])
    assert [e["id"] for e in again] == ids[3:]
    assert events[-1]["data"]["state"] == summary["state"]


def test_exit_codes_follow_the_final_state(project: Path, make, monkeypatch) -> None:
    make(project)
    assert run(project).exit_code == 0
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0.5")
    assert run(project, fresh=True).exit_code == 1


def test_partial_ok_false_makes_failures_fail_the_run(project: Path, make, monkeypatch) -> None:
    make(project, BASIC.replace("name: wf\n", "name: wf\npartial_ok: false\n"))
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "0.5")
    assert run(project).summary["state"] == "failed"


def test_final_state_never_changes(project: Path, make) -> None:
    make(project)
    summary = run(project).summary
    store = _open(os.environ["AGAC_STORE"])
    try:
        assert store.end_run(summary["run_id"], "cancelled") is False
        assert store.get_run(summary["run_id"]).state == "succeeded"
    finally:
        store.close()
