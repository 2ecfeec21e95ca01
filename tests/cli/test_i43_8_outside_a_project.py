"""The newcomer's path: outside a project (no agac.yml here or above), a command that only
looks creates no store, and a workflow named by its name is looked for in the folder's own
files, never in every subfolder of, say, a home folder."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

WORKFLOW = """\
name: deep
input: {path: data.jsonl, id_field: id}
actions:
  - name: ask
    model: mock/m
    prompt: "Say {{ source.text }}"
"""


def test_i43_8_reading_commands_outside_a_project_create_no_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for args in (("status", "deep"), ("runs", "list"), ("cost", "deep"), ("batches", "list")):
        result = agac(*args, cwd=home)
        assert not (home / ".agac").exists(), (args, result.out, result.err)
        if args[0] != "batches":
            assert result.code != 0, (args, result.out)
            assert "no agac project here" in result.err, (args, result.err)
            assert str(home) in result.err


def test_i43_8_a_workflow_name_outside_a_project_is_not_searched_in_subfolders(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    deep = home / "projects" / "old"
    deep.mkdir(parents=True)
    (deep / "deep.yml").write_text(WORKFLOW, encoding="utf-8")
    (home / "data.jsonl").write_text('{"id": "a", "text": "hi"}\n', encoding="utf-8")
    result = agac("validate", "deep", cwd=home)
    assert result.code != 0
    assert "workflow_not_found" in result.err or "no workflow" in result.err
    assert "only this folder's own files were searched" in result.err
    assert not (home / ".agac").exists()
    # Named by its path, or from inside a project, the same file is found.
    assert agac("validate", "projects/old/deep.yml", cwd=home).code == 0
    (home / "agac.yml").write_text("", encoding="utf-8")
    assert agac("validate", "deep", cwd=home).code == 0
