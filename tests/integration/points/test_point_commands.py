"""Commands on a storage point: ``agac store info|upgrade``, decisions that need the point's
lease and ``AGAC_SECRET``, and what only an SQL store can do (docs/guarantees.md, Storage points)."""

from __future__ import annotations

import json
from pathlib import Path

from points_support import Point, agac

from agac.store.points.store import PointStore
from agac.testing import write_project

WF = """
name: gated
input: {path: data/, id_field: id}
defaults: {model: mock/m1}
actions:
  - name: draft
    prompt: "Draft for {{ source.text }}"
    approval: {approvers: [ops]}
"""
SECRET = {"AGAC_SECRET": "0123456789abcdef0123456789abcdef", "AGAC_USER": "ops"}


def _project(root: Path, point: Point, workflow: str = WF) -> Path:
    write_project(
        root,
        workflow,
        workflow_file="wf.yml",
        agac_yml=f"store: {point.url}\n",
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"t {i}"} for i in range(3)]},
    )
    return root


def test_store_info_shows_where_the_state_lives_its_size_snapshot_age_and_log(
    point: Point, tmp_path: Path
) -> None:
    root = _project(tmp_path / "p", point, WF.replace("    approval: {approvers: [ops]}\n", ""))
    empty = agac(root, "store", "info", "--json", point=point, cache=tmp_path / "m1")
    assert empty.code == 0, empty
    assert empty.json()["exists"] is False
    assert agac(root, "run", "gated", point=point, cache=tmp_path / "m1").code == 0
    info = agac(root, "store", "info", "--json", point=point, cache=tmp_path / "m2")
    assert info.code == 0, info
    doc = info.json()
    assert doc["store"] == point.url and doc["owner"] is None and not doc["owned"]
    assert doc["snapshot"]["bytes"] > 0 and doc["snapshot_age_seconds"] < 600
    assert doc["bytes"] == doc["snapshot"]["bytes"] + doc["log"]["bytes"]
    assert set(doc["log"]) == {"generations", "segments", "bytes"}
    text = agac(root, "store", "info", point=point, cache=tmp_path / "m2")
    assert "snapshot:" in text.out and "log:" in text.out and point.url in text.out


def test_store_upgrade_works_on_a_point(dir_point: Point, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", dir_point)
    done = agac(root, "store", "upgrade", "--json", point=dir_point, cache=tmp_path / "m1")
    assert done.code == 0, done
    assert done.json()["store"] == dir_point.url
    assert dir_point.head()["snapshot"] is not None and dir_point.head()["owner"] is None


def test_approvals_on_a_point_need_agac_secret(dir_point: Point, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", dir_point)
    refused = agac(root, "run", "gated", point=dir_point, cache=tmp_path / "m1")
    assert refused.code == 2, refused
    assert "secret_not_durable" in refused.err
    approve = agac(
        root,
        "approve",
        "whatever",
        point=dir_point,
        cache=tmp_path / "m1",
        env={"AGAC_USER": "ops"},
    )
    assert approve.code == 2 and "secret_not_durable" in approve.err


def test_a_decision_takes_the_points_lease_or_exits_75_naming_the_owner(
    point: Point, tmp_path: Path
) -> None:
    root = _project(tmp_path / "p", point)
    waiting = agac(root, "run", "gated", "--json", point=point, cache=tmp_path / "m1", env=SECRET)
    assert waiting.code == 75, waiting
    proposals = agac(
        root, "approvals", "list", "--json", point=point, cache=tmp_path / "m2", env=SECRET
    )
    assert proposals.code == 0, proposals
    ids = [p["id"] for p in proposals.json()]
    assert len(ids) == 3
    holder = PointStore(point.url, environ={"XDG_CACHE_HOME": str(tmp_path / "m3")})
    try:  # another machine owns the point right now
        held = agac(root, "approve", ids[0], point=point, cache=tmp_path / "m2", env=SECRET)
        assert held.code == 75, held
        assert "owned by pid" in held.err
    finally:
        holder.close()
    for pid in ids:
        decided = agac(root, "approve", pid, point=point, cache=tmp_path / "m2", env=SECRET)
        assert decided.code == 0, decided
    done = agac(root, "run", "gated", "--json", point=point, cache=tmp_path / "m4", env=SECRET)
    assert done.code == 0, done
    assert json.loads(done.out)["actions"]["draft"]["answered"] == 3


def test_workers_and_submit_are_refused_on_a_point(dir_point: Point, tmp_path: Path) -> None:
    root = _project(tmp_path / "p", dir_point, WF.replace("    approval: {approvers: [ops]}\n", ""))
    worker = agac(root, "worker", "--exit-when-done", point=dir_point, cache=tmp_path / "m1")
    assert worker.code == 2 and "PostgreSQL" in worker.err
    submit = agac(root, "submit", "gated", point=dir_point, cache=tmp_path / "m1")
    assert submit.code == 2 and "PostgreSQL" in submit.err
    assert "head" not in dir_point.object_keys()  # refused before touching the point


def test_serve_is_refused_on_a_point(dir_point: Point, tmp_path: Path) -> None:
    """The service reads what runs in other processes write: only an SQL store allows that."""
    root = tmp_path / "p"
    write_project(
        root,
        WF,
        workflow_file="wf.yml",
        agac_yml=f"store: {dir_point.url}\nidentity: login\n",
        data={"data/a.jsonl": [{"id": "r0", "text": "t 0"}]},
    )
    serve = agac(root, "serve", "--port", "1", point=dir_point, cache=tmp_path / "m1")
    assert serve.code == 2 and "needs an SQL store" in serve.err, serve
    assert "head" not in dir_point.object_keys()  # refused before touching the point


def test_point_schemes_agree_between_config_and_store() -> None:
    from agac.config.project import POINT_SCHEMES as CONFIG_SCHEMES
    from agac.store.points import POINT_SCHEMES

    assert CONFIG_SCHEMES == POINT_SCHEMES
