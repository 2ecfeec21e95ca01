"""Issue 35 (Hardening, third pass), item 1: ``attachment_folders:`` — the explicit list of
folders outside the project that an llm action's attachment paths may lead into: typed,
in ``defaults:``, each an existing folder, in the config hash only when set, and in the
workflow schema."""

from __future__ import annotations

from pathlib import Path

from agac.config.schema import workflow_schema

BASE = """
input: {path: data.jsonl}
actions:
  - name: read
    model: mock/m
    prompt: "Read it"
    attachments: ["{{ source.file }}"]
"""


def test_i35_1_attachment_folders_are_read_into_the_action(wf, tmp_path: Path) -> None:
    (tmp_path / "scans").mkdir()
    (wf.root.parent / "beside").mkdir()  # relative to the project root
    checked = wf.check(BASE + f"    attachment_folders: [{tmp_path / 'scans'}, ../beside]\n")
    assert checked.problems == []
    assert checked.workflow is not None
    action = checked.workflow.action("read")
    assert action.attachment_folders == (str(tmp_path / "scans"), "../beside")


def test_i35_1_attachment_folders_in_defaults_reach_every_llm_action(wf, tmp_path: Path) -> None:
    (tmp_path / "scans").mkdir()
    text = BASE.replace(
        "input: {path: data.jsonl}\n",
        f"input: {{path: data.jsonl}}\ndefaults: {{attachment_folders: [{tmp_path / 'scans'}]}}\n",
    )
    checked = wf.check(text + "  - name: again\n    model: mock/m\n    prompt: x\n")
    assert checked.problems == []
    assert checked.workflow is not None
    for name in ("read", "again"):
        assert checked.workflow.action(name).attachment_folders == (str(tmp_path / "scans"),)


def test_i35_1_a_listed_folder_must_be_one(wf) -> None:
    (wf.root.parent / "file.png").write_bytes(b"x")
    for entry, why in (("../nothing-here", "does not exist"), ("../file.png", "is a file")):
        checked = wf.check(BASE + f"    attachment_folders: [{entry}]\n")
        p = checked.one("invalid_value")
        assert p.line == checked.line_of("attachment_folders:") and why in p.message
    checked = wf.check(BASE + "    attachment_folders: /srv\n")
    p = checked.one("invalid_value")
    assert "list of folders" in p.message


def test_i35_1_the_list_enters_the_config_hash_only_when_set(wf, tmp_path: Path) -> None:
    (tmp_path / "scans").mkdir()
    plain = wf.check(BASE).workflow
    empty = wf.check(BASE + "    attachment_folders: []\n").workflow
    listed = wf.check(BASE + f"    attachment_folders: [{tmp_path / 'scans'}]\n").workflow
    assert plain is not None and empty is not None and listed is not None
    assert plain.config_hash == empty.config_hash != listed.config_hash
    assert "attachment_folders" not in plain.snapshot()["actions"][0]
    assert type(listed).from_snapshot(listed.snapshot()) == listed


def test_i35_1_the_workflow_schema_has_attachment_folders() -> None:
    schema = workflow_schema()
    for where in ("action", "defaults"):
        props = schema["definitions"][where]["properties"]
        assert props["attachment_folders"]["type"] == "array"
        assert props["attachment_folders"]["items"]["type"] == "string"
