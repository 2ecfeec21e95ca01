"""``agac compare`` (The quality loop: two runs compared), end to end through the emulator:
two runs over the same records whose answers differ in known rows; the comparison reports
exactly those rows, with agreement per field, enum distributions, numeric deltas, check
pass rates and cost per run."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import e2e_support
import pytest
from click.testing import CliRunner
from e2e_support import project_yml

from agac import api
from agac.cli.main import cli
from agac.errors import UsageError
from agac.testing import write_project

WORKFLOW = """name: triage
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 64
  timeout: 10s
  retry: {max_attempts: 3, backoff: {initial: 10ms, max: 50ms}}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    schema:
      type: object
      properties:
        label: {type: string, enum: [pos, neg]}
        total: {type: number}
      required: [label, total]
      additionalProperties: false
    checks:
      - {name: small, expr: "answer.total < 5", on_fail: flag}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(e2e_support, "TRANSPORT", "lean")
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _rows(answers: dict[str, tuple[str, float]], extra: str = "") -> list[dict[str, Any]]:
    return [
        {
            "id": key,
            "text": f"review {key} [[emulator answers: "
            + json.dumps({"label": label, "total": total})
            + "]]"
            + extra,
        }
        for key, (label, total) in answers.items()
    ]


A = {"r0": ("pos", 1), "r1": ("pos", 2), "r2": ("neg", 3), "r3": ("neg", 4)}
B = {**A, "r1": ("neg", 2), "r3": ("neg", 7), "r4": ("pos", 1)}


def _two_runs(project: Path, extra: str = "") -> tuple[str, str]:
    rows = _rows(A, extra)
    write_project(project, WORKFLOW, agac_yml=project_yml(), data={"data/in.jsonl": rows})
    a = api.run("triage", project, progress=False)
    (project / "data" / "in.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _rows(B, extra)), encoding="utf-8"
    )
    b = api.run("triage", project, progress=False)
    assert a.final and b.final and a.run_id != b.run_id
    return a.run_id, b.run_id


def test_i38_compare_reports_exactly_the_rows_that_changed(emulator: Any, project: Path) -> None:
    a, b = _two_runs(project)

    doc = api.compare(a, b, project)

    c = doc["actions"]["classify"]
    assert {row["key"]: row["fields"] for row in c["changed"]} == {
        "r1": ["label"],
        "r3": ["total"],
        "r4": ["label", "total"],
    }
    assert c["changed_count"] == 3
    row = next(r for r in c["changed"] if r["key"] == "r4")
    assert row["a"] is None and row["b"]["output"] == {"label": "pos", "total": 1}
    assert c["units"] == {"a": 4, "b": 5, "both": 4, "only_a": 0, "only_b": 1}
    assert c["status_changed"] == 0 and c["answered_both"] == 4
    assert c["agreement"] == {
        "label": {"same": 3, "compared": 4, "rate": 0.75},
        "total": {"same": 3, "compared": 4, "rate": 0.75},
    }
    assert c["distributions"] == {"label": {"a": {"neg": 2, "pos": 2}, "b": {"neg": 3, "pos": 2}}}
    assert c["numeric"]["total"] == {
        "compared": 4,
        "mean_a": 2.5,
        "mean_b": 3.25,
        "mean_delta": 0.75,
        "mean_abs_delta": 0.75,
        "max_abs_delta": 3.0,
        "changed": 1,
    }
    runs = doc["runs"]
    # B asked only what changed (r1, r3) and what is new (r4); r0 and r2 were reused.
    assert (runs["a"]["calls"], runs["b"]["calls"]) == (4, 3)
    assert runs["a"]["cost_usd"] > runs["b"]["cost_usd"] > 0
    assert runs["a"]["checks"]["classify"]["small"] == {"passed": 4, "failed": 0, "rate": 1.0}
    assert runs["b"]["checks"]["classify"]["small"] == {"passed": 4, "failed": 1, "rate": 0.8}
    assert runs["a"]["models"] == ["openai/gpt-4o-mini"]


