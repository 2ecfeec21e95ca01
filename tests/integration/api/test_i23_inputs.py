"""Issue 23, end to end through ``agac.run`` on the offline mock provider: a workflow over
parquet, Arrow, a Hugging Face dataset folder and compressed JSONL reads its records with
their keys and JSON values, snapshots them once, and ``input.format:`` is validated."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import agac
from agac.errors import ConfigError

ROWS = [
    {
        "review_id": f"r{i}",
        "text": f"review {i}",
        "stars": i % 5 + 1,
        "meta": {"lang": "en", "tags": ["x", str(i)]},
    }
    for i in range(1, 11)
]


def workflow(path: str, **input_keys: Any) -> dict[str, Any]:
    return {
        "name": "lake",
        "input": {"path": path, **input_keys},
        "actions": [
            {
                "name": "ask",
                "model": "mock/m",
                "prompt": "Classify {{ source.text }} ({{ source.meta.lang }})",
            }
        ],
    }


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agac.yml").write_text("")
    return tmp_path


def source_rows(proj: Path) -> list[dict[str, Any]]:
    table = agac.results("lake", project=proj, include_source=True).to_arrow()
    return table.to_pylist()


def test_i23_1_a_run_over_a_parquet_folder_keys_records_by_id_field(proj: Path) -> None:
    (proj / "lake").mkdir()
    pq.write_table(pa.Table.from_pylist(ROWS[:6]), proj / "lake" / "a.parquet")
    pq.write_table(pa.Table.from_pylist(ROWS[6:]), proj / "lake" / "b.parquet")
    result = agac.run(workflow("lake/", id_field="review_id"), proj, progress=False)
    assert result.exit_code == 0, result.summary
    assert result.summary["actions"]["ask"]["answered"] == 10
    rows = source_rows(proj)
    assert [r["key"] for r in rows] == [r["review_id"] for r in ROWS]
    assert rows[0]["source.meta.lang"] == "en"


def test_i23_1_a_run_over_a_gzip_jsonl_with_input_format(proj: Path) -> None:
    (proj / "dump.gz").write_bytes(
        gzip.compress("".join(json.dumps(r) + "\n" for r in ROWS).encode())
    )
    result = agac.run(workflow("dump.gz", format="jsonl"), proj, progress=False)
    assert result.exit_code == 0, result.summary
    assert [r["key"] for r in source_rows(proj)] == [f"dump.gz:{n}" for n in range(1, 11)]


def test_i23_1_a_run_over_a_hugging_face_dataset(proj: Path) -> None:
    folder = proj / "ds"
    folder.mkdir()
    table = pa.Table.from_pylist(ROWS)
    with (
        pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    (folder / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})
    )
    result = agac.run(workflow("ds"), proj, progress=False)
    assert result.exit_code == 0, result.summary
    assert source_rows(proj)[-1]["key"] == "data-00000-of-00001.arrow:10"


def test_i23_1_an_unknown_input_format_is_a_located_error(proj: Path) -> None:
    (proj / "a.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(ConfigError) as caught:
        agac.run(workflow("a.jsonl", format="parket"), proj, progress=False)
    problem = next(
        p for p in caught.value.problems if p.path == "input.format" or "format" in p.message
    )
    assert problem.code in ("unsupported_input", "invalid_value")
    assert "parquet" in (problem.hint or problem.message)


def test_i23_2_the_snapshot_holds_only_the_columns_read_plus_id_field(proj: Path) -> None:
    wide = {"review_id": [f"r{i}" for i in range(5)]}
    wide.update({f"c{j}": [f"v{i}-{j}" for i in range(5)] for j in range(20)})
    pq.write_table(pa.table(wide), proj / "wide.parquet")
    first = {
        "name": "lake",
        "input": {"path": "wide.parquet", "id_field": "review_id"},
        "actions": [
            {
                "name": "ask",
                "model": "mock/m",
                "prompt": "{{ source.c3 }}",
                "when": "source.c7 != ''",
            }
        ],
    }
    assert agac.run(first, proj, progress=False).exit_code == 0
    columns = {k for k in source_rows(proj)[0] if k.startswith("source.")}
    assert columns == {"source.review_id", "source.c3", "source.c7"}
    # A workflow that reads another column snapshots the file again, with it.
    second = {**first, "actions": [{**first["actions"][0], "prompt": "{{ source.c12 }}"}]}
    assert agac.run(second, proj, progress=False, new=True).exit_code == 0
    columns = {k for k in source_rows(proj)[0] if k.startswith("source.")}
    assert columns == {"source.review_id", "source.c12", "source.c7"}
