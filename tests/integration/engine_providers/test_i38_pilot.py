"""``agac pilot`` (The quality loop: a pilot before the full run), end to end through the
emulator over loopback: a reproducible sample run online, its report (answers, check pass
rates, measured cost and time, the projection per tier), and the full run after it sending
only the records the pilot did not answer.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import e2e_support
import pytest
from click.testing import CliRunner
from e2e_support import chat_requests, project_yml

from agac import api
from agac.cli.main import cli
from agac.errors import UsageError
from agac.testing import write_project

BAD = json.dumps({"sentiment": "pos", "score": 11})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One transport is enough here: the pilot is a run like any other."""
    monkeypatch.setattr(e2e_support, "TRANSPORT", "lean")
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _project(
    root: Path,
    records: int,
    *,
    run_mode: str = "online",
    bad: tuple[int, ...] = (),
    model: str = "openai/gpt-4o-mini",
) -> None:
    text = f"""name: triage
input: {{path: data/, id_field: id}}
defaults:
  model: {model}
  max_tokens: 64
  max_concurrency: 4
  timeout: 10s
  run_mode: {run_mode}
  retry: {{max_attempts: 3, backoff: {{initial: 10ms, max: 50ms}}}}
actions:
  - name: classify
    prompt: "Classify this review: {{{{ source.text }}}}"
    schema:
      type: object
      properties:
        sentiment: {{type: string, enum: [pos, neg, neutral]}}
        score: {{type: integer}}
      required: [sentiment, score]
      additionalProperties: false
    checks:
      - {{name: score_in_range, expr: 'answer.score <= 10', message: 'at most 10', on_fail: flag}}
"""
    rows = [
        {
            "id": f"r{i:03d}",
            "product": ["blender", "kettle", "toaster", "mixer"][i % 4],
            "text": f"Review {i}: "
            + "the blender is loud. " * (1 + i % 7)
            + (f" [[emulator answers: {BAD}]]" if i in bad else ""),
        }
        for i in range(records)
    ]
    write_project(root, text, agac_yml=project_yml(), data={"data/in.jsonl": rows})


def test_i38_pilot_full_run_sends_only_the_rest(emulator: Any, project: Path) -> None:
    _project(project, 200)

    report = api.pilot("triage", project, sample=20, seed=7, progress=False)

    assert report["state"] == "succeeded"
    assert (report["sample"]["records"], report["sample"]["of"]) == (20, 200)
    assert chat_requests(emulator.stats(), "openai") == 20 == report["measured"]["calls"]
    sampled = {row["key"] for row in report["answers"]}
    assert len(sampled) == 20

    full = api.run("triage", project, progress=False)

    counts = full.summary.to_dict()["actions"]["classify"]
    assert (counts["answered"], counts["calls"], counts["reused"]) == (200, 180, 20)
    assert chat_requests(emulator.stats(), "openai") == 200
    # The pilot's answers are the full run's, unchanged.
    rows = {r["key"]: r for r in api.export_rows("triage", "classify", project)}
    assert all(rows[row["key"]]["output"] == row["classify"]["output"] for row in report["answers"])
    # What the whole input cost, the pilot's part and the rest, is inside the projection.
    spent = report["measured"]["cost_usd"] + full.cost_usd
    online = report["projection"]["online"]
    assert online["low_usd"] <= spent <= online["high_usd"]
    assert online["after_pilot_usd"] == pytest.approx(
        online["estimate_usd"] - online["sample_usd"], abs=1e-6
    )


def test_i38_pilot_reports_checks_measured_cost_and_each_tier(emulator: Any, project: Path) -> None:
    _project(project, 40, bad=tuple(range(40)))

    report = api.pilot("triage", project, sample=10, progress=False)

    assert report["checks"] == {
        "classify": {"score_in_range": {"passed": 0, "failed": 10, "rate": 0.0}}
    }
    assert all(row["classify"]["checks"] == {"score_in_range": False} for row in report["answers"])
    ledger = api.cost("triage", project)
    assert report["measured"]["cost_usd"] == pytest.approx(ledger["cost_usd"], abs=1e-6)
    assert report["measured"]["cost_usd"] > 0 and report["measured"]["seconds"] >= 0
    batch, online = report["projection"]["batch"], report["projection"]["online"]
    # Every answer the same size: the records' costs differ by their prompts only.
    assert 0 < batch["estimate_usd"] < online["estimate_usd"]
    assert batch["low_usd"] <= batch["estimate_usd"] <= batch["high_usd"]
    assert online["sample_usd"] == pytest.approx(report["measured"]["cost_usd"], abs=1e-9)
    assert batch["time_s"] == {"estimate": None, "low": None, "high": 86400.0}
    assert online["time_s"]["estimate"] == pytest.approx(
        report["measured"]["seconds"] * 4, abs=0.01
    )
    # OpenAI sells flex for its reasoning and GPT-5 models, not for gpt-4o-mini.
    assert report["projection"]["flex"] is None