def test_i38_compare_writes_every_changed_row_and_prints_a_summary(
    emulator: Any, project: Path
) -> None:
    a, b = _two_runs(project)
    out = project / "changed.csv"

    result = CliRunner().invoke(
        cli, ["compare", a, b, "--limit", "1", "--out", str(out)], catch_exceptions=False
    )

    assert result.exit_code == 0, result.output
    text = result.output
    assert (
        "classify: 4 units in both (0 only in A, 1 only in B), 0 changed status, 3 rows differ"
        in text
    )
    assert "agreement: label 75% (3/4), total 75% (3/4)" in text
    assert "label (A→B): neg 2→3, pos 2→2" in text
    assert "checks passed in B: small 80% (4/5)" in text
    assert "… and 2 more" in text
    with out.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["key"] for r in rows] == ["r1", "r3", "r4"]
    assert rows[0]["a.output"] == '{"label": "pos", "total": 2}' and rows[0]["fields"] == "label"


def test_i38_compare_refuses_one_run_twice_and_an_unknown_action(
    emulator: Any, project: Path
) -> None:
    a, b = _two_runs(project)
    with pytest.raises(UsageError, match="same run"):
        api.compare(a, a, project)
    with pytest.raises(UsageError, match="share: classify"):
        api.compare(a, b, project, action="summarize")


def _pairwise_ledger(project: Path, run_id: str) -> list[dict[str, Any]]:
    return [r for r in api.cost(run_id, project)["rows"] if r["origin"] == "pairwise"]


def test_i38_the_swapped_pairwise_judge_cancels_a_judge_that_prefers_the_first(
    emulator: Any, project: Path
) -> None:
    a, b = _two_runs(project, " [[emulator prefers: first]]")
    before = emulator.stats()["requests"]["openai"]["chat"]

    doc = api.compare(a, b, project, judge="openai/gpt-4o-mini")

    # r1 and r3 differ: each shown in both orders, and each time the judge picks answer 1:
    # the two verdicts disagree, so both are ties. r0 and r2 are the same: ties, unasked.
    assert doc["actions"]["classify"]["pairwise"] == {
        "model": "openai/gpt-4o-mini",
        "compared": 4,
        "a_wins": 0,
        "b_wins": 0,
        "ties": 4,
        "b_win_rate": 0.5,
        "ci95": [0.5, 0.5],
        "calls": 4,
        "cost_usd": doc["actions"]["classify"]["pairwise"]["cost_usd"],
    }
    assert emulator.stats()["requests"]["openai"]["chat"] == before + 4
    (row,) = _pairwise_ledger(project, b)
    assert row["calls"] == 4 and row["cost_usd"] > 0
    # Asked again, every verdict is read back: nothing is paid twice.
    again = api.compare(a, b, project, judge="openai/gpt-4o-mini")
    assert again["actions"]["classify"]["pairwise"]["calls"] == 0
    assert emulator.stats()["requests"]["openai"]["chat"] == before + 4


def test_i38_the_pairwise_judge_gives_b_its_wins_and_a_win_rate(
    emulator: Any, project: Path
) -> None:
    a, b = _two_runs(project, " [[emulator prefers: neg]]")

    result = CliRunner().invoke(
        cli, ["compare", a, b, "--judge", "openai/gpt-4o-mini", "--json"], catch_exceptions=False
    )

    pairwise = json.loads(result.output)["actions"]["classify"]["pairwise"]
    # r1: A says pos, B neg: B wins in both orders. r3: both say neg: a tie.
    assert (pairwise["b_wins"], pairwise["a_wins"], pairwise["ties"]) == (1, 0, 3)
    assert pairwise["b_win_rate"] == 0.625
    low, high = pairwise["ci95"]
    assert low < 0.625 < high


