"""Arrow, pandas and polars at agac's edges (docs/python.md): the wide results table as Arrow
record batches, and the optional libraries imported on first use.

pyarrow, pandas and polars are the ``data`` extra (``pip install -e '.[data]'`` in a clone); the core
install never imports them. A missing one is a :class:`~agac.errors.UsageError` naming
the extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agac.data.columns import ColumnType, ListOf, Scalar, StructOf
from agac.errors import UsageError
from agac.installing import install_hint

if TYPE_CHECKING:
    import pyarrow as pa

    from agac.data.results import ResultTable

__all__ = ["JSON_METADATA", "arrow_schema", "arrow_type", "record_batch", "require"]

JSON_METADATA = {b"agac.type": b"json"}
"""Field metadata of a column holding JSON text (an untyped field)."""

_WHY = {
    "pyarrow": "Arrow tables and parquet",
    "pandas": "pandas DataFrames",
    "polars": "polars DataFrames",
}


def require(module: str) -> Any:
    """Import ``module`` (pyarrow, pandas, polars, or a submodule such as
    ``pyarrow.parquet``); UsageError naming ``agac[data]`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.partition(".")[0]
        raise UsageError(
            f"{top} is not installed; {_WHY.get(top, top)} need the data extra: "
            + install_hint("data")
        ) from exc


def arrow_type(kind: ColumnType) -> pa.DataType:
    pa = require("pyarrow")
    if isinstance(kind, Scalar):
        return {
            "string": pa.string(),
            "json": pa.string(),
            "int64": pa.int64(),
            "float64": pa.float64(),
            "bool": pa.bool_(),
        }[kind.name]
    if isinstance(kind, ListOf):
        return pa.list_(_field("item", kind.item))
    assert isinstance(kind, StructOf)
    return pa.struct([_field(name, sub) for name, sub in kind.fields])


def _field(name: str, kind: ColumnType) -> pa.Field:
    pa = require("pyarrow")
    metadata = JSON_METADATA if kind == Scalar("json") else None
    return pa.field(name, arrow_type(kind), nullable=True, metadata=metadata)


def arrow_schema(table: ResultTable) -> pa.Schema:
    """The Arrow schema of the wide table: one field per column; JSON-text columns carry
    :data:`JSON_METADATA`."""
    pa = require("pyarrow")
    return pa.schema([_field(c.name, c.type) for c in table.columns])


def record_batch(schema: pa.Schema, rows: Sequence[Sequence[Any]]) -> pa.RecordBatch:
    """``rows`` (each in column order, as :meth:`ResultTable.row` gives) as one batch."""
    pa = require("pyarrow")
    arrays = [pa.array([row[i] for row in rows], type=f.type) for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
