"""Validation against the input itself (``agac validate``): does it exist, and do its
first records have the fields the workflow reads?

A **columnar** input (parquet, Arrow, a Hugging Face dataset) is checked by its schema —
each file's footer or header, no rows: ``id_field`` and every ``source.X`` read (and
``source.X.Y`` below a struct column) must be columns, with "did you mean" among them;
a column read whose type has no JSON form is ``unsupported_column``; a footer that
cannot be read ``input_unreadable``. An object-storage input is listed first (an empty
prefix, a bucket that does not exist, refused credentials, an endpoint that does not
answer are each one error naming the URL and the fix).

Before anything is sent, the first records of the other inputs (100 by default) are read
and checked:

- ``input_not_found`` — ``input.path`` names nothing (with "did you mean" among the
  names nearby);
- ``missing_id_field`` — no sampled record has ``id_field`` (an error naming the fields
  they have; a warning when only some lack it: those records fail ``invalid_input``);
- ``missing_source_field`` — a prompt, ``system``, guard or ``fan_out.over`` reads
  ``source.X`` and no sampled record has X, unless the template guards it (a
  ``default`` filter, ``is defined``, ``'X' in source``);
- warnings with the data file and line: ``empty_input`` (a file with no record) and
  ``invalid_input`` (a sampled record that cannot be read, e.g. a CSV quote never
  closed);
- the files the sampled records attach (:mod:`agac.config.attachments`): missing,
  unreadable or unsupported files as warnings at the record, a kind the provider cannot
  take as the error ``attachment_not_supported``.

A field missing from the sample may exist further down a large file; the message says
how many records were read, and ``agac validate --sample N`` reads more.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from jinja2 import TemplateSyntaxError

from agac.config.actions import RawAction
from agac.config.attachments import check_attachments
from agac.config.model import InputSpec
from agac.config.project import Project
from agac.config.source import Findings, did_you_mean
from agac.data.columnar import open_columnar
from agac.data.files import InputChanged, InputFile
from agac.data.inputs import input_files
from agac.data.sample import InputSample, sample_input
from agac.errors import ConfigError, Problem
from agac.prompt.references import Reference, guarded_references, template_references

__all__ = ["DEFAULT_SAMPLE", "check_input"]

DEFAULT_SAMPLE = 100
"""Records ``agac validate`` reads unless told otherwise (``--sample``)."""

_INVALID_SHOWN = 5
_TEMPLATES = (("system", False), ("prompt", False), ("when", True))


def check_input(
    f: Findings, project: Project, spec: InputSpec, raws: Sequence[RawAction], sample: int
) -> None:
    """Report the problems of the input of a workflow (see the module docstring)."""
    where = ("input", "path")
    try:
        files = input_files(
            spec.path,
            project.root,
            spec.format,
            options=project.config.object_options,
            display=project.display,
            file=f.doc.file,
            line=f.doc.line(where),
        )
    except ConfigError as exc:
        f.problems.extend(_located(f, exc.problems))
        return
    columnar = [x for x in files if x.format.columnar]
    if columnar:
        _check_schemas(f, spec, raws, columnar)
    rows = [x for x in files if not x.format.columnar]
    if rows:
        _check_sample(f, project, spec, raws, rows, sample)


def _located(f: Findings, problems: Sequence[Problem]) -> list[Problem]:
    """Problems about the input located at ``input.path`` in the workflow file."""
    line = f.doc.line(("input", "path"))
    return [
        p
        if p.file
        else Problem(p.code, p.message, f.doc.file, line, p.severity, hint=p.hint, path=p.path)
        for p in problems
    ]


def _check_sample(
    f: Findings,
    project: Project,
    spec: InputSpec,
    raws: Sequence[RawAction],
    files: Sequence[InputFile],
    sample: int,
) -> None:
    where = ("input", "path")
    try:
        got = sample_input(files, sample)
    except OSError as exc:
        f.error(
            "input_unreadable",
            f"cannot read input file {exc.filename}: {exc.strerror or exc}",
            where,
            hint="check its permissions",
        )
        return
    _report_files(f, project, got)
    payloads = [r.payload for _, r in got.records if r.payload is not None and r.ok]
    if not payloads:
        return
    if spec.id_field is not None:
        _check_id_field(f, spec.id_field, payloads)
    check_attachments(
        f, project, raws, [(Path(getattr(file, "path", file.where)), r) for file, r in got.records]
    )
    for raw in raws:
        for key, path, guarded in _source_reads(raw):
            if not guarded and not _has(payloads, path):
                _missing(f, raw, key, path, payloads)


def _report_files(f: Findings, project: Project, got: InputSample) -> None:
    for file in got.empty_files:
        f.problems.append(
            Problem(
                "empty_input",
                f"input file {_shown(project, file)} holds no records",
                _shown(project, file),
                1,
                "warning",
                hint="it adds nothing to a run; fill it or "
                "remove it (an empty CSV may have a header and no rows)",
                path="input.path",
            )
        )
    invalid = [(file, r) for file, r in got.records if not r.ok]
    for file, record in invalid[:_INVALID_SHOWN]:
        f.problems.append(
            Problem(
                "invalid_input",
                str(record.error),
                _shown(project, file),
                record.line,
                "warning",
                hint="this record fails invalid_input when the workflow runs; fix that line",
                path="input.path",
            )
        )
    if len(invalid) > _INVALID_SHOWN:
        f.warn(
            "invalid_input",
            f"{len(invalid) - _INVALID_SHOWN} more of the first "
            f"{len(got.records)} records cannot be read",
            ("input", "path"),
        )


def _shown(project: Project, file: InputFile) -> str:
    return file.where


# -- columnar inputs: the schema, not the rows ---------------------------------------------


def _check_schemas(
    f: Findings, spec: InputSpec, raws: Sequence[RawAction], files: Sequence[InputFile]
) -> None:
    """id_field and every source field read, against each columnar file's schema."""
    schemas: list[tuple[InputFile, Any]] = []
    for file in files:
        try:
            opened = open_columnar(file)
        except ConfigError as exc:
            f.problems.extend(_located(f, exc.problems))
            continue
        except InputChanged as exc:
            f.error("input_changed", str(exc), ("input", "path"), hint="validate again")
            continue
        except OSError as exc:
            f.error(
                "input_unreadable",
                f"cannot read input file {file.where}: {exc.strerror or exc}",
                ("input", "path"),
                hint="check its permissions",
            )
            continue
        schemas.append((file, opened.schema))
        opened.close()
    if not schemas:
        return
    names = list(dict.fromkeys(n for _, schema in schemas for n in schema.names))
    if spec.id_field is not None:
        lacking = [file.where for file, schema in schemas if spec.id_field not in schema.names]
        if lacking:
            f.error(
                "missing_id_field",
                f"id_field {spec.id_field!r} is not a column of "
                f"{_some(lacking)} (its columns: {_listed(names)})",
                ("input", "id_field"),
                hint=did_you_mean(spec.id_field, names)
                or "name one of its columns, or remove id_field to key records by file and row",
            )
    read: set[str] = {spec.id_field} if spec.id_field else set()
    for raw in raws:
        for key, path, guarded in _source_reads(raw):
            read.add(path[0])
            if not guarded:
                _check_column(f, raw, key, path, schemas, names)
    _check_types(f, schemas, read)


