"""Input snapshots: a run's records are copied into the store at admission (DESIGN §4),
so the run never depends on its input files staying unchanged.

A snapshot's id hashes the id field, the limit and each file's name and bytes, so
admitting a new run over unchanged input reuses the stored snapshot without
re-inserting a single row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.data.inputs import resolve_input_files
from agac.data.readers import file_fingerprint, iter_input
from agac.store.repository import dumps, loads

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.store.repository import Store

__all__ = ["InputSnapshot", "current_snapshot_id", "snapshot_input"]


class InputSnapshot:
    """A stored input snapshot; ``empty_files`` names the input files that gave it no
    record (reported at admission, never silently nothing)."""

    def __init__(self, snapshot_id: str, files: list[dict[str, Any]], count: int,
                 empty_files: tuple[str, ...] = ()) -> None:
        self.id = snapshot_id
        self.files = files
        self.count = count
        self.empty_files = empty_files


def _files(workflow: Workflow, project: Project) -> list[Path]:
    return resolve_input_files(workflow.input.path, project.root, file=project.display(workflow.path))


def current_snapshot_id(workflow: Workflow, project: Project, limit: int | None = None) -> str:
    h = hashlib.sha256()
    h.update(f"id_field={workflow.input.id_field}\x1flimit={limit}".encode())
    for path in _files(workflow, project):
        h.update(f"\x1e{path.name}\x1f{file_fingerprint(path)}".encode())
    return h.hexdigest()


def snapshot_input(
    workflow: Workflow, project: Project, store: Store, limit: int | None = None
) -> InputSnapshot:
    """The stored snapshot of the workflow's current input (written now if new)."""
    snapshot_id = current_snapshot_id(workflow, project, limit)
    paths = _files(workflow, project)
    if store.snapshot_complete(snapshot_id):
        info = store.snapshot_info(snapshot_id)
        assert info is not None
        stored = loads(info.files)
        return InputSnapshot(snapshot_id, stored, info.record_count,
                             _empty(paths, stored, info.record_count, limit, project))
    files: list[dict[str, Any]] = []
    count = store.write_snapshot(snapshot_id, files, _rows(paths, workflow, limit, files))
    return InputSnapshot(snapshot_id, files, count, _empty(paths, files, count, limit, project))


def _empty(paths: list[Path], files: list[dict[str, Any]], count: int, limit: int | None,
           project: Project) -> tuple[str, ...]:
    """The input files that gave no record (not merely cut off by ``limit``)."""
    if limit is not None and count >= limit:
        return ()
    seen = {f["file"] for f in files}
    return tuple(project.display(p) for p in paths if p.name not in seen)


def _rows(
    paths: list[Path], workflow: Workflow, limit: int | None, files: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """Snapshot rows, streaming; fills ``files`` with each file's start seq and count."""
    seq = 0
    current: dict[str, Any] | None = None
    for rec in iter_input(paths, workflow.input.id_field):
        if limit is not None and seq >= limit:
            break
        if current is None or current["file"] != rec.file:
            current = {"file": rec.file, "start": seq, "count": 0}
            files.append(current)
        current["count"] += 1
        yield {
            "seq": seq, "key": rec.key, "file": rec.file, "n": rec.n, "line": rec.line,
            "payload": None if rec.payload is None else dumps(rec.payload),
            "reason": rec.reason, "error": rec.error,
        }
        seq += 1
