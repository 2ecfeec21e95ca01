"""Workflows given as dicts and projects created on first use (docs/python.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agac.api.inline import GENERATED, project_for, workflow_file
from agac.errors import ConfigError, UsageError

WF = {
    "name": "triage",
    "input": {"path": "d.jsonl"},
    "actions": [{"name": "a", "model": "mock/m", "prompt": "Say {{ source.text }}"}],
}


def test_a_missing_project_folder_is_created_with_an_agac_yml(tmp_path: Path) -> None:
    project = project_for(tmp_path / "new" / "proj")
    assert project.root == (tmp_path / "new" / "proj").resolve()
    assert (project.root / "agac.yml").is_file() and project.has_file


def test_a_dict_is_written_under_workflows_and_rewritten_when_it_changes(tmp_path: Path) -> None:
    project = project_for(tmp_path / "p")
    path = Path(workflow_file(WF, project))
    assert path == project.root / "workflows" / "triage.yml"
    text = path.read_text(encoding="utf-8")
    assert text.startswith(GENERATED) and yaml.safe_load(text) == WF
    changed = {**WF, "description": "edited"}
    assert workflow_file(changed, project) == path
    assert yaml.safe_load(path.read_text(encoding="utf-8"))["description"] == "edited"
    assert workflow_file("triage", project) == "triage"  # a name or path passes through


def test_without_a_name_the_content_names_it(tmp_path: Path) -> None:
    project = project_for(tmp_path / "p")
    unnamed = {k: v for k, v in WF.items() if k != "name"}
    first = Path(workflow_file(unnamed, project))
    assert first.name.startswith("workflow-") and first.suffix == ".yml"
    assert Path(workflow_file(unnamed, project)) == first
    assert Path(workflow_file({**unnamed, "description": "x"}, project)) != first


def test_a_hand_written_file_is_never_overwritten(tmp_path: Path) -> None:
    project = project_for(tmp_path / "p")
    mine = project.root / "workflows" / "triage.yml"
    mine.parent.mkdir()
    mine.write_text("name: triage\n# mine\n", encoding="utf-8")
    with pytest.raises(UsageError, match="not generated from a dict"):
        workflow_file(WF, project)
    assert mine.read_text(encoding="utf-8") == "name: triage\n# mine\n"


@pytest.mark.parametrize("name", ["../escape", "a/b", "", 3])
def test_a_name_that_cannot_name_a_file_is_refused(tmp_path: Path, name: object) -> None:
    project = project_for(tmp_path / "p")
    with pytest.raises(ConfigError) as caught:
        workflow_file({**WF, "name": name}, project)
    assert caught.value.problems[0].path == "name"
    assert not (project.root / "workflows").exists()
