"""Issue 23 item 1: parquet, Arrow IPC / Feather, Hugging Face datasets saved to disk and
compressed JSONL/CSV/JSON as inputs; ``input.format:``; the JSON form of each column type;
record keys ``id_field`` or ``<file>:<row>``."""

from __future__ import annotations

import base64
import bz2
import datetime as dt
import decimal
import gzip
import io
import json
import lzma
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from pyarrow import feather

from agac.data.files import LocalFile
from agac.data.formats import InputFormat, format_of
from agac.data.inputs import resolve_input_files
from agac.data.readers import InputRecord, read_input, read_records
from agac.errors import ConfigError

ROWS = [{"id": f"r{i}", "text": f"review {i}", "stars": i % 5} for i in range(1, 8)]


def table(rows: list[dict[str, Any]] = ROWS) -> pa.Table:
    return pa.Table.from_pylist(rows)


def records(path: Path, id_field: str | None = None, **kw: Any) -> list[InputRecord]:
    return list(read_records(path, id_field, **kw))


def payloads(path: Path, id_field: str | None = None) -> list[Any]:
    return [r.payload for r in records(path, id_field)]


def write_hf_dataset(folder: Path, shards: list[pa.Table]) -> Path:
    """The layout ``datasets.Dataset.save_to_disk`` writes: Arrow IPC *stream* shards,
    ``dataset_info.json`` and ``state.json`` listing the shards in order."""
    folder.mkdir(parents=True)
    names = [f"data-{i:05d}-of-{len(shards):05d}.arrow" for i in range(len(shards))]
    for name, shard in zip(names, shards, strict=True):
        with (
            pa.OSFile(str(folder / name), "wb") as sink,
            pa.ipc.new_stream(sink, shard.schema) as writer,
        ):
            writer.write_table(shard)
    (folder / "dataset_info.json").write_text(json.dumps({"features": {}}))
    (folder / "state.json").write_text(
        json.dumps(
            {
                "_data_files": [{"filename": n} for n in names],
                "_fingerprint": "f00",
                "_format_type": None,
                "_split": None,
            }
        )
    )
    return folder


# -- formats by extension ------------------------------------------------------------------


def test_i23_1_format_follows_the_extension_or_input_format() -> None:
    assert format_of("a.parquet") == InputFormat("parquet")
    assert format_of("A.FEATHER") == InputFormat("arrow")
    assert format_of("dump.jsonl.gz") == InputFormat("jsonl", "gzip")
    assert format_of("rows.csv.zst") == InputFormat("csv", "zstd")
    assert format_of("rows.json.bz2") == InputFormat("json", "bzip2")
    assert format_of("rows.jsonl.xz") == InputFormat("jsonl", "xz")
    assert format_of("part-0000") is None
    assert format_of("part-0000", "parquet") == InputFormat("parquet")
    assert format_of("dump.gz", "jsonl") == InputFormat("jsonl", "gzip")
    assert format_of("a.parquet.gz") is None  # columnar files compress inside


def test_i23_1_parquet_records_in_file_order_keyed_by_row(tmp_path: Path) -> None:
    path = tmp_path / "reviews.parquet"
    pq.write_table(table(), path, row_group_size=3)
    got = records(path)
    assert [r.key for r in got] == [f"reviews.parquet:{n}" for n in range(1, 8)]
    assert [r.payload for r in got] == ROWS
    assert [r.key for r in records(path, "id")] == [f"r{i}" for i in range(1, 8)]


def test_i23_1_parquet_is_read_by_row_groups_never_whole(tmp_path: Path) -> None:
    """The first record of a file of 20 row groups is read with a small part of its bytes."""
    path = tmp_path / "big.parquet"
    rows = [{"text": f"{i:06d}" * 50} for i in range(20_000)]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1000, compression="none")

    class Counting(io.FileIO):
        read_bytes = 0

        def read(self, size: int = -1) -> bytes:
            data = super().read(size)
            Counting.read_bytes += len(data)
            return data

        def readinto(self, buffer: Any) -> int:
            n = super().readinto(buffer)
            Counting.read_bytes += n or 0
            return n or 0

    class CountedFile(LocalFile):
        def open_columnar(self) -> Any:
            return Counting(self.path, "rb")

    first = next(read_input(CountedFile(path, InputFormat("parquet")), None))
    assert first.payload == rows[0]
    assert 0 < Counting.read_bytes < path.stat().st_size / 5


