"""Data layer of agac (docs/architecture.md): input files, record identity, views, exports.

- :mod:`agac.data.inputs` resolves ``input.path`` to input files;
- :mod:`agac.data.readers` streams records out of them with their keys;
- :mod:`agac.data.view` builds what a template or tool sees;
- :mod:`agac.data.results` lays out the wide results table (one row per record),
  :mod:`agac.data.columns` types its columns;
- :mod:`agac.data.export` writes export rows as JSONL, CSV or parquet;
- :mod:`agac.data.frames` turns records given in memory (dicts, DataFrames, Arrow) into JSON;
- :mod:`agac.data.arrow` holds what needs pyarrow, pandas or polars (the ``data`` extra).
"""

from __future__ import annotations

from agac.data.export import open_output, write_csv, write_jsonl
from agac.data.inputs import SUPPORTED_SUFFIXES, resolve_input_files
from agac.data.readers import (
    DUPLICATE_KEY,
    INVALID_INPUT,
    InputRecord,
    file_fingerprint,
    iter_input,
    read_records,
)
from agac.data.view import ViewSpec, build_view, compile_view

__all__ = [
    "DUPLICATE_KEY",
    "INVALID_INPUT",
    "SUPPORTED_SUFFIXES",
    "InputRecord",
    "ViewSpec",
    "build_view",
    "compile_view",
    "file_fingerprint",
    "iter_input",
    "open_output",
    "read_records",
    "resolve_input_files",
    "write_csv",
    "write_jsonl",
]
