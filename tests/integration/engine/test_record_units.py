"""Units read from the input snapshot: RecordUnit.from_rows (by position) is from_row (by name)."""

from __future__ import annotations

from pathlib import Path

from agac.engine.values import RecordUnit
from agac.store.repository import Store


def test_from_rows_equals_from_row_including_escaped_keys(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'agac.db'}")
    keys = ["a", "b/c", "50%", "d", "e/%f"]
    rows = [
        {
            "seq": i,
            "key": k,
            "file": "in.jsonl",
            "n": i + 1,
            "line": i + 1,
            "payload": None if i == 3 else f'{{"id": "{k}"}}',
            "reason": "invalid_input" if i == 3 else None,
            "error": "in.jsonl:4: not valid JSON" if i == 3 else None,
        }
        for i, k in enumerate(keys)
    ]
    store.write_snapshot("snap", [{"file": "in.jsonl", "start": 0, "count": 5}], rows)
    read = list(store.iter_records("snap"))
    units = RecordUnit.from_rows(read)
    assert units == [RecordUnit.from_row(r) for r in read]
    assert [u.key for u in units] == ["a", "b%2Fc", "50%25", "d", "e%2F%25f"]
    assert [u.raw_key for u in units] == [None, "b/c", "50%", None, "e/%f"]
    assert units[3].reason == "invalid_input" and units[3].payload is None
    assert all(type(u) is RecordUnit for u in units)
    store.close()


def test_from_rows_reads_by_name_rows_of_other_columns() -> None:
    class Row:  # a row not in the records table's column order
        _fields = ("key", "seq")

        def __init__(self, key: str, seq: int) -> None:
            self.key, self.seq, self.file, self.n, self.line = key, seq, "f", 1, 1
            self.reason = self.error = None
            self.payload = "{}"

    rows = [Row("x/y", 0), Row("z", 1)]
    assert RecordUnit.from_rows(rows) == [RecordUnit.from_row(r) for r in rows]
    assert RecordUnit.from_rows([]) == []