def test_i23_1_arrow_ipc_file_stream_and_feather(tmp_path: Path) -> None:
    file_path, stream_path, feather_path = (
        tmp_path / "a.arrow",
        tmp_path / "s.arrow",
        tmp_path / "f.feather",
    )
    with pa.OSFile(str(file_path), "wb") as sink, pa.ipc.new_file(sink, table().schema) as w:
        w.write_table(table(), max_chunksize=2)
    with pa.OSFile(str(stream_path), "wb") as sink, pa.ipc.new_stream(sink, table().schema) as w:
        w.write_table(table(), max_chunksize=3)
    feather.write_feather(table(), feather_path, compression="zstd")
    for path in (file_path, stream_path, feather_path):
        assert payloads(path) == ROWS, path.name
        assert records(path)[-1].key == f"{path.name}:7"


def test_i23_1_a_hugging_face_dataset_folder_reads_its_shards_in_order(tmp_path: Path) -> None:
    folder = write_hf_dataset(tmp_path / "ds", [table(ROWS[:4]), table(ROWS[4:])])
    files = resolve_input_files("ds", tmp_path)
    assert [p.name for p in files] == ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    got = [r for p in files for r in records(p)]
    assert [r.payload for r in got] == ROWS
    assert got[4].key == "data-00001-of-00002.arrow:1"
    assert "state.json" not in {p.name for p in files} and folder.is_dir()


def test_i23_1_a_dataset_dict_folder_names_its_splits(tmp_path: Path) -> None:
    write_hf_dataset(tmp_path / "dd" / "train", [table()])
    (tmp_path / "dd" / "dataset_dict.json").write_text('{"splits": ["train", "test"]}')
    with pytest.raises(ConfigError) as caught:
        resolve_input_files("dd", tmp_path)
    problem = caught.value.problems[0]
    assert problem.code == "unsupported_input"
    assert "dd/train" in (problem.hint or "")


@pytest.mark.parametrize(
    "suffix, compress",
    [
        (".gz", gzip.compress),
        (".zst", zstandard.ZstdCompressor().compress),
        (".bz2", bz2.compress),
        (".xz", lzma.compress),
    ],
)
@pytest.mark.parametrize("kind", ["jsonl", "csv", "json"])
def test_i23_1_compressed_row_formats(
    tmp_path: Path, kind: str, suffix: str, compress: Any
) -> None:
    text = {
        "jsonl": "".join(json.dumps(r) + "\n" for r in ROWS),
        "json": json.dumps(ROWS),
        "csv": "id,text,stars\n" + "".join(f"{r['id']},{r['text']},{r['stars']}\n" for r in ROWS),
    }[kind]
    path = tmp_path / f"rows.{kind}{suffix}"
    path.write_bytes(compress(text.encode()))
    got = records(path, "id")
    assert [r.key for r in got] == [r["id"] for r in ROWS]
    expected = ROWS if kind != "csv" else [{k: str(v) for k, v in r.items()} for r in ROWS]
    assert [r.payload for r in got] == expected
    assert got[0].file == path.name


