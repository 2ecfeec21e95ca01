"""``variants:`` on an llm action (The quality loop: two variants compared), end to end
through the emulator: each variant's requests are units of their own, online and in batch,
in the ledger under the variant's action; the primary is what depends on the action reads;
the comparison of the variants reports exactly the rows that differ."""

from __future__ import annotations

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

WORKFLOW = """name: triage
input: {path: data/, id_field: id}
defaults:
  max_tokens: 64
  timeout: 10s
  retry: {max_attempts: 3, backoff: {initial: 10ms, max: 50ms}}%(mode)s
actions:
  - name: classify
    model: openai/gpt-4o-mini
    prompt: "Classify: {{ source.small }}"
    schema:
      type: object
      properties:
        label: {type: string, enum: [pos, neg]}
        total: {type: number}
      required: [label, total]
      additionalProperties: false
    checks:
      - {name: small, expr: "answer.total < 5", on_fail: flag}
    variants:
      - {name: mini}  # the action as written
      - name: large
        model: openai/gpt-4o
        prompt: "Classify carefully: {{ source.large }}"%(primary)s
  - name: escalate
    dependencies: [classify]
    when: "classify.label == 'neg'"
    model: openai/gpt-4o-mini
    prompt: "Escalate {{ source.id }}"
"""

# What each variant answers: large differs from mini in r1 (label) and r3 (total).
MINI = {"r0": ("pos", 1), "r1": ("pos", 2), "r2": ("neg", 3), "r3": ("neg", 4)}
LARGE = {**MINI, "r1": ("neg", 2), "r3": ("neg", 7)}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(e2e_support, "TRANSPORT", "lean")
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _scripted(label: str, total: float, extra: str) -> str:
    return "[[emulator answers: " + json.dumps({"label": label, "total": total}) + "]]" + extra


def _write(project: Path, *, batch: bool = False, primary: str = "", extra: str = "") -> None:
    text = WORKFLOW % {
        "mode": "\n  run_mode: batch" if batch else "",
        "primary": f"\n    primary: {primary}" if primary else "",
    }
    rows = [
        {
            "id": key,
            "small": f"review {key} " + _scripted(*MINI[key], extra),
            "large": f"review {key} " + _scripted(*LARGE[key], extra),
        }
        for key in MINI
    ]
    write_project(project, text, agac_yml=project_yml(), data={"data/in.jsonl": rows})


def _ledger(project: Path, run_id: str) -> dict[str, int]:
    calls: dict[str, int] = {}
    for row in api.cost(run_id, project)["rows"]:
        calls[row["action"]] = calls.get(row["action"], 0) + row["calls"]
    return calls


def test_i38_variants_run_online_each_in_the_ledger_the_primary_read_downstream(
    emulator: Any, project: Path
) -> None:
    _write(project)

    result = api.run("triage", project, progress=False)

    assert result.final
    summary = result.summary.to_dict()
    assert summary["state"] == "succeeded"
    # Four records, two variants, and escalate for the primary's two negatives (r2, r3).
    assert _ledger(project, result.run_id) == {"classify": 4, "classify@large": 4, "escalate": 2}
    assert chat_requests(emulator.stats(), "openai") == 10
    assert summary["actions"]["escalate"]["answered"] == 2
    assert summary["checks"]["classify"]["small"]["failed"] == 0
    assert summary["checks"]["classify@large"]["small"]["failed"] == 1
    # Each variant's answer is in the record's session and the wide export.
    session = api.record_session("r1", project)
    answers = {a["action"]: a["output"] for a in session["actions"]}
    assert answers["classify"] == {"label": "pos", "total": 2}
    assert answers["classify@large"] == {"label": "neg", "total": 2}
    wide = {r["key"]: r for r in api.results("triage", project=project)}
    assert (wide["r1"]["classify.label"], wide["r1"]["classify@large.label"]) == ("pos", "neg")
    # A new run pays for nothing again: every variant's answer is reused.
    api.run("triage", project, new=True, progress=False)
    assert chat_requests(emulator.stats(), "openai") == 10


