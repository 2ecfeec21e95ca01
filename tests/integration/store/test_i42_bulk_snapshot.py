"""Issue 42 (the bulk path), the input snapshot: a columnar input is snapshotted a record
batch at a time as a bulk append, and what the store holds is exactly what the records
read one by one would have written — every key, position, line, reason, message and
payload byte — on SQLite and on PostgreSQL."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agac.config.project import find_project
from agac.config.workflow import load_workflow
from agac.data.blocks import RecordBlock
from agac.data.sources import FileSource
from agac.engine.lifecycle.snapshots import input_source, snapshot_input
from agac.jsontext import dumps
from agac.store.factory import open_store

WORKFLOW = """\
name: lake
input: {{path: '{path}'{id_field}}}
actions:
  - name: ask
    model: mock/m
    context: {{observe: [source.*]}}
    prompt: "{{{{ source.text }}}}"
"""

TEXTS = [
    "plain",
    'a "quoted" word',
    "back\\slash",
    "two\nlines\tand a tab",
    "bell \x07 and \x1f",
    "été 東京 🙂",
    "",
    None,
]


def _project(root: Path, path: str, id_field: str | None = "id") -> Any:
    (root / "agac.yml").write_text("")
    field = f", id_field: {id_field}" if id_field else ""
    (root / "wf.yml").write_text(WORKFLOW.format(path=path, id_field=field))
    project = find_project(root)
    return project, load_workflow("wf.yml", project)


def _one_by_one(workflow: Any, project: Any, limit: int | None = None) -> list[tuple[Any, ...]]:
    """The rows the records read one by one make (key, file, n, line, payload, reason,
    error), in order."""
    out = []
    source = input_source(workflow, project)
    for seq, rec in enumerate(source.records(workflow.input.id_field)):
        if limit is not None and seq >= limit:
            break
        payload = None if rec.payload is None else dumps(rec.payload)
        out.append((seq, rec.key, rec.file, rec.n, rec.line, payload, rec.reason, rec.error))
    return out


def _stored(store: Any, snapshot_id: str) -> list[tuple[Any, ...]]:
    return [
        (r.seq, r.key, r.file, r.n, r.line, r.payload, r.reason, r.error)
        for r in store.iter_records(snapshot_id)
    ]


def _blocks(workflow: Any, project: Any) -> int:
    source = input_source(workflow, project)
    assert isinstance(source, FileSource)
    return sum(isinstance(i, RecordBlock) for i in source.blocks(workflow.input.id_field))


def _wide(n: int, start: int = 0) -> pa.Table:
    rows = range(start, start + n)
    return pa.table(
        {
            "id": [f"r{i:04d}" for i in rows],
            "text": [TEXTS[i % len(TEXTS)] for i in rows],
            "count": pa.array([None if i % 5 == 0 else i * 7919 - 10**12 for i in rows]),
            "small": pa.array([i % 100 for i in rows], pa.uint8()),
            "flag": pa.array([None if i % 4 == 0 else i % 2 == 0 for i in rows]),
            "ratio": [float("nan") if i % 6 == 0 else i / 3 for i in rows],
            "at": pa.array(
                [dt.datetime(2026, 12, 1, 10, 0, i % 60) for i in rows], pa.timestamp("ms")
            ),
            "price": pa.array([decimal.Decimal(f"{i}.50") for i in rows], pa.decimal128(10, 2)),
            "meta": [{"lang": "en", "tags": ["x", str(i)]} for i in rows],
            "blob": [bytes([i % 256, 0, 255]) for i in rows],
            "kind": pa.array([["a", "b", "c"][i % 3] for i in rows]).dictionary_encode(),
            "attrs": pa.array([[("k", i)] for i in rows], pa.map_(pa.string(), pa.int64())),
            "nothing": pa.nulls(n),
        }
    )


@pytest.mark.parametrize("ids", ["text", "integer", "none"])
def test_i42_the_bulk_snapshot_holds_byte_for_byte_the_records_read_one_by_one(
    store_url: str, tmp_path: Path, ids: str
) -> None:
    (tmp_path / "lake").mkdir()
    first, second = _wide(40), _wide(25, start=40)
    if ids == "integer":
        first = first.set_column(0, "id", pa.array(range(40), pa.int64()))
        second = second.set_column(0, "id", pa.array(range(1000, 1025), pa.int32()))
    pq.write_table(first, tmp_path / "lake" / "a.parquet", row_group_size=16)
    pq.write_table(second, tmp_path / "lake" / "b.parquet", row_group_size=10)
    project, workflow = _project(tmp_path, "lake/", None if ids == "none" else "id")
    assert _blocks(workflow, project) == 3 + 3  # every row group became a block
    store = open_store(store_url)
    snap = snapshot_input(workflow, project, store, tenant="default")
    assert snap.count == 65
    assert _stored(store, snap.id) == _one_by_one(workflow, project)
    assert snap.files == [
        {"file": "a.parquet", "start": 0, "count": 40},
        {"file": "b.parquet", "start": 40, "count": 25},
    ]
    payload = json.loads(store.find_record(snap.id, _stored(store, snap.id)[3][1]).payload)
    assert payload["text"] == TEXTS[3]
    store.close()


def test_i42_rows_a_block_cannot_hold_are_read_one_by_one_among_blocks(
    store_url: str, tmp_path: Path
) -> None:
    """A batch with a missing or empty id is read record by record (those records are
    invalid, keyed by position); the batches around it stay blocks."""
    table = _wide(30)
    ids = table.column("id").to_pylist()
    ids[12], ids[13] = None, ""
    pq.write_table(
        table.set_column(0, "id", pa.array(ids)), tmp_path / "a.parquet", row_group_size=10
    )
    project, workflow = _project(tmp_path, "a.parquet")
    assert _blocks(workflow, project) == 2
    store = open_store(store_url)
    snap = snapshot_input(workflow, project, store, tenant="default")
    stored = _stored(store, snap.id)
    assert stored == _one_by_one(workflow, project)
    assert [r[6] for r in stored[12:14]] == ["invalid_input", "invalid_input"]
    store.close()


def test_i42_a_key_repeated_across_blocks_is_marked_as_one_by_one(
    store_url: str, tmp_path: Path
) -> None:
    """Blocks' keys are checked once stored: a repeated id (across files, and an id that
    is another record's positional key) is written as the reader marks it one by one."""
    (tmp_path / "lake").mkdir()
    a = _wide(20)
    b = _wide(20, start=10)  # r0010..r0019 again
    b = b.set_column(0, "id", pa.array([*b.column("id").to_pylist()[:19], "a.parquet:3"]))
    pq.write_table(a, tmp_path / "lake" / "a.parquet", row_group_size=8)
    pq.write_table(b, tmp_path / "lake" / "b.parquet", row_group_size=8)
    project, workflow = _project(tmp_path, "lake/")
    store = open_store(store_url)
    snap = snapshot_input(workflow, project, store, tenant="default")
    stored = _stored(store, snap.id)
    assert stored == _one_by_one(workflow, project)
    assert sum(r[6] == "duplicate_key" for r in stored) == 10
    assert len({r[1] for r in stored}) == 40
    assert snap.files == [
        {"file": "a.parquet", "start": 0, "count": 20},
        {"file": "b.parquet", "start": 20, "count": 20},
    ]
    store.close()


def test_i42_a_limit_cuts_a_block_where_it_falls(store_url: str, tmp_path: Path) -> None:
    (tmp_path / "mix").mkdir()
    (tmp_path / "mix" / "in.jsonl").write_text(
        "".join(json.dumps({"id": f"j{i}", "text": f"line {i}"}) + "\n" for i in range(3))
    )
    pq.write_table(_wide(500), tmp_path / "mix" / "on.parquet", row_group_size=430)
    project, workflow = _project(tmp_path, "mix/")
    store = open_store(store_url)
    snap = snapshot_input(workflow, project, store, limit=420, tenant="default")
    assert snap.count == 420
    assert _stored(store, snap.id) == _one_by_one(workflow, project, limit=420)
    assert snap.files == [
        {"file": "in.jsonl", "start": 0, "count": 3},
        {"file": "on.parquet", "start": 3, "count": 417},
    ]
    store.close()
