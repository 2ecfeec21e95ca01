"""Export writers: one row per record of an action (``agac export``, DESIGN §9).

A row is a mapping with ``key``, ``status``, ``reason`` and ``output`` (the answer's
JSON value, None when there is none), plus ``detail`` when there is something to say
(an error message). Writers stream: they hold one row at a time, so an export of any
size runs in constant memory, and they return the number of rows written.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from agac.errors import UsageError

__all__ = ["CSV_COLUMNS", "open_output", "write_csv", "write_jsonl"]

#: Column order of CSV exports.
CSV_COLUMNS: tuple[str, ...] = ("key", "status", "reason", "detail", "output")


def write_jsonl(rows: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """Write each row as one JSON object per line; ``detail`` only when present.

    Keys come in the order key, status, reason, output, detail. Non-ASCII text is
    written as is (UTF-8 files). Returns the number of rows written.
    """
    count = 0
    for row in rows:
        item: dict[str, Any] = {
            "key": row["key"],
            "status": row["status"],
            "reason": row.get("reason"),
            "output": row.get("output"),
        }
        if row.get("detail") is not None:
            item["detail"] = row["detail"]
        out.write(json.dumps(item, ensure_ascii=False))
        out.write("\n")
        count += 1
    return count


def write_csv(rows: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """Write a header of :data:`CSV_COLUMNS`, then one line per row.

    ``output`` (and a non-string ``detail``) is written as compact JSON text; a missing
    value is an empty cell. Returns the number of rows written (header excluded).
    """
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for row in rows:
        writer.writerow(
            [
                row["key"],
                row["status"],
                _cell(row.get("reason")),
                _cell(row.get("detail")),
                "" if row.get("output") is None else _compact(row["output"]),
            ]
        )
        count += 1
    return count


@contextlib.contextmanager
def open_output(path: str | None) -> Iterator[TextIO]:
    """Yield the stream an export writes to: stdout when ``path`` is None.

    A file is written to a temporary sibling and moved into place when the block
    ends without an error, so a failed export never leaves a half-written file (nor
    clobbers an earlier one). Missing parent folders are created. A ``path`` that is a
    folder is refused (UsageError) before anything is read.
    """
    if path is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{path} is a folder, not a file",
                         hint=f"name the file to write, e.g. {target / 'results.jsonl'}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # A plain exclusive open (not mkstemp) so the file gets the usual umask permissions.
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with tmp.open("x", encoding="utf-8", newline="") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _compact(value)