def test_i38_variants_primary_chooses_what_depends_on_the_action(
    emulator: Any, project: Path
) -> None:
    _write(project, primary="large")

    result = api.run("triage", project, progress=False)

    summary = result.summary.to_dict()
    # large is the action's own now: three negatives escalate; mini runs as classify@mini.
    assert summary["actions"]["escalate"]["answered"] == 3
    assert _ledger(project, result.run_id) == {"classify": 4, "classify@mini": 4, "escalate": 3}
    wide = {r["key"]: r for r in api.results("triage", project=project)}
    assert wide["r3"]["classify.total"] == 7 and wide["r3"]["classify@mini.total"] == 4


def test_i38_variants_run_in_batch_each_request_in_a_batch(emulator: Any, project: Path) -> None:
    _write(project, batch=True)

    final = api.run("triage", project, progress=False)
    assert not final.final  # the variants' batches are out
    for _ in range(6):  # the variants' batches, then escalate's
        if final.final:
            break
        emulator.advance(3600)
        final = api.run("triage", project, progress=False)

    assert final.summary.to_dict()["state"] == "succeeded"
    assert chat_requests(emulator.stats(), "openai") == 0
    batched = sum(b["requests"] for b in emulator.stats()["batches"])
    assert batched == 10
    assert _ledger(project, final.run_id) == {"classify": 4, "classify@large": 4, "escalate": 2}


def test_i38_variants_bad_variants_are_named_at_their_line(project: Path) -> None:
    write_project(
        project,
        """name: triage
input: {path: data/, id_field: id}
actions:
  - name: classify
    model: openai/gpt-4o-mini
    prompt: "Classify: {{ source.text }}"
    variants:
      - {name: a, model: nowhere/none}
      - {name: a, model: openai/gpt-4o}
  - name: other
    model: openai/gpt-4o-mini
    prompt: "x {{ source.text }}"
    variants:
      - {name: only, model: openai/gpt-4o}
  - name: third
    model: openai/gpt-4o-mini
    prompt: "y {{ source.text }}"
    variants:
      - {name: x}
      - {name: y}
""",
        agac_yml=project_yml(),
        data={"data/in.jsonl": [{"id": "r0", "text": "t"}]},
    )

    workflow, problems = api.validate("triage", project)

    assert workflow is None
    found = {(p.code, p.line) for p in problems}
    assert ("invalid_variants", 9) in found  # the duplicated name
    assert ("invalid_variants", 13) in found  # fewer than two
    text = " ".join(f"{p.file}: {p.message}" for p in problems)
    assert "'a' of action 'classify' is used twice" in text
    assert "must be a list of two or more variants" in text
    assert "variants 'x' and 'y' of action 'third' set the same values" in text
    assert ("invalid_variants", 20) in found
    assert "wf.yml" in text


def test_i38_variants_unknown_model_is_named_at_the_variants_line(project: Path) -> None:
    write_project(
        project,
        """name: triage
input: {path: data/, id_field: id}
actions:
  - name: classify
    model: openai/gpt-4o-mini
    prompt: "Classify: {{ source.text }}"
    variants:
      - {name: a, temperature: 0}
      - name: b
        model: nowhere/none
        prompt: "{{ source.nothing_here }} {{ classify.label }}"
""",
        agac_yml=project_yml(),
        data={"data/in.jsonl": [{"id": "r0", "text": "t"}]},
    )

    workflow, problems = api.validate("triage", project)

    assert workflow is None
    lines = {p.code: p.line for p in problems}
    assert lines["unknown_provider"] == 10
    assert any(p.line == 11 for p in problems)  # the variant's prompt


def test_i38_variants_compare_reports_exactly_the_rows_that_differ(
    emulator: Any, project: Path
) -> None:
    _write(project)
    run = api.run("triage", project, progress=False)

    doc = api.compare_variants(run.run_id, project)

    assert doc["variants"] == {"action": "classify", "a": "mini", "b": "large"}
    c = doc["actions"]["classify"]
    assert {row["key"]: row["fields"] for row in c["changed"]} == {
        "r1": ["label"],
        "r3": ["total"],
    }
    assert c["units"] == {"a": 4, "b": 4, "both": 4, "only_a": 0, "only_b": 0}
    assert c["agreement"] == {
        "label": {"same": 3, "compared": 4, "rate": 0.75},
        "total": {"same": 3, "compared": 4, "rate": 0.75},
    }
    assert c["distributions"] == {"label": {"a": {"neg": 2, "pos": 2}, "b": {"neg": 3, "pos": 1}}}
    assert c["numeric"]["total"]["mean_delta"] == 0.75
    assert c["numeric"]["total"]["changed"] == 1
    a, b = doc["runs"]["a"], doc["runs"]["b"]
    assert (a["variant"], a["action"], b["variant"], b["action"]) == (
        "mini",
        "classify",
        "large",
        "classify@large",
    )
    assert (a["models"], b["models"]) == (["openai/gpt-4o-mini"], ["openai/gpt-4o"])
    assert (a["calls"], b["calls"]) == (4, 4)
    assert b["cost_usd"] > a["cost_usd"] > 0  # gpt-4o costs more per token
    assert a["checks"] == {"classify": {"small": {"passed": 4, "failed": 0, "rate": 1.0}}}
    assert b["checks"] == {"classify": {"small": {"passed": 3, "failed": 1, "rate": 0.75}}}


