"""resolve_input_files: a file, a folder or a glob of input files (docs/workflow-reference.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agac.data.inputs import resolve_input_files
from agac.errors import ConfigError


def touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codes(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [p.code for p in exc.value.problems]


def test_a_file_relative_to_the_root(tmp_path: Path) -> None:
    path = touch(tmp_path / "data" / "a.jsonl")
    assert resolve_input_files("data/a.jsonl", tmp_path) == [path]


def test_an_absolute_file(tmp_path: Path) -> None:
    path = touch(tmp_path / "a.csv")
    assert resolve_input_files(str(path), tmp_path / "elsewhere") == [path]


def test_a_folder_gives_its_supported_files_sorted_not_recursive(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    b = touch(folder / "b.json")
    a = touch(folder / "a.jsonl")
    c = touch(folder / "c.CSV")
    touch(folder / "notes.txt")
    touch(folder / ".a.jsonl.swp.jsonl")
    touch(folder / "nested" / "d.jsonl")
    assert resolve_input_files("data", tmp_path) == [a, b, c]
    assert resolve_input_files("data/", tmp_path) == [a, b, c]


def test_a_glob_relative_to_the_root(tmp_path: Path) -> None:
    a = touch(tmp_path / "data" / "part-1.jsonl")
    b = touch(tmp_path / "data" / "part-2.jsonl")
    touch(tmp_path / "data" / "other.jsonl")
    touch(tmp_path / "data" / "part-3.txt")
    assert resolve_input_files("data/part-*", tmp_path) == [a, b]


def test_a_recursive_glob(tmp_path: Path) -> None:
    a = touch(tmp_path / "data" / "x" / "a.jsonl")
    b = touch(tmp_path / "data" / "y" / "z" / "b.jsonl")
    assert resolve_input_files("data/**/*.jsonl", tmp_path) == [a, b]


def test_missing_file_is_input_not_found_naming_the_spec(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        resolve_input_files("data/missing.jsonl", tmp_path, file="wf.yml", line=3)
    assert codes(exc) == ["input_not_found"]
    problem = exc.value.problems[0]
    assert "data/missing.jsonl" in problem.message
    assert (problem.file, problem.line) == ("wf.yml", 3)


def test_glob_without_matches_is_input_not_found(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        resolve_input_files("data/*.jsonl", tmp_path)
    assert codes(exc) == ["input_not_found"]
    assert "data/*.jsonl" in exc.value.problems[0].message


def test_folder_without_input_files_is_input_not_found(tmp_path: Path) -> None:
    touch(tmp_path / "data" / "readme.md")
    with pytest.raises(ConfigError) as exc:
        resolve_input_files("data", tmp_path)
    assert codes(exc) == ["input_not_found"]


def test_empty_spec_is_input_not_found(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        resolve_input_files("  ", tmp_path)
    assert codes(exc) == ["input_not_found"]


def test_explicit_file_with_other_extension_is_unsupported(tmp_path: Path) -> None:
    touch(tmp_path / "data.txt")
    with pytest.raises(ConfigError) as exc:
        resolve_input_files("data.txt", tmp_path)
    assert codes(exc) == ["unsupported_input"]
    assert "data.txt" in exc.value.problems[0].message


def test_glob_matching_only_unsupported_files_is_unsupported(tmp_path: Path) -> None:
    touch(tmp_path / "data" / "a.txt")
    with pytest.raises(ConfigError) as exc:
        resolve_input_files("data/*", tmp_path)
    assert codes(exc) == ["unsupported_input"]
