"""``agac gc`` (docs/guarantees.md, The store) and ``store: memory`` refusing to read an earlier run."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import run

from agac import api
from agac.errors import UsageError


def test_gc_prunes_old_runs_but_keeps_answers_and_costs(project: Path, make) -> None:
    make(project)
    ids = [run(project).summary["run_id"] for _ in range(4)]
    report = api.gc(2, project)
    assert sorted(report["pruned_runs"]) == sorted(ids[:2])
    assert report["deleted_outcomes"] == 2 * 40 and report["deleted_events"] > 0
    with pytest.raises(UsageError) as info:
        api.status(ids[0], project)
    assert "pruned by `agac gc`" in str(info.value)
    assert api.events(ids[0], project) == []
    assert api.cost(ids[0], project)["cost_usd"] == 0.0 and api.cost(ids[0], project)["rows"]
    assert api.status(ids[3], project)["state"] == "succeeded"
    # answers are kept: a fresh-config run reuses every one of them
    again = run(project).summary
    assert again["state"] == "succeeded"
    assert all(a["calls"] == 0 and a["reused"] == 20 for a in again["actions"].values())
    assert api.gc(2, project)["pruned_runs"] == [ids[2]]  # idempotent, prunes only what is new
    with pytest.raises(UsageError):
        api.gc(0, project)


def test_memory_store_refuses_to_read_an_earlier_run(tmp_path: Path, make, monkeypatch) -> None:
    root = tmp_path / "mem"
    make(root, agac_yml="store: memory\n")
    monkeypatch.chdir(root)
    result = run(root)
    assert result.summary["state"] == "succeeded"  # a run works; nothing is kept after it
    for read in (
        lambda: api.status("wf", root),
        lambda: api.list_runs(None, root),
        lambda: api.events(None, root),
        lambda: api.cost(None, root),
        lambda: api.effects_list(None, root),
    ):
        with pytest.raises(UsageError) as info:
            read()
        assert "store is memory" in str(info.value)
