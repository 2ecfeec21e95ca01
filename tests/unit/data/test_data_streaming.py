"""Readers stream: a large input file is read in bounded memory (docs/guarantees.md, The store)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from agac.data.readers import iter_input

PEAK_LIMIT = 20 * 1024 * 1024


def _fill(path: Path, size: int, line: bytes) -> int:
    count = 0
    with path.open("wb") as out:
        while out.tell() < size:
            out.write(line % count)
            count += 1
    return count


def _peak_while_reading(path: Path, id_field: str | None) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = sum(1 for record in iter_input([path], id_field) if record.ok)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


@pytest.mark.slow
def test_a_50_mb_jsonl_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    pad = "x" * 900
    written = _fill(path, 50 << 20, b'{"id": %d, "text": "' + pad.encode() + b'"}\n')
    # The duplicate-key set holds every key (short strings); records are not held.
    for id_field in (None, "id"):
        count, peak = _peak_while_reading(path, id_field)
        assert count == written
        assert peak < PEAK_LIMIT, f"peak {peak / 1e6:.1f} MB reading a 50 MB file"


@pytest.mark.slow
def test_a_large_json_array_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    item = json.dumps({"text": "y" * 900})
    with path.open("w") as out:
        out.write("[")
        for i in range(20_000):
            out.write(("," if i else "") + item)
        out.write("]")
    count, peak = _peak_while_reading(path, None)
    assert count == 20_000
    assert peak < PEAK_LIMIT // 2, f"peak {peak / 1e6:.1f} MB"
