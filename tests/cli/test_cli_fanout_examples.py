"""The fan-out examples shipped with ``agac init --example`` run offline on the mock
provider and give sensible results: map-reduce (contract clauses joined into a risk
summary) and an ensemble (three versions, majority by a tool join)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import agac


def _export(root: Path, wf: str, action: str) -> dict[str, dict]:
    out = agac("export", wf, "--action", action, cwd=root)
    assert out.code == 0, out
    return {r["key"]: r for r in map(json.loads, out.out.splitlines())}


def test_map_reduce_example_joins_every_clause_in_order(tmp_path: Path) -> None:
    assert agac("init", "proj", "--example", "map_reduce", cwd=tmp_path).code == 0
    root = tmp_path / "proj"
    run = agac("run", "contract_risk", "--json", cwd=root)
    assert run.code == 0, run
    acts = run.json()["actions"]
    assert acts["split"]["records"] == 3 and acts["risk_summary"]["records"] == 3
    assert acts["assess"]["records"] == acts["assess"]["answered"] == 12  # 5 + 3 + 4 clauses
    summary = _export(root, "contract_risk", "risk_summary")
    assert [summary[k]["output"]["assessed"] for k in ("c-001", "c-002", "c-003")] == [5, 3, 4]
    for row in summary.values():
        out = row["output"]
        assert out["overall"] in ("low", "medium", "high") and out["not_assessed"] == []
    clauses = _export(root, "contract_risk", "assess")
    assert sorted(k for k in clauses if k.startswith("c-002/")) == ["c-002/0", "c-002/1", "c-002/2"]
    session = agac("records", "show", "c-001", "--json", cwd=root).json()
    assert [i["key"] for i in session["items"]] == [f"c-001/{i}" for i in range(5)]


def test_ensemble_example_takes_the_majority_of_three_versions(tmp_path: Path) -> None:
    assert agac("init", "proj", "--example", "ensemble", cwd=tmp_path).code == 0
    root = tmp_path / "proj"
    run = agac("run", "spam_vote", "--json", cwd=root)
    assert run.code == 0, run
    acts = run.json()["actions"]
    assert acts["vote"]["records"] == acts["vote"]["calls"] == 18  # 6 messages x 3 versions
    for row in _export(root, "spam_vote", "majority").values():
        out = row["output"]
        assert len(out["votes"]) == 3
        assert out["votes"].count(out["label"]) >= 2
        assert out["agreement"] == round(out["votes"].count(out["label"]) / 3, 2)


def test_records_list_and_show_name_items(tmp_path: Path) -> None:
    assert agac("init", "proj", "--example", "map_reduce", cwd=tmp_path).code == 0
    root = tmp_path / "proj"
    assert agac("run", "contract_risk", cwd=root).code == 0
    listed = agac("records", "list", "contract_risk", "--action", "assess", "--json", cwd=root)
    assert listed.code == 0, listed
    keys = [u["key"] for u in listed.json()["units"]]
    assert len(keys) == 12 and "c-003/3" in keys
    none_failed = agac("records", "list", "contract_risk", "--status", "failed", cwd=root)
    assert none_failed.code == 0 and none_failed.out == ""
    shown = agac("records", "show", "c-002", cwd=root)
    assert shown.code == 0, shown
    lines = shown.out.splitlines()
    first_item = next(i for i, line in enumerate(lines) if "item c-002/0: answered" in line)
    join = next(i for i, line in enumerate(lines) if line.strip().startswith("risk_summary:"))
    assert first_item < join  # the items, then the join that received them
    item = agac("records", "show", "c-002/1", "--json", cwd=root)
    assert item.code == 0 and item.json()["key"] == "c-002/1"
    unknown = agac("records", "list", "contract_risk", "--action", "nope", cwd=root)
    assert unknown.code == 2


def test_records_list_says_when_it_is_truncated(tmp_path: Path) -> None:
    assert agac("init", "proj", "--example", "ensemble", cwd=tmp_path).code == 0
    root = tmp_path / "proj"
    assert agac("run", "spam_vote", cwd=root).code == 0
    short = agac(
        "records", "list", "spam_vote", "--action", "vote", "--limit", "4", "--json", cwd=root
    )
    assert short.code == 0, short
    doc = short.json()
    assert doc["truncated"] is True and [u["key"] for u in doc["units"]] == [
        "m01/0",
        "m01/1",
        "m01/2",
        "m02/0",
    ]
    text = agac("records", "list", "spam_vote", "--limit", "4", cwd=root)
    assert "only the first 4 units" in text.err
