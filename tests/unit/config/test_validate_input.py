"""``agac validate`` checks the input too: it exists (with "did you mean"), its first
records have ``id_field`` and every ``source`` field a template, guard or fan-out reads
(unless guarded), and empty files or unreadable records are reported with file and line.
Also: a billion-laughs YAML is refused at once, and a dependency cycle does not hide the
other problems."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agac import api
from agac.errors import Problem
from agac.testing import write_project

WF = """
name: wf
input: {{path: {path}{id_field}}}
defaults: {{model: mock/m}}
actions:
  - name: classify
    prompt: "{prompt}"
"""


def _validate(
    root: Path,
    *,
    path: str = "data/",
    id_field: str = "",
    sample: int = 100,
    prompt: str = "Classify {{ source.text }}",
    data: dict | None = None,
    files: dict | None = None,
    workflow: str | None = None,
) -> list[Problem]:
    text = workflow or WF.format(
        path=path, prompt=prompt, id_field=f", id_field: {id_field}" if id_field else ""
    )
    write_project(
        root,
        text,
        workflow_file="wf.yml",
        data=data
        if data is not None
        else {"data/a.jsonl": [{"id": "r1", "text": "hello", "meta": {"lang": "en"}}]},
        files=files,
    )
    _, problems = api.validate("wf.yml", root, sample=sample)
    return problems


def _codes(problems: list[Problem], severity: str = "error") -> list[str]:
    return [p.code for p in problems if p.severity == severity]


def test_validate_reports_missing_input_path_with_did_you_mean(tmp_path: Path) -> None:
    problems = _validate(tmp_path, path="dta/")
    (p,) = [p for p in problems if p.code == "input_not_found"]
    assert (p.file, p.line, p.severity) == ("wf.yml", 3, "error")
    assert p.hint == "did you mean 'data'?"


def test_validate_lists_what_is_there_when_nothing_is_close(tmp_path: Path) -> None:
    problems = _validate(tmp_path, path="data/*.csv")
    (p,) = [p for p in problems if p.code == "input_not_found"]
    assert p.hint == "nothing in data/ matches '*.csv'; it holds: a.jsonl"


def test_validate_reports_missing_source_field(tmp_path: Path) -> None:
    problems = _validate(tmp_path, prompt="Classify {{ source.txt }}")
    (p,) = [p for p in problems if p.code == "missing_source_field"]
    assert (p.file, p.line, p.severity) == ("wf.yml", 7, "error")
    assert p.message == (
        "prompt of action 'classify' reads source.txt, which none of the first "
        "1 records has (their fields: id, text, meta)"
    )
    assert p.hint == "did you mean 'text'?"


def test_validate_reports_missing_nested_source_field(tmp_path: Path) -> None:
    problems = _validate(tmp_path, prompt="In {{ source.meta.language }}")
    (p,) = [p for p in problems if p.code == "missing_source_field"]
    assert "(their fields under source.meta: lang)" in p.message


@pytest.mark.parametrize(
    "prompt",
    [
        "{{ source.txt | default('') }}",
        "{% if source.txt is defined %}{{ source.txt.upper() }}{% endif %}",
        "{% if 'txt' in source %}{{ source.txt }}{% endif %}",
        "{{ source.meta.lang }} {{ source.text }}",
    ],
)
def test_validate_accepts_guarded_or_present_fields(tmp_path: Path, prompt: str) -> None:
    assert _codes(_validate(tmp_path, prompt=prompt)) == []


def test_validate_reports_a_guard_reading_a_missing_field(tmp_path: Path) -> None:
    workflow = """
name: wf
input: {path: data/}
defaults: {model: mock/m}
actions:
  - name: classify
    when: "source.language == 'en'"
    prompt: "{{ source.text }}"
  - name: only_some
    when: "source.language is defined and source.language == 'en'"
    prompt: "{{ source.text }}"
