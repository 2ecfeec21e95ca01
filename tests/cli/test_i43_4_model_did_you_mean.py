"""The newcomer's path: a misspelt model gets a did-you-mean from the price table at
validation, naming the file and line, and ``agac plan`` marks the rows it cannot price."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project

WORKFLOW = """\
name: typo
input: {path: data/, id_field: id}
actions:
  - name: ask
    model: openai/gpt-4o-mni
    prompt: "Say {{ source.text }}"
    max_tokens: 20
  - name: fine
    model: openai/gpt-4o-mini
    prompt: "Say {{ source.text }}"
    max_tokens: 20
"""

KEY = {"OPENAI_API_KEY": "sk-test-not-used"}


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write_project(
        root,
        WORKFLOW,
        workflow_file="workflows/typo.yml",
        data={"data/a.jsonl": [{"id": "a", "text": "hi"}, {"id": "b", "text": "yo"}]},
    )
    return root


def test_i43_4_a_misspelt_model_gets_a_did_you_mean_at_its_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    checked = agac("validate", "typo", "--json", cwd=root, env=KEY)
    assert checked.code == 0, checked  # a warning: the provider may know a model we do not
    (warning,) = [w for w in checked.json()["warnings"] if w["code"] == "unpriced_model"]
    assert warning["file"] == "workflows/typo.yml" and warning["line"] == 5, warning
    assert "did you mean 'openai/gpt-4o-mini'?" in warning["hint"], warning
    text = agac("validate", "typo", cwd=root, env=KEY)
    assert "workflows/typo.yml:5: warning:" in text.out + text.err, text
    assert "did you mean 'openai/gpt-4o-mini'?" in text.out + text.err, text


def test_i43_4_plan_marks_unpriced_rows(tmp_path: Path) -> None:
    root = _project(tmp_path)
    planned = agac("plan", "typo", "--json", cwd=root, env=KEY)
    assert planned.code == 0, planned
    doc = planned.json()
    assert doc["unpriced"] == ["ask"]
    assert doc["actions"]["ask"]["price"] == "unpriced"
    assert doc["actions"]["fine"]["price"] is None
    assert doc["actions"]["fine"]["cost_usd"]["online"] > 0
    text = agac("plan", "typo", cwd=root, env=KEY)
    assert text.code == 0, text
    (ask_row,) = [line for line in text.out.splitlines() if line.startswith("ask ")]
    (fine_row,) = [line for line in text.out.splitlines() if line.startswith("fine ")]
    # every cost cell of the unpriced row says so, where the priced row shows dollars
    # (or a dash for a tier its model is not sold on)
    cost_cells = fine_row.count("$") + fine_row.count("—")
    assert ask_row.count("unpriced") == cost_cells > 0 and "$" not in ask_row, ask_row
    assert "unpriced" not in fine_row
    assert "ask: model openai/gpt-4o-mni is unpriced" in text.out