def test_i38_6_compare_measures_checks_and_the_pairwise_judge_against_labels(
    emulator: Any, project: Path
) -> None:
    a, b = _two_runs(project, " [[emulator prefers: neg]]")
    labels = project / "labels.csv"
    # small: r0 truly passes, r1 and r3 are labelled as failing. pairwise: B's r1 should
    # win (it does), r3 is a tie (it is), A's r0 should win (a tie: the answers agree).
    labels.write_text("key,small,pairwise\nr0,pass,a\nr1,fail,b\nr3,fail,tie\n", encoding="utf-8")

    doc = api.compare(a, b, project, judge="openai/gpt-4o-mini", labels=labels)

    calibration = doc["calibration"]
    # A passes all three (r1, r3 missed); B fails r3 (total 7), a true positive.
    assert calibration["a"]["classify"]["small"]["confusion"] == {
        "tp": 0,
        "fp": 0,
        "tn": 1,
        "fn": 2,
    }
    assert calibration["b"]["classify"]["small"]["confusion"] == {
        "tp": 1,
        "fp": 0,
        "tn": 1,
        "fn": 1,
    }
    assert calibration["b"]["classify"]["small"]["agreement"] == 0.6667
    assert calibration["b"]["classify"]["small"]["tpr"] == 0.5
    judged = doc["actions"]["classify"]["pairwise"]["labels"]
    assert (judged["labelled"], judged["agreement"]) == (3, 0.6667)
    assert judged["confusion"]["a"] == {"a": 0, "b": 0, "tie": 1}
    assert judged["confusion"]["b"]["b"] == 1 and judged["confusion"]["tie"]["tie"] == 1
    assert judged["uncalibrated"] is True
    notes = doc["notes"]
    assert any("'small' of classify in a agrees with the labels on 33%" in n for n in notes)
    assert any("pairwise judge of classify agrees with the labels on 67%" in n for n in notes)
    assert all(n.endswith("[judge_uncalibrated]") for n in notes)
    # A lower threshold: the pairwise judge and B's check pass it, A's check does not.
    lenient = api.compare(
        a, b, project, judge="openai/gpt-4o-mini", labels=labels, min_agreement=0.6
    )
    assert len(lenient["notes"]) == 1 and " in a " in lenient["notes"][0]


def test_i38_6_compare_labels_through_the_cli_and_a_bad_one_named(
    emulator: Any, project: Path
) -> None:
    a, b = _two_runs(project)
    labels = project / "labels.csv"
    labels.write_text("key,small\nr0,pass\nr3,fail\n", encoding="utf-8")

    result = CliRunner().invoke(cli, ["compare", a, b, "--labels", str(labels)])

    assert result.exit_code == 0, result.output
    assert "A classify check small against the labels: agrees 50%" in result.output
    assert "B classify check small against the labels: agrees 100%" in result.output
    labels.write_text("key,pairwise\nr0,first\n", encoding="utf-8")
    bad = CliRunner().invoke(cli, ["compare", a, b, "--labels", str(labels)])
    assert bad.exit_code == 2
    assert "labels.csv:2: pairwise is 'first'; write a, b or tie" in bad.output


def test_i38_3_the_pairwise_judge_spends_from_run_bs_budget(emulator: Any, project: Path) -> None:
    extra = " [[emulator prefers: neg]]"
    write_project(
        project, WORKFLOW, agac_yml=project_yml(), data={"data/in.jsonl": _rows(A, extra)}
    )
    a = api.run("triage", project, progress=False).run_id
    (project / "data" / "in.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _rows(B, extra)), encoding="utf-8"
    )
    # Room for run B's own five answers and one pairwise call's worst case, not two.
    b = api.run(
        "triage", project, budget_usd=0.0003, allow_over_estimate=True, progress=False
    ).run_id
    before = emulator.stats()["requests"]["openai"]["chat"]

    doc = api.compare(a, b, project, judge="openai/gpt-4o-mini")

    pairwise = doc["actions"]["classify"]["pairwise"]
    # r1 and r3 differ: neither is judged in both orders, so neither is scored (not a
    # tie); r0 and r2 agree: ties without a call.
    assert (pairwise["compared"], pairwise["not_judged"], pairwise["ties"]) == (2, 2, 2)
    assert pairwise["budget"] == (
        "2 pairs not judged: run B's budget ($0.0003) has no room for the pairwise "
        "judge's calls [budget_exhausted]"
    )
    assert doc["notes"] == [f"classify: {pairwise['budget']}"]
    sent = emulator.stats()["requests"]["openai"]["chat"] - before
    assert sent == pairwise["calls"] == sum(r["calls"] for r in _pairwise_ledger(project, b))
    assert sent <= 1
    spent = sum(r["cost_usd"] for r in api.cost(b, project)["rows"])
    assert spent <= 0.0003
