"""A judge's call reserves budget like any call (The quality loop: judges): the run's
budget covers its judges, and when it has no room for one the judge is not sent and the
unit it grades is skipped ``budget_exhausted``, naming the check. The answer is kept, so
a later run with room reuses it and asks only the judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import e2e_support
import pytest
from e2e_support import chat_requests, project_yml

from agac import api
from agac.testing import write_project

WF = """name: triage
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  max_concurrency: 1
  timeout: 10s
actions:
  - name: invoice
    prompt: "Read this invoice: {{ source.text }}"
    schema:
      type: object
      properties: {label: {type: string}}
      required: [label]
      additionalProperties: false
    checks:
      - name: judged
        judge:
          model: openai/gpt-4o-mini
          max_tokens: 4000
          prompt: "Record: {{ source.text }} Answer: {{ answer | tojson }}"
        on_fail: flag
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(e2e_support, "TRANSPORT", "lean")
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    rows = [{"id": f"r{i}", "text": f"invoice {i}"} for i in range(3)]
    write_project(root, WF, agac_yml=project_yml(), data={"data/in.jsonl": rows})
    return root


def _calls(project: Path, run: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in api.cost(run, project)["rows"]:
        out[r["origin"]] = out.get(r["origin"], 0) + r["calls"]
    return out


def test_i38_3_a_judge_reserves_budget_and_a_budget_stop_names_it(
    emulator: Any, project: Path
) -> None:
    # $0.001 holds an answer's worst case (256 tokens out) but not the judge's (4,000).
    first = api.run(
        "triage", project, budget_usd=0.001, allow_over_estimate=True, progress=False
    ).summary.to_dict()

    assert first["actions"]["invoice"]["reasons"] == {"budget_exhausted": 3}
    rows = {r["key"]: r for r in api.export_rows("triage", "invoice", project)}
    assert rows["r0"]["status"] == "skipped"
    assert rows["r0"]["detail"] == (
        "the judge of check 'judged' was never sent: the budget ($0.001) has no room for "
        "its worst case"
    )
    assert rows["r1"]["detail"].startswith("never sent: the budget")
    # One answer asked, no judge: the ledger is what the emulator saw.
    assert chat_requests(emulator.stats(), "openai") == 1
    assert _calls(project, first["run_id"]) == {"call": 1}
    assert first["budget"]["spent_usd"] <= 0.001

    # With room, r0's kept answer is reused and only its judge is asked.
    second = api.run("triage", project, new=True, progress=False).summary.to_dict()

    assert second["actions"]["invoice"]["answered"] == 3
    assert second["checks"]["invoice"]["judged"]["passed"] == 3
    chats = [e for e in emulator.requests() if e["op"] == "chat"]
    asked = [json.dumps(c["body"]) for c in chats if "Record:" not in json.dumps(c["body"])]
    assert (len(chats), len(asked)) == (1 + 2 + 3, 3)  # r0's answer asked once in all
    assert _calls(project, second["run_id"]) == {"call": 2, "judge": 3}
