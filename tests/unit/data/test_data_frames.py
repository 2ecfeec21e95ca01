"""Records given in memory (docs/python.md): dicts, pandas, polars and Arrow, through the same
rules — NaN -> null, timestamps ISO-8601, bytes refused ``invalid_input``."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from agac.data.frames import json_records, spool_records
from agac.errors import ConfigError

UTC = dt.UTC
WHEN = dt.datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
EXPECTED = [
    {"id": 1, "text": "good", "score": 0.5, "at": "2026-03-01T12:30:00+00:00", "day": "2026-03-01"},
    {"id": 2, "text": None, "score": None, "at": None, "day": "2026-03-02"},
]


def _pandas() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [1, 2],
            "text": ["good", None],
            "score": [0.5, float("nan")],
            "at": [pd.Timestamp(WHEN), pd.NaT],
            "day": [dt.date(2026, 3, 1), dt.date(2026, 3, 2)],
        }
    )


def test_pandas_nan_and_nat_are_null_and_timestamps_iso() -> None:
    assert list(json_records(_pandas())) == EXPECTED


def test_polars_and_arrow_give_the_same_records() -> None:
    frame = pl.DataFrame(
        {
            "id": [1, 2],
            "text": ["good", None],
            "score": [0.5, float("nan")],
            "at": [WHEN, None],
            "day": [dt.date(2026, 3, 1), dt.date(2026, 3, 2)],
        }
    )
    assert list(json_records(frame)) == EXPECTED
    assert list(json_records(frame.lazy())) == EXPECTED
    table = frame.to_arrow()
    assert list(json_records(table)) == EXPECTED
    assert list(json_records(table.to_batches()[0])) == EXPECTED
    assert (
        list(json_records(pa.RecordBatchReader.from_batches(table.schema, table.to_batches())))
        == EXPECTED
    )


def test_dicts_follow_the_same_rules() -> None:
    rows = [
        {"id": 1, "text": "good", "score": 0.5, "at": WHEN, "day": dt.date(2026, 3, 1)},
        {"id": 2, "text": None, "score": math.nan, "at": None, "day": dt.date(2026, 3, 2)},
    ]
    assert list(json_records(iter(rows))) == EXPECTED
    assert list(
        json_records(
            [
                {
                    "d": Decimal("1.5"),
                    "t": (1, 2),
                    "w": dt.timedelta(minutes=1),
                    "inf": math.inf,
                    "nested": {"x": [math.nan]},
                }
            ]
        )
    ) == [{"d": 1.5, "t": [1, 2], "w": 60.0, "inf": None, "nested": {"x": [None]}}]


def test_nested_arrow_values_and_numpy_scalars() -> None:
    frame = pd.DataFrame({"tags": [["a", "b"], []], "meta": [{"k": 1}, {"k": 2}]})
    assert list(json_records(frame)) == [
        {"tags": ["a", "b"], "meta": {"k": 1}},
        {"tags": [], "meta": {"k": 2}},
    ]
    # to_dict gives numpy scalars: read as plain values.
    assert list(json_records(pd.DataFrame({"n": [1, 2]}).to_dict("records"))) == [
        {"n": 1},
        {"n": 2},
    ]


def test_a_pandas_object_column_of_mixed_types_is_read_row_by_row() -> None:
    frame = pd.DataFrame({"v": [1, "two", None, float("nan")]}, dtype=object)
    assert list(json_records(frame)) == [{"v": 1}, {"v": "two"}, {"v": None}, {"v": None}]


@pytest.mark.parametrize(
    "records",
    [
        pd.DataFrame({"blob": [b"\x00\x01"]}),
        pl.DataFrame({"blob": [b"\x00\x01"]}),
        pa.table({"blob": pa.array([b"x"], pa.binary())}),
        pa.table({"nested": pa.array([[b"x"]], pa.list_(pa.large_binary()))}),
    ],
)
def test_a_bytes_column_is_refused_naming_it(records) -> None:
    with pytest.raises(ConfigError) as caught:
        list(json_records(records))
    problem = caught.value.problems[0]
    assert problem.code == "invalid_input"
    assert problem.path in ("blob", "nested")
    assert "base64" in (problem.hint or "")


def test_bytes_in_a_dict_are_refused_naming_record_and_field() -> None:
    with pytest.raises(ConfigError) as caught:
        list(json_records([{"a": 1}, {"a": 2, "raw": b"x"}]))
    problem = caught.value.problems[0]
    assert (problem.code, problem.file, problem.line, problem.path) == (
        "invalid_input",
        "records",
        2,
        "raw",
    )
    assert "records:2" in problem.message


@pytest.mark.parametrize("records", [{"a": 1}, "a.jsonl", 42, pd.Series([1])])
def test_what_is_not_a_set_of_records_is_refused(records) -> None:
    with pytest.raises(ConfigError) as caught:
        list(json_records(records))
    assert caught.value.problems[0].code == "invalid_input"


def test_elements_that_are_not_objects_pass_through_to_become_invalid_records() -> None:
    assert list(json_records([{"a": 1}, "text", [1]])) == [{"a": 1}, "text", [1]]


def test_spool_writes_json_lines_and_hashes_them(tmp_path: Path) -> None:
    first = spool_records(_pandas(), tmp_path)
    again = spool_records(EXPECTED, tmp_path)
    other = spool_records(EXPECTED[:1], tmp_path)
    assert first.count == 2 and first.path.parent == tmp_path
    assert [json.loads(x) for x in first.path.read_text(encoding="utf-8").splitlines()] == EXPECTED
    assert first.digest == again.digest != other.digest
    first.remove()
    assert not first.path.exists()


def test_a_refused_spool_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        spool_records([{"a": 1}, {"b": b"x"}], tmp_path)
    assert list(tmp_path.iterdir()) == []