def test_i38_variants_compare_from_the_cli_names_the_variants(emulator: Any, project: Path) -> None:
    _write(project)
    run = api.run("triage", project, progress=False)
    out = project / "changed.csv"

    result = CliRunner().invoke(
        cli, ["compare", run.run_id, "--variants", "--out", str(out)], catch_exceptions=False
    )

    assert result.exit_code == 0, result.output
    assert "A: variant mini of classify" in result.output
    assert "B: variant large of classify (classify@large)" in result.output
    assert "agreement: label 75% (3/4), total 75% (3/4)" in result.output
    assert out.read_text(encoding="utf-8").count("\n") == 3  # the header and two rows
    picked = CliRunner().invoke(
        cli, ["compare", run.run_id, "--variants", "large,mini", "--json"], catch_exceptions=False
    )
    assert json.loads(picked.output)["variants"] == {
        "action": "classify",
        "a": "large",
        "b": "mini",
    }


def test_i38_variants_compare_refuses_what_it_cannot_compare(emulator: Any, project: Path) -> None:
    _write(project)
    run = api.run("triage", project, progress=False)

    with pytest.raises(UsageError, match="has no variant 'huge'"):
        api.compare_variants(run.run_id, project, variants=("mini", "huge"))
    with pytest.raises(UsageError, match="no variants"):
        api.compare_variants(run.run_id, project, action="escalate")


def test_i38_variants_the_swapped_pairwise_judge_compares_the_variants(
    emulator: Any, project: Path
) -> None:
    _write(project, extra=" [[emulator prefers: first]]")
    run = api.run("triage", project, progress=False)
    before = chat_requests(emulator.stats(), "openai")

    doc = api.compare_variants(run.run_id, project, judge="openai/gpt-4o-mini")

    # r1 and r3 differ, each judged in both orders; the judge always picks the first: ties.
    pairwise = doc["actions"]["classify"]["pairwise"]
    assert (pairwise["compared"], pairwise["ties"], pairwise["calls"]) == (4, 4, 4)
    assert pairwise["b_win_rate"] == 0.5
    assert chat_requests(emulator.stats(), "openai") == before + 4
    rows = [r for r in api.cost(run.run_id, project)["rows"] if r["origin"] == "pairwise"]
    assert sum(r["calls"] for r in rows) == 4
    # Asked again, nothing is paid twice.
    again = api.compare_variants(run.run_id, project, judge="openai/gpt-4o-mini")
    assert again["actions"]["classify"]["pairwise"]["calls"] == 0


def test_i38_variants_records_show_and_export_each_variant_from_the_cli(
    emulator: Any, project: Path
) -> None:
    _write(project)
    api.run("triage", project, progress=False)
    runner = CliRunner()

    shown = runner.invoke(cli, ["records", "show", "r3", "--json"], catch_exceptions=False)
    exported = runner.invoke(
        cli,
        ["export", "triage", "--action", "classify@large", "--format", "jsonl"],
        catch_exceptions=False,
    )

    assert shown.exit_code == 0, shown.output
    entries = {a["action"]: a["output"] for a in json.loads(shown.output)["actions"]}
    assert entries["classify"] == {"label": "neg", "total": 4}
    assert entries["classify@large"] == {"label": "neg", "total": 7}
    assert exported.exit_code == 0, exported.output
    rows = {r["key"]: r for r in map(json.loads, exported.output.splitlines())}
    assert rows["r3"]["output"] == {"label": "neg", "total": 7}
    assert rows["r3"]["checks"] == {"small": False}
