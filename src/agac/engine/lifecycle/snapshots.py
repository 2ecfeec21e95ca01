"""Input snapshots: a run's records are copied into the store at admission (docs/guarantees.md, The store),
so the run never depends on its input files staying unchanged. The files the records
attach are not copied: each one's hash and size are recorded (``snapshot_attachments``),
and a file found different when its request is made fails that unit
(``attachment_changed``).

Records come from a :class:`~agac.data.sources.RecordSource`: the files ``input.path``
names (a columnar file read only for the fields the workflow reads, plus ``id_field``:
:func:`agac.config.reads.source_columns`), or records given in memory
(``agac.run(records=…)``, docs/python.md). A snapshot's id
hashes the id field, the limit and the source's identity (each file's name and bytes,
or the records' digest), so admitting a new run over unchanged input reuses the stored
snapshot without re-inserting a single row. A tenant's snapshots are its own (T2): for a
tenant other than ``default`` the tenant enters the hash too (``default``'s ids are those
of stores made before tenants, so its open runs continue), so no tenant finds, by timing
or otherwise, that another one snapshotted the same input.

The id is the hash's first 128 bits in URL-safe base64 (22 characters): every record row
holds it in its key and in the key index, so a shorter one makes a snapshot of many small
records markedly smaller to write. A run admitted before holds the 64-hex-digit form of
the same hash; it is compared in that form (:func:`current_snapshot_id` ``like=``).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateSyntaxError

from agac.config.reads import source_columns
from agac.config.source import load_located
from agac.confinement import Confinement
from agac.data.blocks import RecordBlock
from agac.data.inputs import resolve_input_files
from agac.data.objects import list_objects
from agac.data.sources import FileSource, ObjectSource, RecordSource
from agac.engine.actions import provider_limits
from agac.errors import AttachmentError, ConfigError, UsageError
from agac.jsontext import dumps, loads
from agac.media import Destination
from agac.objectstores import is_cloud_url
from agac.prompt.attachments import compile_attachments, render_references, resolve
from agac.prompt.references import template_references
from agac.prompt.render import RenderError
from agac.store.rows import RecordRow, RecordSpan
from agac.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    from agac.config.model import Action, Workflow
    from agac.config.project import Project
    from agac.data.records import InputRecord
    from agac.media import Attachment
    from agac.store.repository import Store

__all__ = [
    "InputSnapshot",
    "admitted_attachments",
    "attachment_actions",
    "current_snapshot_id",
    "input_changes",
    "input_source",
    "snapshot_input",
]


class InputSnapshot:
    """A stored input snapshot; ``empty_files`` names the input files that gave it no
    record (reported at admission, never silently nothing)."""

    def __init__(
        self,
        snapshot_id: str,
        files: list[dict[str, Any]],
        count: int,
        empty_files: tuple[str, ...] = (),
    ) -> None:
        self.id = snapshot_id
        self.files = files
        self.count = count
        self.empty_files = empty_files


def input_source(
    workflow: Workflow,
    project: Project,
    given: RecordSource | None = None,
) -> RecordSource:
    """The records a run of ``workflow`` reads: ``given``, else the files of ``input.path``.
    A workflow whose records are given in memory has no files: UsageError without them."""
    if given is not None:
        return given
    if workflow.input.records:
        raise UsageError(
            f"{workflow.name} reads records given in memory, and none were given; "
            f"call agac.run({workflow.name!r}, records=...) with them, or set "
            "input.path in the workflow file"
        )
    spec = workflow.input
    try:
        if is_cloud_url(spec.path):
            options = project.config.object_options if project.config else {}
            bucket, entries = list_objects(spec.path, options, spec.format)
            return ObjectSource(
                bucket, tuple(entries), spec.path, spec.format, source_columns(workflow)
            )
        paths = resolve_input_files(spec.path, project.root, format=spec.format)
    except ConfigError as exc:
        raise _at_input_path(exc, workflow, project) from exc
    return FileSource(paths, spec.path, spec.format, source_columns(workflow))


def _at_input_path(exc: ConfigError, workflow: Workflow, project: Project) -> ConfigError:
    """``exc`` with its problems that name no place put at ``input.path`` in the workflow
    file, as validation puts them (the file is read again only on this error path)."""
    file = project.display(workflow.path)
    try:
        line = load_located(workflow.path.read_text(encoding="utf-8"), file).line(("input", "path"))
    except (OSError, UnicodeDecodeError, ConfigError):
        line = 0
    return ConfigError(
        problems=[
            replace(p, file=file, line=line) if not p.file or (p.file == file and not p.line) else p
            for p in exc.problems
        ]
    )


#: The length of a snapshot id written before ids were shortened (a SHA-256 in hex).
LEGACY_ID_LENGTH = 64


def current_snapshot_id(
    workflow: Workflow,
    project: Project,
    limit: int | None = None,
    source: RecordSource | None = None,
    *,
    tenant: str,
    like: str | None = None,
    hashes: Mapping[str, str] | None = None,
) -> str:
    """The id of the snapshot of the workflow's input as it is now: the id field, the
    limit, the source's identity and — when its records attach files — each file's hash
    (``hashes``: path -> SHA-256; read from the files when not given), so that a new run
    snapshots the files as they are; in the long form when ``like`` (a stored run's
    snapshot id) is one.

    A run that continues passes the hashes it was admitted with: a file changed since
    then does not stop the run — the unit that attaches it fails ``attachment_changed``."""
    source = input_source(workflow, project, source)
    if hashes is None:
        hashes = {
            p: a.sha256 for p, a in admitted_attachments(workflow, project, source, limit).items()
        }
    h = hashlib.sha256()
    if tenant != DEFAULT_TENANT:
        h.update(f"tenant={tenant}\x1f".encode())
    h.update(f"id_field={workflow.input.id_field}\x1flimit={limit}".encode())
    h.update(source.identity().encode())
    if hashes:
        h.update(b"\x1fattachments=")
        for path in sorted(hashes):
            h.update(f"{path}\x1e{hashes[path]}\x1e".encode())
    if like is not None and len(like) == LEGACY_ID_LENGTH:
        return h.hexdigest()
    return base64.urlsafe_b64encode(h.digest()[:16]).rstrip(b"=").decode("ascii")


def attachment_actions(workflow: Workflow) -> list[Action]:
    """The llm actions whose ``attachments:`` read only the record (``source``): their
    files are known at admission, and snapshotted then."""
    out = []
    for a in workflow.actions:
        if a.kind != "llm" or not a.attachments:
            continue
        try:
            roots = {ref[0] for t in a.attachments for ref in template_references(t)}
        except TemplateSyntaxError:  # pragma: no cover - validation refused it
            continue
        if roots <= {"source"}:
            out.append(a)
    return out


def admitted_attachments(
    workflow: Workflow, project: Project, source: RecordSource, limit: int | None
) -> dict[str, Attachment]:
    """path -> the attachment it is now, for every file the records attach through an
    action of :func:`attachment_actions`. A file that cannot be read is left out: its
    unit fails with the reason when it renders."""
    actions = attachment_actions(workflow)
    if not actions:
        return {}
    compiled = [compile_attachments(a.attachments, a.name) for a in actions]
    reaches = [Confinement.of(project.root, a.attachment_folders) for a in actions]
    sent_to = [Destination(a.provider or "", provider_limits(a.provider or "")) for a in actions]
    found: dict[str, Attachment] = {}
    for seq, rec in enumerate(source.records(workflow.input.id_field)):
        if limit is not None and seq >= limit:
            break
        if rec.payload is None or rec.reason is not None:
            continue
        view = {"source": rec.payload}
        for templates, reach, destination in zip(compiled, reaches, sent_to, strict=True):
            try:
                refs = render_references(templates, view)
            except RenderError:
                continue
            for ref in refs:
                try:
                    att = resolve(ref, reach, destination)
                except AttachmentError:
                    continue
                found[att.path] = att
    return found


def snapshot_input(
    workflow: Workflow,
    project: Project,
    store: Store,
    limit: int | None = None,
    source: RecordSource | None = None,
    *,
    tenant: str,
) -> InputSnapshot:
    """The stored snapshot of the workflow's current input in ``tenant`` (written now if new)."""
    source = input_source(workflow, project, source)
    attachments = admitted_attachments(workflow, project, source, limit)
    snapshot_id = current_snapshot_id(
        workflow,
        project,
        limit,
        source,
        tenant=tenant,
        hashes={p: a.sha256 for p, a in attachments.items()},
    )
    if store.snapshot_complete(snapshot_id):
        info = store.snapshot_info(snapshot_id)
        assert info is not None
        stored = loads(info.files)
        return InputSnapshot(
            snapshot_id,
            stored,
            info.record_count,
            _empty(source, stored, info.record_count, limit, project),
        )
    if isinstance(source, FileSource | ObjectSource):
        source.check(workflow.input.id_field)  # a damaged footer refuses the run before a row
    files: list[dict[str, Any]] = []

    def one_by_one() -> Iterator[RecordRow]:
        files.clear()
        return _rows(source, workflow, limit, files, snapshot_id)

    count = store.write_snapshot(
        snapshot_id,
        files,
        _spans(source, workflow, limit, files, snapshot_id),
        [(a.path, a.sha256, a.size, a.media_type) for a in attachments.values()],
        one_by_one,
    )
    return InputSnapshot(snapshot_id, files, count, _empty(source, files, count, limit, project))


