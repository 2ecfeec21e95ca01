"""One guard evaluator (issue 37, the run's graph typed once): ``agac run``, ``agac plan``
and ``agac render`` judge a ``when:`` guard alike. A guard reading a missing field is
false (the unit is skipped ``guard``); a guard that fails (a type error) fails the unit
``render_error`` in the run, and ``agac render`` says so instead of showing it false."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project


def _project(root: Path) -> Path:
    write_project(
        root,
        "name: wf\ninput: {path: data.jsonl, id_field: id}\ndefaults: {model: mock/m}\n"
        "actions:\n"
        "  - name: reply\n    prompt: 'Say {{ source.text }}'\n"
        "    when: \"source.n + 'x' == 'ax'\"\n",
        data={"data.jsonl": [{"id": "r1", "text": "hi", "n": 3}]},
        workflow_file="wf.yml",
    )
    return root


def test_i37_1_render_and_run_judge_a_failing_guard_alike(tmp_path: Path) -> None:
    root = _project(tmp_path)
    shown = agac("render", "wf", "--record", "r1", "--json", cwd=root).json()
    assert shown[0]["reason"] == "render_error"
    assert "guard" not in shown[0] and "request" not in shown[0]
    assert "would fail render_error" in shown[0]["note"]
    ran = agac("run", "wf", "--json", cwd=root)
    doc = ran.json()
    assert doc["actions"]["reply"]["failed"] == 1
    assert doc["actions"]["reply"]["reasons"] == {"render_error": 1}
    planned = agac("plan", "wf", "--json", cwd=root).json()
    assert planned["actions"]["reply"]["units"] == 1
    assert planned["actions"]["reply"]["requests"] == 0  # the run sends none either
