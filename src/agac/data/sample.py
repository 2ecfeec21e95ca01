"""The first records of a workflow's input, read before a run to catch mistakes early.

``agac validate`` reads a sample (the first N records across the input files, in
order) to check ``id_field`` and the ``source`` fields templates read; it also looks at
every input file for one record, so a file with none is reported instead of adding
nothing to a run without a word.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from agac.data.files import InputFile
from agac.data.readers import InputRecord, read_input

__all__ = ["InputSample", "sample_input"]


@dataclass(frozen=True)
class InputSample:
    """``records``: the first records with the file each comes from, in input order, valid
    or not (read without an id field, so a record missing ``id_field`` keeps its payload);
    ``empty_files``: the input files that hold no record at all."""

    records: tuple[tuple[InputFile, InputRecord], ...]
    empty_files: tuple[InputFile, ...]


def sample_input(files: Sequence[InputFile], limit: int) -> InputSample:
    """The first ``limit`` records of ``files`` and the files without any record.

    Reads at most ``limit`` records in all, plus one record of each later file. Raises
    ``OSError`` when a file cannot be opened.
    """
    records: list[tuple[InputFile, InputRecord]] = []
    empty: list[InputFile] = []
    for path in files:
        want = max(limit - len(records), 1)
        reader = read_input(path, None)
        try:
            taken = list(itertools.islice(reader, want))
        finally:
            if isinstance(reader, Generator):
                reader.close()  # closes the file now, not when the generator is collected
        if not taken:
            empty.append(path)
        records.extend((path, r) for r in taken[: max(limit - len(records), 0)])
    return InputSample(tuple(records), tuple(empty))