"""
    problems = _validate(tmp_path, workflow=workflow)
    (p,) = [p for p in problems if p.code == "missing_source_field"]
    assert p.line == 7 and p.message.startswith("guard of action 'classify' reads source.language")


def test_validate_reports_missing_id_field(tmp_path: Path) -> None:
    problems = _validate(tmp_path, id_field="review_id")
    (p,) = [p for p in problems if p.code == "missing_id_field"]
    assert p.severity == "error" and p.line == 3
    assert (
        p.message
        == "id_field 'review_id' is in none of the first 1 records (their fields: id, text, meta)"
    )


def test_validate_warns_when_some_records_lack_the_id_field(tmp_path: Path) -> None:
    data = {"data/a.jsonl": [{"id": "1", "text": "a"}, {"text": "b"}]}
    problems = _validate(tmp_path, id_field="id", data=data)
    assert _codes(problems) == []
    (p,) = [p for p in problems if p.code == "missing_id_field"]
    assert p.severity == "warning" and "1 of the first 2 records have no 'id'" in p.message


def test_validate_sample_option_reads_more_records(tmp_path: Path) -> None:
    rows = [{"text": f"t{i}"} for i in range(150)] + [{"text": "x", "late": 1}]
    data = {"data/a.jsonl": rows}
    assert _codes(_validate(tmp_path, prompt="{{ source.late }}", data=data)) == [
        "missing_source_field"
    ]
    assert _codes(_validate(tmp_path, prompt="{{ source.late }}", data=data, sample=200)) == []
    assert _codes(_validate(tmp_path, prompt="{{ source.late }}", data=data, sample=0)) == []


def test_validate_checks_fan_out_over_a_source_field(tmp_path: Path) -> None:
    workflow = """
name: wf
input: {path: data/}
defaults: {model: mock/m}
actions:
  - name: each
    fan_out: {over: source.clauses, as: clause}
    prompt: "{{ clause }}"
  - {name: summary, kind: join, dependencies: [each]}
"""
    problems = _validate(tmp_path, workflow=workflow)
    (p,) = [p for p in problems if p.code == "missing_source_field"]
    assert p.message.startswith("fan_out of action 'each' reads source.clauses")


def test_validate_warns_on_an_empty_input_file(tmp_path: Path) -> None:
    files = {"data/b.csv": "id,text\n", "data/c.jsonl": "\n"}
    problems = _validate(tmp_path, files=files)
    assert _codes(problems) == []
    empty = sorted((p.file, p.line) for p in problems if p.code == "empty_input")
    assert empty == [("data/b.csv", 1), ("data/c.jsonl", 1)]


def test_validate_warns_on_an_unclosed_csv_quote(tmp_path: Path) -> None:
    files = {"data/a.csv": 'id,text\n1,fine\n2,"oops\n3,swallowed\n4,also\n'}
    problems = _validate(tmp_path, files=files, data={})
    (p,) = [p for p in problems if p.code == "invalid_input"]
    assert (p.file, p.line, p.severity) == ("data/a.csv", 3, "warning")
    assert "never closed" in p.message and "(line 5)" in p.message


def test_yaml_too_large_is_refused_at_once(tmp_path: Path) -> None:
    """Billion laughs: ten levels of nine aliases each would expand to 9**10 values."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    workflow = "\n".join(lines) + "\ninput: {path: data/}\nactions: []\n"
    started = time.process_time()
    problems = _validate(tmp_path, workflow=workflow)
    assert time.process_time() - started < 0.5
    (p,) = problems
    assert (p.code, p.file, p.severity) == ("yaml_too_large", "wf.yml", "error")


def test_yaml_recursive_alias_is_refused(tmp_path: Path) -> None:
    problems = _validate(tmp_path, workflow="a: &a [1, *a]\ninput: {path: data/}\nactions: []\n")
    assert _codes(problems) == ["yaml_too_large"]


def test_dependency_cycle_still_reports_other_problems(tmp_path: Path) -> None:
    workflow = """
name: wf
input: {path: data/}
defaults: {model: mock/m}
actions:
  - name: a
    dependencies: [b]
    prompt: "{{ nothing.here }} {{ b.text }} {{ source.txt }}"
  - name: b
    dependencies: [a]
    promt: x
    prompt: "{{ source.text }}"
"""
    problems = _validate(tmp_path, workflow=workflow)
    assert sorted(_codes(problems)) == [
        "dependency_cycle",
        "missing_source_field",
        "undefined_variable",
        "unknown_key",
    ]


def test_validate_json_lists_input_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from agac.cli.main import cli

    write_project(
        tmp_path,
        WF.format(path="data/", id_field="", prompt="{{ source.txt }}"),
        workflow_file="wf.yml",
        data={"data/a.jsonl": [{"text": "a"}]},
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["validate", "wf.yml", "--json"])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert [e["code"] for e in doc["errors"]] == ["missing_source_field"]
