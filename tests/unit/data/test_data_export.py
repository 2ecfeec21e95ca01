"""Export writers: JSONL and CSV rows of key, status, reason, output (DESIGN §9)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from agac.data.export import open_output, write_csv, write_jsonl

ROWS = [
    {"key": "r1", "status": "answered", "reason": None, "output": {"sentiment": "pos", "é": [1]}},
    {
        "key": "r2",
        "status": "failed",
        "reason": "invalid_input",
        "output": None,
        "detail": "a.jsonl:2: not valid JSON",
    },
    {"key": "r,3", "status": "skipped", "reason": "guard", "output": {"text": "line\nbreak"}},
]


def test_write_jsonl_one_object_per_row() -> None:
    out = io.StringIO()
    assert write_jsonl(iter(ROWS), out) == 3
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    first, second, third = (json.loads(line) for line in lines)
    assert list(first) == ["key", "status", "reason", "output"]
    assert first["output"] == {"sentiment": "pos", "é": [1]}
    assert second == {
        "key": "r2",
        "status": "failed",
        "reason": "invalid_input",
        "output": None,
        "detail": "a.jsonl:2: not valid JSON",
    }
    assert "é" in lines[0]  # written as UTF-8, not \\u escapes
    assert third["output"]["text"] == "line\nbreak"


def test_write_csv_header_and_compact_json_output() -> None:
    out = io.StringIO()
    assert write_csv(iter(ROWS), out) == 3
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows[0] == ["key", "status", "reason", "detail", "output", "tenant"]
    assert rows[1] == ["r1", "answered", "", "", '{"sentiment":"pos","é":[1]}', ""]
    assert rows[2] == ["r2", "failed", "invalid_input", "a.jsonl:2: not valid JSON", "", ""]
    assert rows[3][0] == "r,3"
    assert json.loads(rows[3][4]) == {"text": "line\nbreak"}


def test_write_csv_with_no_rows_writes_the_header() -> None:
    out = io.StringIO()
    assert write_csv([], out) == 0
    assert out.getvalue() == "key,status,reason,detail,output,tenant\n"


def test_writers_stream_from_a_generator() -> None:
    def rows():  # type: ignore[no-untyped-def]
        for i in range(1000):
            yield {"key": f"k{i}", "status": "answered", "reason": None, "output": {"i": i}}

    out = io.StringIO()
    assert write_jsonl(rows(), out) == 1000


def test_open_output_none_is_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with open_output(None) as out:
        write_jsonl(ROWS[:1], out)
    assert json.loads(capsys.readouterr().out)["key"] == "r1"


def test_open_output_writes_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "out" / "export.csv"
    with open_output(str(target)) as out:
        write_csv(ROWS, out)
    text = target.read_text(encoding="utf-8")
    assert text.startswith("key,status,reason,detail,output,tenant\n")
    assert list(target.parent.iterdir()) == [target]


def test_open_output_failure_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    target.write_text("earlier export\n")
    with pytest.raises(RuntimeError), open_output(str(target)) as out:
        out.write('{"key": "half')
        raise RuntimeError("store went away")
    assert target.read_text() == "earlier export\n"
    assert list(tmp_path.iterdir()) == [target]


def test_t2_exports_name_the_runs_tenant() -> None:
    row = {"key": "r1", "status": "answered", "reason": None, "output": 1, "tenant": "acme"}
    out = io.StringIO()
    write_jsonl([row], out)
    assert list(json.loads(out.getvalue())) == ["key", "status", "reason", "output", "tenant"]
    out = io.StringIO()
    write_csv([row], out)
    assert out.getvalue().splitlines()[1] == "r1,answered,,,1,acme"