def test_i23_1_a_cut_off_gzip_fails_one_record_naming_the_file(tmp_path: Path) -> None:
    lines = [json.dumps({"n": i, "hex": os.urandom(64).hex()}) + "\n" for i in range(5000)]
    data = gzip.compress("".join(lines).encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    got = records(path)
    assert all(r.ok for r in got[:-1]) and len(got) > 1
    assert got[-1].reason == "invalid_input"
    assert "cut.jsonl.gz" in str(got[-1].error) and "gzip stream" in str(got[-1].error)


def test_i23_1_input_format_reads_files_without_the_extension(tmp_path: Path) -> None:
    out = tmp_path / "job"
    out.mkdir()
    pq.write_table(table(ROWS[:3]), out / "part-0000")
    pq.write_table(table(ROWS[3:]), out / "part-0001")
    (out / "_SUCCESS").write_text("")
    (out / ".part-0000.crc").write_text("x")
    files = resolve_input_files("job", tmp_path, format="parquet")
    assert [p.name for p in files] == ["part-0000", "part-0001"]
    fmt = format_of("part-0000", "parquet")
    assert fmt is not None
    got = [r.payload for p in files for r in read_input(LocalFile(p, fmt), None)]
    assert got == ROWS


# -- what each column type becomes ----------------------------------------------------------


def test_i23_1_nested_timestamp_decimal_binary_columns_have_documented_json_forms(
    tmp_path: Path,
) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("at", pa.timestamp("us")),
            ("at_utc", pa.timestamp("ms", tz="UTC")),
            ("day", pa.date32()),
            ("price", pa.decimal128(10, 2)),
            ("blob", pa.binary()),
            ("took", pa.duration("ms")),
            ("score", pa.float64()),
            ("author", pa.struct([("name", pa.string()), ("tags", pa.list_(pa.string()))])),
            ("attrs", pa.map_(pa.string(), pa.int64())),
            ("label", pa.dictionary(pa.int8(), pa.string())),
        ]
    )
    rows = [
        {
            "id": 1,
            "at": dt.datetime(2026, 12, 1, 10, 0, 0, 123456),
            "at_utc": dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC),
            "day": dt.date(2026, 12, 1),
            "price": decimal.Decimal("12.50"),
            "blob": b"\x00hi",
            "took": dt.timedelta(seconds=1.5),
            "score": float("nan"),
            "author": {"name": "Ann", "tags": ["a", "b"]},
            "attrs": [("x", 1)],
            "label": "pos",
        },
        dict.fromkeys(schema.names),
    ]
    rows[1]["id"] = 2
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    first, second = payloads(path)
    assert first == {
        "id": 1,
        "at": "2026-12-01T10:00:00.123456",
        "at_utc": "2026-12-01T10:00:00.000+00:00",
        "day": "2026-12-01",
        "price": "12.50",
        "blob": base64.b64encode(b"\x00hi").decode(),
        "took": 1.5,
        "score": None,
        "author": {"name": "Ann", "tags": ["a", "b"]},
        "attrs": {"x": 1},
        "label": "pos",
    }
    assert second == {**dict.fromkeys(schema.names), "id": 2}


def test_i23_1_a_column_without_a_json_form_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "odd.arrow"
    t = pa.table(
        {"id": [1], "span": pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval())}
    )
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    with pytest.raises(ConfigError) as caught:
        records(path)
    problem = caught.value.problems[0]
    assert problem.code == "unsupported_column"
    assert "'span'" in problem.message and "odd.arrow" in problem.message
    # Left out of what is read, the file reads.
    only_id = list(
        read_input(LocalFile(path, InputFormat("arrow")), None, columns=frozenset({"id"}))
    )
    assert [r.payload for r in only_id] == [{"id": 1}]


def test_i23_1_a_damaged_parquet_footer_is_one_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    pq.write_table(table(), path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ConfigError) as caught:
        records(path)
    problem = caught.value.problems[0]
    assert problem.code == "input_unreadable"
    assert "broken.parquet" in problem.message and "footer" in (problem.hint or "")


def test_i23_1_id_field_missing_in_a_row_falls_back_to_its_position(tmp_path: Path) -> None:
    path = tmp_path / "ids.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "a", "t": "x"}, {"id": None, "t": "y"}]), path)
    first, second = records(path, "id")
    assert first.key == "a" and first.ok
    assert second.key == "ids.parquet:2" and second.reason == "invalid_input"
    assert "ids.parquet row 2" in str(second.error)
