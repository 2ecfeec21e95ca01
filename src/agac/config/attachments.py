"""``agac validate`` on the files a workflow's sample records attach.

For each llm action whose ``attachments:`` read only the record (``source``), the sampled
records' references are rendered and their files read, as a run will:

- a file that cannot be sent is a warning at the data file and line of its record, with
  the unit's reason code (``attachment_not_found`` with a "did you mean" among the files
  beside the one named, ``unsupported_attachment``, ``attachment_corrupt``, …): that unit
  will fail, the others run;
- a kind the action's provider or model cannot take (a PDF to Groq) is an error
  (``attachment_not_supported``, naming provider, model and kind): every such record would
  fail, so the workflow is refused before anything is sent.

Each folder an action's ``attachment_folders`` lists must be a folder that exists
(:func:`check_attachment_folders`): a path from the data may lead into it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jinja2 import TemplateSyntaxError

from agac.config.actions import RawAction, split_model
from agac.config.project import Project
from agac.config.source import Findings, did_you_mean
from agac.confinement import Confinement, folder_path
from agac.data.readers import InputRecord
from agac.errors import AttachmentError, ConfigError, Problem
from agac.media import AttachmentLimits, Destination
from agac.prompt.attachments import compile_attachments, render_references, resolve
from agac.prompt.references import template_references
from agac.prompt.render import RenderError
from agac.providers import registry

__all__ = ["check_attachment_folders", "check_attachments"]

_SHOWN = 5


def check_attachments(
    f: Findings,
    project: Project,
    raws: Sequence[RawAction],
    records: Sequence[tuple[Path, InputRecord]],
) -> None:
    """Report the sample's attachment problems (see the module docstring)."""
    for raw in raws:
        templates = _source_only(raw)
        if not templates:
            continue
        compiled = compile_attachments(templates, raw.name)
        provider, model = _model(raw)
        limits = _limits(provider)
        reach = Confinement.of(project.root, _folders(raw))
        shown = 0
        refused: set[str] = set()
        for path, record in records:
            if not record.ok or not isinstance(record.payload, dict):
                continue
            try:
                refs = render_references(compiled, {"source": record.payload})
            except RenderError:
                continue  # reported as missing_source_field, or the unit's render_error
            for ref in refs:
                problem = _judge(project, raw, ref, reach, (provider, model, limits), refused)
                if problem is None:
                    continue
                if problem.severity == "error":
                    f.error(
                        problem.code, problem.message, raw.origin("attachments"), hint=problem.hint
                    )
                elif shown < _SHOWN:
                    shown += 1
                    f.problems.append(
                        Problem(
                            problem.code,
                            problem.message,
                            project.display(path),
                            record.line,
                            "warning",
                            hint=problem.hint,
                            path="input.path",
                        )
                    )


def _judge(
    project: Project,
    raw: RawAction,
    ref: str,
    reach: Confinement,
    to: tuple[str, str, AttachmentLimits | None],
    refused: set[str],
) -> Problem | None:
    provider, model, limits = to
    try:
        att = resolve(ref, reach, Destination(provider, limits))
    except AttachmentError as exc:
        hint = exc.hint
        if exc.reason == "attachment_not_found":
            hint = _nearby(project.root, ref) or hint
        return Problem(
            exc.reason or "unsupported_attachment",
            f"action {raw.name!r} attaches {exc.message}",
            severity="warning",
            hint=f"this record's unit fails {exc.reason}; {hint}" if hint else None,
        )
    if limits is None:
        return None  # the provider takes no files: reported once by check_environment
    why = limits.refusal(provider, model, att.kind)
    if why is not None and att.kind not in refused:
        refused.add(att.kind)
        return Problem(
            "attachment_not_supported",
            f"action {raw.name!r} attaches {ref} ({att.media_type}), but {why}",
            severity="error",
            hint="use a model that takes this kind of file, or leave these files "
            "out (docs/providers.md lists what each provider takes)",
        )
    try:
        limits.check(provider, model, (att,))
    except AttachmentError as exc:
        if exc.reason != "attachment_not_supported":
            return Problem(
                exc.reason or "attachment_too_large",
                f"action {raw.name!r} attaches {exc.message}",
                severity="warning",
                hint=f"this record's unit fails {exc.reason}",
            )
    return None


def _nearby(root: Path, ref: str) -> str | None:
    """ "did you mean" among the files in the folder the reference names."""
    path = Path(ref) if os.path.isabs(ref) else root / ref
    try:
        names = [p.name for p in path.parent.iterdir() if p.is_file()]
    except OSError:
        return None
    close = did_you_mean(path.name, names)
    if close is None:
        return None
    shown = str(Path(ref).parent / close.split("'")[1])
    return f"did you mean {shown!r}?"


def check_attachment_folders(f: Findings, project: Project, raws: Sequence[RawAction]) -> None:
    """An error at its line for each listed attachment folder that is not a folder."""
    for raw in raws:
        for folder in _folders(raw):
            found = folder_path(project.root, folder)
            if not found.is_dir():
                f.error(
                    "invalid_value",
                    f"attachment_folders of action {raw.name!r} lists {folder!r}, which is "
                    f"not a folder ({found} {'is a file' if found.exists() else 'does not exist'})",
                    raw.origin("attachment_folders"),
                    hint="list folders that exist: absolute, ~/…, or relative to the project root",
                )


def _folders(raw: RawAction) -> tuple[str, ...]:
    value = raw.values.get("attachment_folders") if raw.kind == "llm" else None
    if not isinstance(value, list):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())


def _source_only(raw: RawAction) -> tuple[str, ...]:
    if raw.kind != "llm":
        return ()
    entries = raw.values.get("attachments")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return ()
    try:
        roots = {ref[0] for e in entries for ref in template_references(e)}
    except TemplateSyntaxError:
        return ()
    return tuple(entries) if entries and roots <= {"source"} else ()


def _model(raw: RawAction) -> tuple[str, str]:
    value: Any = raw.values.get("model")
    parts = split_model(value) if isinstance(value, str) else None
    return parts if parts is not None else ("", "")


def _limits(provider: str) -> AttachmentLimits | None:
    try:
        return registry.provider_spec(provider).attachments
    except (ConfigError, ImportError):
        return None
