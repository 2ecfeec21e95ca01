"""Issue 23 item 2: a columnar input is read only for the ``source.X`` columns the
workflow's templates, guards, fan-outs and tool views read, plus ``id_field``; a context
observing ``source.*`` (or a tool seeing everything) reads every column. The columns read
are counted from the byte ranges pyarrow asks of the file."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agac.config.model import Action, CheckSpec, ContextSpec, FanOutSpec, InputSpec, Workflow
from agac.config.reads import TEMPLATE_FIELDS, source_columns
from agac.data.files import LocalFile
from agac.data.formats import InputFormat
from agac.data.readers import read_input

WIDE = 50


def wf(*actions: Action) -> Workflow:
    return Workflow(
        name="w", path=Path("w.yml"), source_hash="", input=InputSpec("x.parquet"), actions=actions
    )


def llm(prompt: str, **kw: Any) -> Action:
    return Action(name=kw.pop("name", "a"), prompt=prompt, model="mock/m", **kw)


def test_i23_2_the_columns_templates_guards_and_fan_outs_read() -> None:
    workflow = wf(
        llm(
            "Say {{ source.text }} {{ source.meta.lang | upper }}",
            system="{{ source.sys }}",
            when="source.stars > 2",
        ),
        llm("{{ item }}", name="b", fan_out=FanOutSpec(over="source.tags")),
        Action(
            name="t",
            kind="tool",
            function="m:f",
            context=ContextSpec(observe=("source.email", "a.text")),
        ),
        llm("Read it", name="c", attachments=("{{ source.file }}",)),
    )
    assert source_columns(workflow) == {"text", "meta", "sys", "stars", "tags", "email", "file"}


@pytest.mark.parametrize(
    "action",
    [
        llm("{{ source }}"),
        llm("{{ source[name] }}"),
        llm("{% for k, v in source.items() %}{{ k }}{% endfor %}"),
        llm("{{ source.text }}", context=ContextSpec(observe=("source.*",))),
        llm("{{ source.text }}", context=ContextSpec(observe=("source",))),
        Action(name="t", kind="tool", function="m:f"),
    ],
    ids=["whole", "dynamic", "items", "observe-star", "observe-source", "tool"],
)
def test_i23_2_reading_the_whole_record_reads_every_column(action: Action) -> None:
    assert source_columns(wf(action)) is None


def test_i23_2_every_template_field_of_an_action_is_considered() -> None:
    """A new string field on Action must be judged here: does it hold a template that
    may read ``source``? (Else projection would drop the columns it reads.)"""
    strings = {f.name for f in dataclasses.fields(Action) if "str" in str(f.type)}
    not_templates = {
        "name",
        "kind",
        "model",
        "provider",
        "model_name",
        "run_mode",
        "function",
        "gate",
        "join",
        "failure_policy",
        "schema",
        "dependencies",
        "ancestors",
        "attachments_position",
        "attachment_folders",  # folders, written in the workflow: never a template
        "auto_choice",
        "cache_mode",
        "cache_ttl",
        "context_text",
        "provider_options",  # plain values of the provider's spec, never rendered
        "reuse",  # a tool's reuse policy (by_record, by_inputs)
        "code_hash",  # a digest of a tool's code, computed, never written
        "variant",  # a variant's name: its prompt is the variant action's own prompt
        "variant_of",  # the action a variant belongs to, a name
        # a template, but one that sees no record (validation refuses it)
        "context_prefix",
    }
    assert strings - not_templates == {k for k, _ in TEMPLATE_FIELDS} | {"attachments"}


class _Reads(io.FileIO):
    """A file that remembers the byte ranges read from it."""

    ranges: list[tuple[int, int]]

    def __init__(self, path: Path) -> None:
        super().__init__(path, "rb")
        self.ranges = []

    def readinto(self, buffer: Any) -> int:
        at = self.tell()
        n = super().readinto(buffer) or 0
        self.ranges.append((at, at + n))
        return n

    def read(self, size: int = -1) -> bytes:
        at = self.tell()
        data = super().read(size)
        self.ranges.append((at, at + len(data)))
        return data


def columns_read(path: Path, columns: frozenset[str] | None, id_field: str | None) -> set[str]:
    """The parquet columns whose chunks a full read of ``path`` touched (in every row
    group but the last: reading the footer reads the file's tail speculatively)."""
    opened: list[_Reads] = []

    class Spied(LocalFile):
        def open_columnar(self) -> Any:
            opened.append(_Reads(self.path))
            return opened[-1]

    count = sum(
        1 for _ in read_input(Spied(path, InputFormat("parquet")), id_field, columns=columns)
    )
    assert count == 3000
    meta = pq.ParquetFile(path).metadata
    touched: set[str] = set()
    for g in range(meta.num_row_groups - 1):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            start = min(x for x in (chunk.dictionary_page_offset, chunk.data_page_offset) if x)
            end = start + chunk.total_compressed_size
            if any(lo < end and start < hi for f in opened for lo, hi in f.ranges):
                touched.add(chunk.path_in_schema.split(".")[0])
    return touched


@pytest.fixture
def wide(tmp_path: Path) -> Path:
    path = tmp_path / "wide.parquet"
    data = {"id": [f"r{i}" for i in range(3000)]}
    data.update(
        {f"c{j:02d}": [f"value {i} of column {j}" for i in range(3000)] for j in range(WIDE - 1)}
    )
    pq.write_table(pa.table(data), path, row_group_size=1000, compression="none")
    return path


def test_i23_2_a_wide_parquet_is_read_for_the_two_columns_a_prompt_reads(wide: Path) -> None:
    workflow = wf(llm("Compare {{ source.c03 }} with {{ source.c41 }}"))
    columns = source_columns(workflow)
    assert columns == {"c03", "c41"}
    assert columns_read(wide, columns, "id") == {"id", "c03", "c41"}
    first = next(read_input(LocalFile(wide, InputFormat("parquet")), "id", columns=columns))
    assert first.payload == {
        "id": "r0",
        "c03": "value 0 of column 3",
        "c41": "value 0 of column 41",
    }


def test_i23_2_without_projection_every_column_is_read(wide: Path) -> None:
    assert len(columns_read(wide, None, None)) == WIDE


def test_i38_a_checks_reads_of_source_are_read_from_the_input() -> None:
    """A check may read a column the prompt does not: projection must keep it, or the
    check would see it missing and fail every answer."""
    check = CheckSpec(name="lang", expr="answer.lang == source.meta.lang and source.n > 0")
    workflow = wf(llm("Say {{ source.text }}", checks=(check,)))
    assert source_columns(workflow) == {"text", "meta", "n"}