def _check_column(
    f: Findings,
    raw: RawAction,
    key: str,
    path: tuple[str, ...],
    schemas: Sequence[tuple[InputFile, Any]],
    names: list[str],
) -> None:
    dotted = ".".join(("source", *path))
    what = "guard" if key == "when" else key
    origin = raw.origin("fan_out" if key == "fan_out" else key)
    if path[0] not in names:
        f.error(
            "missing_source_field",
            f"{what} of action {raw.name!r} reads {dotted}, which "
            f"is not a column of the input (its columns: {_listed(names)})",
            origin,
            hint=did_you_mean(path[0], names) or "name one of its columns",
        )
        return
    if len(path) < 2:
        return
    kind = next(schema.field(path[0]).type for _, schema in schemas if path[0] in schema.names)
    fields = (
        [kind.field(i).name for i in range(kind.num_fields)]
        if getattr(kind, "num_fields", 0) and hasattr(kind, "get_field_index")
        else None
    )
    if fields is not None and path[1] not in fields:
        f.error(
            "missing_source_field",
            f"{what} of action {raw.name!r} reads {dotted}, but "
            f"column {path[0]!r} has no field {path[1]!r} (its fields: {_listed(fields)})",
            origin,
            hint=did_you_mean(path[1], fields) or "name one of its fields",
        )