def test_i38_pilot_over_the_whole_input_projects_what_it_measured(
    emulator: Any, project: Path
) -> None:
    _project(project, 6)

    report = api.pilot("triage", project, sample=50, progress=False)

    online = report["projection"]["online"]
    assert report["sample"]["records"] == 6
    assert online["estimate_usd"] == online["low_usd"] == online["high_usd"]
    assert online["estimate_usd"] == pytest.approx(report["measured"]["cost_usd"], abs=1e-6)
    assert online["after_pilot_usd"] == 0


def test_i38_pilot_never_waits_for_a_batch(emulator: Any, project: Path) -> None:
    _project(project, 12, run_mode="batch")

    report = api.pilot("triage", project, sample=4, progress=False)

    assert report["state"] == "succeeded"
    requests = emulator.stats()["requests"]["openai"]
    assert requests.get("chat") == 4 and not {k for k in requests if "batch" in k}
    # The full run batches the rest; the pilot's four are reused.
    full = api.run("triage", project, progress=False)
    assert full.summary.to_dict()["actions"]["classify"]["reused"] == 4


def test_i38_pilot_runs_on_flex_where_the_provider_sells_it(emulator: Any, project: Path) -> None:
    _project(project, 12, run_mode="batch", model="openai/o4-mini")

    report = api.pilot("triage", project, sample=4, progress=False)

    assert report["state"] == "succeeded"
    chats = [e for e in emulator.requests() if e["op"] == "chat"]
    assert len(chats) == 4 and all(c["body"]["service_tier"] == "flex" for c in chats)
    (row,) = api.cost("triage", project)["rows"]
    assert (row["tier"], row["calls"]) == ("flex", 4)
    # OpenAI bills flex at the batch rate: the two projections agree.
    flex, batch = report["projection"]["flex"], report["projection"]["batch"]
    assert flex["estimate_usd"] == batch["estimate_usd"] > 0
    assert report["measured"]["cost_usd"] == pytest.approx(flex["sample_usd"], abs=1e-6)


def test_i38_pilot_is_refused_beside_an_open_run(emulator: Any, project: Path) -> None:
    _project(project, 4, run_mode="batch")
    opened = api.run("triage", project, progress=False)
    assert not opened.final  # its batch is out

    with pytest.raises(UsageError, match="open run"):
        api.pilot("triage", project, sample=2, progress=False)


def test_i38_pilot_sample_is_reproducible_and_stratified(emulator: Any, project: Path) -> None:
    _project(project, 40)

    first = api.pilot("triage", project, sample=8, stratify="product", seed=3, progress=False)
    again = api.pilot("triage", project, sample=8, stratify="product", seed=3, progress=False)

    keys = [r["key"] for r in first["answers"]]
    assert keys == [r["key"] for r in again["answers"]]
    assert first["sample"]["strata"] == {
        p: {"records": 10, "sampled": 2} for p in ("blender", "kettle", "mixer", "toaster")
    }
    # The second pilot asked nothing again, and projects what the first did.
    assert chat_requests(emulator.stats(), "openai") == 8
    assert again["measured"]["calls"] == 0 and again["measured"]["reused_units"] == 8
    assert again["projection"] == first["projection"] | {
        t: (first["projection"][t] or {}) | {"time_s": again["projection"][t]["time_s"]}
        for t in ("batch", "online")
    } | {"flex": None}


def test_i38_pilot_cli_prints_the_table_and_writes_answers(emulator: Any, project: Path) -> None:
    _project(project, 10, bad=(0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
    out = project / "pilot.csv"

    result = CliRunner().invoke(
        cli, ["pilot", "triage", "--sample", "3", "--out", str(out)], catch_exceptions=False
    )

    assert result.exit_code == 0, result.output
    text = result.output
    assert "3 of 10 records (seed 0)" in text
    assert "classify checks passed: score_in_range 0% (0/3)" in text
    assert "[score_in_range failed]" in text
    assert "projected for all 10 records" in text
    assert "not sold for these models" in text  # flex
    with out.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3
    assert rows[0].keys() == {
        "key",
        "classify.status",
        "classify.reason",
        "classify.output",
        "classify.check.score_in_range",
    }
    assert {r["classify.check.score_in_range"] for r in rows} == {"fail"}
    assert json.loads(rows[0]["classify.output"])["score"] == 11
