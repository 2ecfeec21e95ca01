"""Export writers: JSONL and CSV rows of key, status, reason, output (docs/cli.md, agac events)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from agac.data.export import (
    open_binary_output,
    open_output,
    write_csv,
    write_jsonl,
    write_parquet,
    write_wide_csv,
    write_wide_jsonl,
)

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


# -- the wide table (docs/python.md) --------------------------------------------------------------


def _wide():
    from agac.data.results import ActionOutput, ResultTable, Unit

    table = ResultTable(
        [
            ActionOutput(
                "classify",
                {
                    "type": "object",
                    "properties": {
                        "sentiment": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "ok": {"type": "boolean"},
                    },
                },
            ),
            ActionOutput("route", None),
        ]
    )
    units = {
        "classify": [
            Unit("r1", "answered", None, {"sentiment": "pos", "tags": ["a", "b"], "ok": True})
        ],
        "route": [Unit("r1", "answered", None, {"queue": "q1"})],
    }
    return table, units


def test_write_wide_jsonl_keys_rows_by_column_name() -> None:
    table, units = _wide()
    out = io.StringIO()
    rows = [table.row("r1", units, json_text=False), table.row("r2", {}, json_text=False)]
    assert write_wide_jsonl(table.names, rows, out) == 2
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {
        "key": "r1",
        "classify.sentiment": "pos",
        "classify.tags": ["a", "b"],
        "classify.ok": True,
        "classify#status": "answered",
        "classify#reason": None,
        "route": {"queue": "q1"},
        "route#status": "answered",
        "route#reason": None,
    }
    assert second["classify#status"] == "pending"


def test_write_wide_csv_writes_lists_objects_and_booleans_as_json() -> None:
    table, units = _wide()
    out = io.StringIO()
    assert write_wide_csv(table.names, [table.row("r1", units)], out) == 1
    header, row = list(csv.reader(io.StringIO(out.getvalue())))
    assert header == list(table.names)
    got = dict(zip(header, row, strict=True))
    assert got["classify.tags"] == '["a","b"]' and got["classify.ok"] == "true"
    assert got["route"] == '{"queue":"q1"}' and got["classify#reason"] == ""


def test_write_parquet_one_row_group_per_chunk(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    table, units = _wide()
    path = tmp_path / "out" / "wide.parquet"
    groups = [[table.row("r1", units)], [table.row(f"r{i}", {}) for i in range(2, 5)], []]
    with open_binary_output(str(path)) as handle:
        assert write_parquet(table, groups, handle) == 4
    meta = pq.ParquetFile(path).metadata
    assert (meta.num_rows, meta.num_row_groups) == (4, 2)
    back = pq.read_table(path)
    assert back.column_names == list(table.names)
    assert back.slice(0, 1).to_pylist()[0]["classify.tags"] == ["a", "b"]
    assert [p.name for p in path.parent.iterdir()] == ["wide.parquet"]


def test_a_failed_binary_export_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "wide.parquet"
    with pytest.raises(RuntimeError), open_binary_output(str(path)) as handle:
        handle.write(b"PAR1")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


# -- CSV formula injection (issue 29 item 14, X4) ---------------------------------------


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+cmd", "'+cmd"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-", "'-"),
        ("=", "'="),
        ("-5", "-5"),
        ("+1.5e3", "+1.5e3"),
        ("-.5", "-.5"),  # plain numbers run nothing
        ("plain", "plain"),
        ("", ""),
        (" =x", " =x"),
        ("'=x", "'=x"),
    ],
)
def test_x4_neutralize_formula(cell: str, written: str) -> None:
    from agac.data.export import neutralize_formula

    assert neutralize_formula(cell) == written


def _read_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_i29_14_per_action_csv_neutralizes_key_detail_and_output() -> None:
    rows = [
        {
            "key": "=k",
            "status": "failed",
            "reason": "tool_error",
            "output": None,
            "detail": "-x failed",
        },
        {
            "key": "@k",
            "status": "answered",
            "reason": None,
            "output": "=model said",
            "tenant": "+t",
        },
        {"key": "-5", "status": "answered", "reason": None, "output": -5},
    ]
    out = io.StringIO()

    write_csv(rows, out)

    _, first, second, third = _read_csv(out.getvalue())
    assert first[:4] == ["'=k", "failed", "tool_error", "'-x failed"]
    # A string output is JSON text ("=model said" quoted): nothing for a spreadsheet to run.
    assert second == ["'@k", "answered", "", "", '"=model said"', "'+t"]
    assert third[0] == "-5" and third[4] == "-5"


def test_i29_14_wide_csv_neutralizes_text_cells_not_numbers() -> None:
    out = io.StringIO()

    write_wide_csv(
        ["key", "source.note", "a.n", "a.tags"],
        [["=k", "\rnote", -5.5, ["=x"]], ["k", "@me", 3, None]],
        out,
    )

    header, first, second = _read_csv(out.getvalue())
    assert header == ["key", "source.note", "a.n", "a.tags"]
    assert first == ["'=k", "'\rnote", "-5.5", '["=x"]']
    assert second == ["k", "'@me", "3", ""]


def test_i29_14_escape_formulas_false_writes_cells_verbatim() -> None:
    per_action, wide = io.StringIO(), io.StringIO()

    write_csv(
        [{"key": "=k", "status": "answered", "reason": None, "output": None}],
        per_action,
        escape_formulas=False,
    )
    write_wide_csv(["key", "note"], [["=k", "@me"]], wide, escape_formulas=False)

    assert _read_csv(per_action.getvalue())[1][0] == "=k"
    assert _read_csv(wide.getvalue())[1] == ["=k", "@me"]


def test_i29_14_a_carriage_return_inside_a_cell_is_quoted() -> None:
    """The csv module quotes only the line terminator's characters: an unquoted CR would
    split the row for every reader."""
    out = io.StringIO()

    write_wide_csv(["key", "note"], [["k", "a\rb"], ["k2", "c"]], out)

    assert _read_csv(out.getvalue()) == [["key", "note"], ["k", "a\rb"], ["k2", "c"]]
