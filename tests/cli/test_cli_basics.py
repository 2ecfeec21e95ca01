"""``agac --version``, ``agac init`` and ``agac validate`` through the console script."""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import agac

from agac import __version__

BROKEN_KEYS = """\
name: broken
input: {path: data/a.jsonl}
defaults: {model: mock/m}
actions:
  - name: ask
    promt: "Say {{ source.text }}"
  - name: after
    dependencies: [ask, nowhere]
    prompt: "again"
"""

MALFORMED = """\
name: malformed
actions:
  - name: ask
   prompt: [
"""

LOCATED = re.compile(r"^(?P<file>\S+):(?P<line>\d+): error: .+ \[(?P<code>[a-z_]+)\]")


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    result = agac("--version", cwd=tmp_path)
    assert result.code == 0, result
    assert result.out.strip() == f"agac, version {__version__}"


def test_init_creates_project_and_never_overwrites(tmp_path: Path) -> None:
    first = agac("init", "proj", "--example", "quickstart", cwd=tmp_path)
    assert first.code == 0, first
    root = tmp_path / "proj"
    for rel in ("agac.yml", "workflows/review_triage.yml", "tools/triage.py"):
        assert (root / rel).is_file()
    assert any(root.glob("data/**/*.jsonl"))
    assert "created workflows/review_triage.yml" in first.out

    edited = root / "workflows" / "review_triage.yml"
    edited.write_text("# mine\n", encoding="utf-8")
    (root / "agac.yml").write_text("# also mine\n", encoding="utf-8")
    second = agac("init", "proj", "--json", cwd=tmp_path)
    assert second.code == 0, second
    doc = second.json()
    assert doc["created"] == []
    assert "workflows/review_triage.yml" in doc["kept"] and "agac.yml" in doc["kept"]
    assert edited.read_text(encoding="utf-8") == "# mine\n"
    assert (root / "agac.yml").read_text(encoding="utf-8") == "# also mine\n"


def test_init_restores_only_missing_files(tmp_path: Path) -> None:
    agac("init", "proj", cwd=tmp_path)
    (tmp_path / "proj" / "tools" / "triage.py").unlink()
    again = agac("init", "proj", cwd=tmp_path)
    assert again.code == 0, again
    assert "created tools/triage.py" in again.out
    assert "kept    agac.yml (exists)" in again.out


def test_init_unknown_example_is_a_usage_error(tmp_path: Path) -> None:
    result = agac("init", "proj", "--example", "no-such-example", cwd=tmp_path)
    assert result.code == 2, result
    assert "no-such-example" in result.err


def test_validate_accepts_the_example(tmp_path: Path) -> None:
    agac("init", "proj", cwd=tmp_path)
    root = tmp_path / "proj"
    by_name = agac("validate", "review_triage", cwd=root)
    assert by_name.code == 0, by_name
    assert by_name.out.strip() == "review_triage: valid (3 actions)"
    by_path = agac("validate", "workflows/review_triage.yml", "--json", cwd=root)
    assert by_path.code == 0, by_path
    assert by_path.json() == {"ok": True, "workflow": "review_triage", "errors": [], "warnings": []}


def _broken_project(root: Path) -> None:
    (root / "agac.yml").write_text("", encoding="utf-8")
    (root / "workflows").mkdir()
    (root / "workflows" / "broken.yml").write_text(BROKEN_KEYS, encoding="utf-8")
    (root / "workflows" / "malformed.yml").write_text(MALFORMED, encoding="utf-8")


def test_validate_reports_every_error_with_file_line_and_code(tmp_path: Path) -> None:
    _broken_project(tmp_path)
    result = agac("validate", "workflows/broken.yml", cwd=tmp_path)
    assert result.code == 2, result
    assert result.out == ""
    found = {}
    for line in result.err.splitlines():
        match = LOCATED.match(line)
        if match:
            found[match["code"]] = (match["file"], int(match["line"]), line)
    assert found["unknown_key"][:2] == ("workflows/broken.yml", 6)
    assert "did you mean 'prompt'?" in found["unknown_key"][2]
    assert found["unknown_dependency"][:2] == ("workflows/broken.yml", 8)
    assert "nowhere" in found["unknown_dependency"][2]


def test_validate_json_has_ok_errors_warnings(tmp_path: Path) -> None:
    _broken_project(tmp_path)
    result = agac("validate", "workflows/broken.yml", "--json", cwd=tmp_path)
    assert result.code == 2, result
    doc = result.json()
    assert {"ok", "errors", "warnings"} <= doc.keys()
    assert doc["ok"] is False
    codes = {e["code"] for e in doc["errors"]}
    assert {"unknown_key", "unknown_dependency"} <= codes
    for error in doc["errors"]:
        assert {"code", "message", "file", "line", "severity", "hint"} <= error.keys()
        assert error["severity"] == "error"
    hint = next(e for e in doc["errors"] if e["code"] == "unknown_key")["hint"]
    assert hint == "did you mean 'prompt'?"


def test_validate_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    _broken_project(tmp_path)
    result = agac("validate", "workflows/malformed.yml", cwd=tmp_path)
    assert result.code == 2, result
    match = LOCATED.match(result.err.splitlines()[0])
    assert match is not None, result
    assert (match["file"], match["code"]) == ("workflows/malformed.yml", "yaml_syntax")
    assert int(match["line"]) in (3, 4)


def test_validate_unknown_workflow_exits_2(tmp_path: Path) -> None:
    (tmp_path / "agac.yml").write_text("", encoding="utf-8")
    result = agac("validate", "nope", cwd=tmp_path)
    assert result.code == 2, result
    assert "nope" in result.err


def test_run_unknown_workflow_exits_2_with_code(tmp_path: Path) -> None:
    result = agac("run", "anything", cwd=tmp_path)
    assert result.code == 2, result
    assert result.out == ""
    assert "[workflow_not_found]" in result.err


def test_usage_error_exits_2(tmp_path: Path) -> None:
    result = agac("run", cwd=tmp_path)
    assert result.code == 2, result
    assert "Missing argument" in result.err
