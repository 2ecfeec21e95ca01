"""Issue 23 item 5: ``agac validate`` checks a columnar input by its schema, not its rows —
``id_field`` and every ``source.X`` (and a struct's ``source.X.Y``) against the columns,
with "did you mean"; a column read without a JSON form and a damaged footer are one error
each naming the file; and a run over such an input admits nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import agac
from agac import api
from agac.errors import ConfigError, Problem

WF = """\
name: wf
input: {{path: data/, id_field: {id_field}}}
defaults: {{model: mock/m}}
actions:
  - name: classify
    prompt: "{prompt}"
"""


def table() -> pa.Table:
    return pa.table(
        {
            "review_id": ["a", "b"],
            "text": ["good", "bad"],
            "meta": pa.array([{"lang": "en"}, {"lang": "fr"}]),
        }
    )


def project(root: Path, prompt: str = "{{ source.text }}", id_field: str = "review_id") -> Path:
    (root / "data").mkdir(parents=True)
    (root / "agac.yml").write_text("")
    (root / "wf.yml").write_text(WF.format(prompt=prompt, id_field=id_field))
    pq.write_table(table(), root / "data" / "a.parquet")
    return root


def problems(root: Path) -> list[Problem]:
    return api.validate("wf.yml", root)[1]


def errors(root: Path) -> dict[str, Problem]:
    return {p.code: p for p in problems(root) if p.severity == "error"}


def test_i23_5_a_good_columnar_input_validates(tmp_path: Path) -> None:
    assert errors(project(tmp_path, "{{ source.text }} {{ source.meta.lang }}")) == {}


def test_i23_5_a_source_field_not_in_the_schema_with_did_you_mean(tmp_path: Path) -> None:
    problem = errors(project(tmp_path, "{{ source.txt }}"))["missing_source_field"]
    assert "source.txt" in problem.message and "review_id, text, meta" in problem.message
    assert problem.hint == "did you mean 'text'?"
    assert (problem.file, problem.line) == ("wf.yml", 6)  # the prompt


def test_i23_5_a_struct_field_is_checked_too(tmp_path: Path) -> None:
    problem = errors(project(tmp_path, "{{ source.meta.lnag }}"))["missing_source_field"]
    assert "has no field 'lnag'" in problem.message and problem.hint == "did you mean 'lang'?"


def test_i23_5_id_field_not_a_column(tmp_path: Path) -> None:
    problem = errors(project(tmp_path, id_field="reviewid"))["missing_id_field"]
    assert "a.parquet" in problem.message and problem.hint == "did you mean 'review_id'?"


def test_i23_5_a_column_read_without_a_json_form(tmp_path: Path) -> None:
    root = project(tmp_path, "{{ source.span }}")
    odd = pa.table(
        {
            "review_id": ["c"],
            "span": pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval()),
        }
    )
    with (
        pa.OSFile(str(root / "data" / "b.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, odd.schema) as writer,
    ):
        writer.write_table(odd)
    problem = errors(root)["unsupported_column"]
    assert "'span'" in problem.message and "b.arrow" in problem.message
    with pytest.raises(ConfigError) as caught:
        agac.run("wf.yml", root, progress=False)
    assert caught.value.problems[0].code == "unsupported_column"
    assert api.list_runs(project=root) == []


def test_i23_5_the_schema_is_read_not_the_rows(tmp_path: Path) -> None:
    """Rows damaged behind an intact footer: validate (schema only) is clean, the run is
    refused naming the file, and nothing is admitted."""
    root = project(tmp_path)
    path = root / "data" / "a.parquet"
    data = bytearray(path.read_bytes())
    meta = pq.ParquetFile(path).metadata.row_group(0).column(1)
    start = meta.data_page_offset
    data[start : start + meta.total_compressed_size] = os.urandom(meta.total_compressed_size)
    path.write_bytes(bytes(data))
    assert errors(root) == {}
    with pytest.raises(ConfigError) as caught:
        agac.run("wf.yml", root, progress=False)
    assert caught.value.problems[0].code == "input_unreadable"
    assert "a.parquet" in caught.value.problems[0].message
    assert api.list_runs(project=root) == []


def test_i23_5_a_damaged_footer_is_one_error_naming_the_file_in_json(tmp_path: Path) -> None:
    root = project(tmp_path)
    path = root / "data" / "a.parquet"
    path.write_bytes(path.read_bytes()[:-20])
    done = subprocess.run(
        [sys.executable, "-m", "agac.cli.main", "validate", "wf.yml", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env=os.environ.copy(),
    )
    assert done.returncode == 2, done.stderr
    found = json.loads(done.stdout)["errors"]
    assert [p["code"] for p in found] == ["input_unreadable"]
    assert "data/a.parquet" in found[0]["message"] and "footer" in found[0]["hint"]
    run = subprocess.run(
        [sys.executable, "-m", "agac.cli.main", "run", "wf.yml", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env=os.environ.copy(),
    )
    assert run.returncode == 2
    assert "input_unreadable" in run.stdout
    assert api.list_runs(project=root) == []