def _empty(
    source: RecordSource,
    files: list[dict[str, Any]],
    count: int,
    limit: int | None,
    project: Project,
) -> tuple[str, ...]:
    """The input files that gave no record (not merely cut off by ``limit``); records
    given in memory that were none at all."""
    if limit is not None and count >= limit:
        return ()
    seen = {f["file"] for f in files}
    if isinstance(source, FileSource):
        return tuple(project.display(p) for p in source.paths if p.name not in seen)
    if isinstance(source, ObjectSource):
        return tuple(e.url for e in source.entries if e.name not in seen)
    return () if seen else (source.label,)


def _rows(
    source: RecordSource,
    workflow: Workflow,
    limit: int | None,
    files: list[dict[str, Any]],
    snapshot_id: str,
) -> Iterator[RecordRow]:
    """Snapshot rows, streaming; fills ``files`` with each file's start seq and count (and,
    for an object, the URL, ETag, version and size it was read at)."""
    current: dict[str, Any] | None = None
    facts = source.facts() if isinstance(source, ObjectSource) else {}
    for seq, rec in enumerate(source.records(workflow.input.id_field)):
        if limit is not None and seq >= limit:
            break
        if current is None or current["file"] != rec.file:
            current = {"file": rec.file, "start": seq, "count": 0, **facts.get(rec.file, {})}
            files.append(current)
        current["count"] += 1
        yield _row(snapshot_id, seq, rec)


