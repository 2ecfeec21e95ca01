"""``agac export`` of the wide results table (docs/python.md): parquet read back with pyarrow
and with DuckDB to the same rows as ``agac.results``; JSONL and CSV of the same table; a
fan-out action's fields as lists in item order; ``--action A`` with jsonl/csv keeps the
per-action rows."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_support import Quickstart, agac

from agac import api


def _table(root: Path, **kwargs: object) -> list[dict[str, object]]:
    return api.results("review_triage", project=root, **kwargs).to_arrow().to_pylist()


def test_parquet_reads_back_with_pyarrow_and_duckdb_to_the_same_rows(
    quickstart: Quickstart,
) -> None:
    root = quickstart.root
    done = agac(
        "export",
        "review_triage",
        "--format",
        "parquet",
        "--all-actions",
        "--include-source",
        "--out",
        "out/wide.parquet",
        "--json",
        cwd=root,
    )
    assert done.code == 0, done
    path = root / "out" / "wide.parquet"
    expected = _table(root, include_source=True)
    assert len(expected) == 24
    assert done.json() == {"out": "out/wide.parquet", "rows": 24, "format": "parquet"}
    assert pq.read_table(path).to_pylist() == expected
    con = duckdb.connect()
    cursor = con.execute(f"SELECT * FROM read_parquet('{path}') ORDER BY key")
    columns = [d[0] for d in cursor.description]
    from_duckdb = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    assert from_duckdb == sorted(expected, key=lambda r: str(r["key"]))
    assert {
        "key",
        "source.text",
        "classify.sentiment",
        "classify#status",
        "classify#reason",
        "reply.text",
        "route",
        "route#status",
    } <= set(columns)
    negatives = con.execute(f"""SELECT count(*) FROM read_parquet('{path}')
                            WHERE "classify.sentiment" = 'neg' AND "reply#status" = 'answered'
                         """).fetchone()
    assert negatives is not None and negatives[0] == sum(
        1 for r in expected if r["classify.sentiment"] == "neg"
    )


def test_jsonl_and_csv_of_the_wide_table(quickstart: Quickstart) -> None:
    root = quickstart.root
    expected = _table(root)
    lines = agac("export", "review_triage", "--all-actions", cwd=root)
    assert lines.code == 0, lines
    rows = [json.loads(x) for x in lines.out.splitlines()]
    assert [r["key"] for r in rows] == [r["key"] for r in expected]
    assert rows[0]["route"] == json.loads(str(expected[0]["route"]))  # JSON as JSON in JSONL
    table = agac("export", "review_triage", "--all-actions", "--format", "csv", cwd=root)
    got = list(csv.DictReader(io.StringIO(table.out)))
    assert [r["classify.sentiment"] for r in got] == [r["classify.sentiment"] for r in expected]
    one = agac(
        "export",
        "review_triage",
        "--action",
        "classify",
        "--include-source",
        "--format",
        "csv",
        cwd=root,
    )
    assert next(csv.reader(io.StringIO(one.out))) == [
        "key",
        "source.review_id",
        "source.text",
        "source.stars",
        "classify.sentiment",
        "classify.topic",
        "classify#status",
        "classify#reason",
    ]


def test_action_with_jsonl_or_csv_keeps_the_per_action_rows(quickstart: Quickstart) -> None:
    done = agac("export", "review_triage", "--action", "classify", cwd=quickstart.root)
    first = json.loads(done.out.splitlines()[0])
    assert list(first) == ["key", "status", "reason", "output", "tenant"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((), "--action A, or every action with --all-actions"),
        (("--action", "classify", "--all-actions"), "--all-actions"),
        (("--all-actions", "--format", "parquet"), "--out PATH"),
        (("--action", "nope", "--format", "parquet", "--out", "x.parquet"), "no action 'nope'"),
    ],
)
def test_export_refuses_what_it_cannot_do(
    quickstart: Quickstart, args: tuple[str, ...], needle: str
) -> None:
    done = agac("export", "review_triage", *args, cwd=quickstart.root)
    assert done.code == 2 and needle in done.err, done
    assert not (quickstart.root / "x.parquet").exists()


def test_a_fan_out_action_gives_lists_in_item_order(tmp_path: Path) -> None:
    assert agac("init", "ens", "--example", "ensemble", cwd=tmp_path).code == 0
    root = tmp_path / "ens"
    assert agac("run", "spam_vote", cwd=root).code == 0
    assert (
        agac(
            "export",
            "spam_vote",
            "--format",
            "parquet",
            "--all-actions",
            "--out",
            "w.parquet",
            cwd=root,
        ).code
        == 0
    )
    table = pq.read_table(root / "w.parquet")
    assert table.schema.field("vote.label").type.value_type == pa.string()
    assert table.schema.field("vote.confidence").type.value_type == pa.float64()
    assert table.schema.field("majority#status").type == pa.string()
    narrow = {r["key"]: r for r in api.export_rows("spam_vote", "vote", root)}
    for row in table.to_pylist():
        items = [narrow[f"{row['key']}/{i}"] for i in range(3)]
        assert row["vote#status"] == [i["status"] for i in items]
        assert row["vote.label"] == [(i["output"] or {}).get("label") for i in items]