def _check_types(f: Findings, schemas: Sequence[tuple[InputFile, Any]], read: set[str]) -> None:
    from agac.data.arrowjson import unsupported

    for file, schema in schemas:
        for name in sorted(read & set(schema.names)):
            why = unsupported(schema.field(name).type)
            if why is not None:
                f.error(
                    "unsupported_column",
                    f"{file.where}: column {name!r} is {why}, which has no JSON form",
                    ("input", "path"),
                    hint=f"leave source.{name} out "
                    "of what the workflow reads, or cast the column when the file is "
                    "written",
                )
                return


def _some(items: Sequence[str]) -> str:
    return ", ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:20])
    return shown + (f", … ({len(names)} in all)" if len(names) > 20 else "") if names else "none"


def _check_id_field(f: Findings, id_field: str, payloads: list[dict[str, Any]]) -> None:
    where = ("input", "id_field")
    lacking = sum(1 for p in payloads if p.get(id_field) in (None, ""))
    if lacking == len(payloads):
        f.error(
            "missing_id_field",
            f"id_field {id_field!r} is in none of the first "
            f"{len(payloads)} records (their fields: {_fields(payloads)})",
            where,
            hint=did_you_mean(id_field, _keys(payloads))
            or "name one of their fields, or remove id_field to key records by file and line",
        )
    elif lacking:
        f.warn(
            "missing_id_field",
            f"{lacking} of the first {len(payloads)} records have no "
            f"{id_field!r}; they will fail invalid_input",
            where,
            hint="give every record a value, or remove id_field",
        )


def _source_reads(raw: RawAction) -> Iterator[tuple[str, tuple[str, ...], bool]]:
    """(key, path under source, guarded) for every ``source.X…`` the action reads."""
    for key, expression in _TEMPLATES:
        text = raw.values.get(key)
        if not isinstance(text, str) or (key != "when" and raw.kind != "llm"):
            continue
        try:
            refs = template_references(text, expression=expression)
            guards = guarded_references(text, expression=expression)
        except TemplateSyntaxError:
            continue  # reported as invalid_template
        for ref in refs:
            path = _source_path(ref)
            if path:
                yield key, path, any(ref[: len(g)] == g for g in guards)
    fan_out = raw.values.get("fan_out")
    over = fan_out.get("over") if isinstance(fan_out, dict) else None
    if isinstance(over, str) and over.startswith("source."):
        yield "fan_out", tuple(over.split(".")[1:]), False


def _source_path(ref: Reference) -> tuple[str, ...]:
    """The string keys read below ``source`` (up to the first index); () otherwise."""
    if not ref or ref[0] != "source":
        return ()
    path: list[str] = []
    for part in ref[1:]:
        if not isinstance(part, str):
            break
        path.append(part)
    return tuple(path)


def _has(payloads: Iterable[dict[str, Any]], path: tuple[str, ...]) -> bool:
    """Whether some payload has ``path`` (each step a key of a mapping)."""
    for payload in payloads:
        level = _level(payload, path[:-1])
        if level is not None and path[-1] in level:
            return True
    return False


def _level(payload: Any, path: tuple[str, ...]) -> dict[str, Any] | None:
    for part in path:
        if not isinstance(payload, dict) or part not in payload:
            return None
        payload = payload[part]
    return payload if isinstance(payload, dict) else None


def _missing(
    f: Findings, raw: RawAction, key: str, path: tuple[str, ...], payloads: list[dict[str, Any]]
) -> None:
    depth = len(path) - 1
    while depth > 0 and not any(_level(p, path[:depth]) for p in payloads):
        depth -= 1
    levels = [lv for p in payloads if (lv := _level(p, path[:depth])) is not None]
    dotted = ".".join(("source", *path))
    what = "guard" if key == "when" else key
    message = (
        f"{what} of action {raw.name!r} reads {dotted}, which none of the first "
        f"{len(payloads)} records has (their fields"
        + (f" under source.{'.'.join(path[:depth])}" if depth else "")
        + f": {_fields(levels)})"
    )
    hint = did_you_mean(path[depth], _keys(levels)) or (
        f"if only some records have it, guard it: {{{{ {dotted} | default('') }}}} or "
        f"{{% if {dotted} is defined %}}"
    )
    origin = raw.origin("fan_out" if key == "fan_out" else key)
    f.error("missing_source_field", message, origin, hint=hint)


def _keys(payloads: Iterable[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for p in payloads:
        seen.update(dict.fromkeys(str(k) for k in p))
    return list(seen)


def _fields(payloads: Iterable[dict[str, Any]]) -> str:
    keys = _keys(payloads)
    shown = ", ".join(keys[:20])
    return shown + (f", … ({len(keys)} in all)" if len(keys) > 20 else "") if keys else "none"