def _spans(
    source: RecordSource,
    workflow: Workflow,
    limit: int | None,
    files: list[dict[str, Any]],
    snapshot_id: str,
) -> Iterator[RecordRow | RecordSpan]:
    """:func:`_rows`, a columnar batch at a time as a :class:`RecordSpan` (bulk append)
    where the reader gives it as a block; records given in memory one by one."""
    if not isinstance(source, FileSource | ObjectSource):
        yield from _rows(source, workflow, limit, files, snapshot_id)
        return
    current: dict[str, Any] | None = None
    facts = source.facts() if isinstance(source, ObjectSource) else {}
    seq = 0
    for item in source.blocks(workflow.input.id_field):
        if limit is not None and seq >= limit:
            break
        size = len(item) if isinstance(item, RecordBlock) else 1
        if limit is not None and seq + size > limit:
            assert isinstance(item, RecordBlock)
            item, size = item.head(limit - seq), limit - seq
        if current is None or current["file"] != item.file:
            current = {"file": item.file, "start": seq, "count": 0, **facts.get(item.file, {})}
            files.append(current)
        current["count"] += size
        if isinstance(item, RecordBlock):
            yield RecordSpan(seq, item.file, item.first, item.keys, item.payloads, item.ascending)
        else:
            yield _row(snapshot_id, seq, item)
        seq += size


def _row(snapshot_id: str, seq: int, rec: InputRecord) -> RecordRow:
    return RecordRow(
        snapshot_id,
        seq,
        rec.key,
        rec.file,
        rec.n,
        rec.line,
        None if rec.payload is None else dumps(rec.payload),
        rec.reason,
        rec.error,
    )


def input_changes(store: Store, snapshot_id: str, source: RecordSource) -> list[str]:
    """How an object input differs from what the stored snapshot ``snapshot_id`` read,
    one phrase per object (empty for other inputs, or when nothing differs)."""
    if not isinstance(source, ObjectSource):
        return []
    info = store.snapshot_info(snapshot_id)
    return source.changes(loads(info.files)) if info is not None else []
