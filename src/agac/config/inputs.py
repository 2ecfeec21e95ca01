"""Validation against the input itself (``agac validate``): does it exist, and do its
first records have the fields the workflow reads?

Before anything is sent, the first records (100 by default) are read and checked:

- ``input_not_found`` — ``input.path`` names nothing (with "did you mean" among the
  names nearby);
- ``missing_id_field`` — no sampled record has ``id_field`` (an error naming the fields
  they have; a warning when only some lack it: those records fail ``invalid_input``);
- ``missing_source_field`` — a prompt, ``system``, guard or ``fan_out.over`` reads
  ``source.X`` and no sampled record has X, unless the template guards it (a
  ``default`` filter, ``is defined``, ``'X' in source``);
- warnings with the data file and line: ``empty_input`` (a file with no record) and
  ``invalid_input`` (a sampled record that cannot be read, e.g. a CSV quote never
  closed).

A field missing from the sample may exist further down a large file; the message says
how many records were read, and ``agac validate --sample N`` reads more.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from jinja2 import TemplateSyntaxError

from agac.config.actions import RawAction
from agac.config.model import InputSpec
from agac.config.project import Project
from agac.config.source import Findings, did_you_mean
from agac.data.inputs import resolve_input_files
from agac.data.sample import InputSample, sample_input
from agac.errors import ConfigError, Problem
from agac.prompt.references import Reference, guarded_references, template_references

__all__ = ["DEFAULT_SAMPLE", "check_input"]

DEFAULT_SAMPLE = 100
"""Records ``agac validate`` reads unless told otherwise (``--sample``)."""

_INVALID_SHOWN = 5
_TEMPLATES = (("system", False), ("prompt", False), ("when", True))


def check_input(f: Findings, project: Project, spec: InputSpec, raws: Sequence[RawAction],
                sample: int) -> None:
    """Report the problems of the input of a workflow (see the module docstring)."""
    where = ("input", "path")
    try:
        files = resolve_input_files(spec.path, project.root, file=f.doc.file,
                                    line=f.doc.line(where), format=spec.format)
    except ConfigError as exc:
        f.problems.extend(exc.problems)
        return
    try:
        got = sample_input(files, sample, spec.format)
    except OSError as exc:
        f.error("input_unreadable", f"cannot read input file {exc.filename}: "
                f"{exc.strerror or exc}", where, hint="check its permissions")
        return
    _report_files(f, project, got)
    payloads = [r.payload for _, r in got.records if r.payload is not None and r.ok]
    if not payloads:
        return
    if spec.id_field is not None:
        _check_id_field(f, spec.id_field, payloads)
    for raw in raws:
        for key, path, guarded in _source_reads(raw):
            if not guarded and not _has(payloads, path):
                _missing(f, raw, key, path, payloads)


def _report_files(f: Findings, project: Project, got: InputSample) -> None:
    for path in got.empty_files:
        f.problems.append(Problem(
            "empty_input", f"input file {project.display(path)} holds no records",
            project.display(path), 1, "warning", hint="it adds nothing to a run; fill it or "
            "remove it (an empty CSV may have a header and no rows)", path="input.path"))
    invalid = [(path, r) for path, r in got.records if not r.ok]
    for path, record in invalid[:_INVALID_SHOWN]:
        f.problems.append(Problem(
            "invalid_input", str(record.error), project.display(path), record.line, "warning",
            hint="this record fails invalid_input when the workflow runs; fix that line",
            path="input.path"))
    if len(invalid) > _INVALID_SHOWN:
        f.warn("invalid_input", f"{len(invalid) - _INVALID_SHOWN} more of the first "
               f"{len(got.records)} records cannot be read", ("input", "path"))


def _check_id_field(f: Findings, id_field: str, payloads: list[dict[str, Any]]) -> None:
    where = ("input", "id_field")
    lacking = sum(1 for p in payloads if p.get(id_field) in (None, ""))
    if lacking == len(payloads):
        f.error("missing_id_field", f"id_field {id_field!r} is in none of the first "
                f"{len(payloads)} records (their fields: {_fields(payloads)})", where,
                hint=did_you_mean(id_field, _keys(payloads)) or "name one of their fields, or "
                "remove id_field to key records by file and line")
    elif lacking:
        f.warn("missing_id_field", f"{lacking} of the first {len(payloads)} records have no "
               f"{id_field!r}; they will fail invalid_input", where,
               hint="give every record a value, or remove id_field")


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


def _missing(f: Findings, raw: RawAction, key: str, path: tuple[str, ...],
             payloads: list[dict[str, Any]]) -> None:
    depth = len(path) - 1
    while depth > 0 and not any(_level(p, path[:depth]) for p in payloads):
        depth -= 1
    levels = [lv for p in payloads if (lv := _level(p, path[:depth])) is not None]
    dotted = ".".join(("source", *path))
    what = "guard" if key == "when" else key
    message = (f"{what} of action {raw.name!r} reads {dotted}, which none of the first "
               f"{len(payloads)} records has (their fields"
               + (f" under source.{'.'.join(path[:depth])}" if depth else "")
               + f": {_fields(levels)})")
    hint = did_you_mean(path[depth], _keys(levels)) or (
        f"if only some records have it, guard it: {{{{ {dotted} | default('') }}}} or "
        f"{{% if {dotted} is defined %}}")
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

