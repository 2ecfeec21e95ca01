"""An llm action's ``attachments:``: templates that render to file references, and the
files they name.

Each template renders to one reference or a list of them: a path (relative to the
project root, or absolute), or a ``data:`` URL. A template that is a single expression
(``{{ source.pages }}``) gives its value as it is — a string or a list of strings; any
other template gives its text (a JSON list of strings counts as a list).

Paths are judged before anything is read: a relative path must stay inside the project
(``../`` out of it is ``attachment_outside_project``; write the absolute path to mean a
file elsewhere). A ``data:`` URL must be base64; its bytes are kept once, by hash, under
``.agac/attachments/`` in the project, so that a request names them by path like any
file and the store holds no bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Template

from agac.media import Attachment, AttachmentError, describe_bytes, describe_file
from agac.prompt.render import RenderError, compile_guard, compile_template, render

__all__ = [
    "AttachmentTemplate",
    "compile_attachments",
    "render_references",
    "resolve",
    "resolve_all",
    "spill_dir",
]

_EXPRESSION = re.compile(r"^\s*\{\{(?P<expr>.*)\}\}\s*$", re.DOTALL)
_DATA_URL = re.compile(r"^data:(?P<type>[^;,]*)(?P<params>(;[^;,]*)*),(?P<data>.*)$", re.DOTALL)


@dataclass(frozen=True)
class AttachmentTemplate:
    """One compiled ``attachments:`` entry: an expression giving its value as it is, or a
    template giving text."""

    source: str
    expression: Any = None
    template: Template | None = None

    def references(self, view: dict[str, Any]) -> list[str]:
        if self.expression is not None:
            try:
                value = self.expression(view)
            except Exception as exc:
                from jinja2 import UndefinedError

                if isinstance(exc, UndefinedError):
                    raise RenderError(
                        f"attachments entry {self.source!r} reads an undefined "
                        f"value: {exc.message}",
                        variable=exc.message,
                    ) from exc
                raise RenderError(
                    f"attachments entry {self.source!r} failed: {type(exc).__name__}: {exc}"
                ) from exc
        else:
            assert self.template is not None
            value = render(self.template, view).strip()
            if value.startswith("["):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
        return _as_references(self.source, value)


def _as_references(source: str, value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise RenderError(
                    f"attachments entry {source!r} gave {item!r}, which is not a "
                    "path or a data: URL"
                )
            if item.strip():
                out.append(item.strip())
        return out
    raise RenderError(
        f"attachments entry {source!r} gave {value!r}: a path, a data: URL or "
        "a list of them was expected"
    )


def compile_attachments(sources: tuple[str, ...], action: str) -> tuple[AttachmentTemplate, ...]:
    """The compiled entries of an action's ``attachments:`` (syntax checked at validation)."""
    out = []
    for i, text in enumerate(sources):
        m = _EXPRESSION.match(text)
        if m is not None and "{{" not in m["expr"] and "}}" not in m["expr"]:
            out.append(AttachmentTemplate(text, expression=compile_guard(m["expr"].strip())))
        else:
            out.append(
                AttachmentTemplate(
                    text, template=compile_template(text, f"{action}.attachments[{i}]")
                )
            )
    return tuple(out)


def render_references(templates: tuple[AttachmentTemplate, ...], view: dict[str, Any]) -> list[str]:
    """Every file reference the templates give for this view, in order."""
    return [ref for t in templates for ref in t.references(view)]


def spill_dir(root: Path) -> Path:
    """Where the bytes of ``data:`` URLs are kept, by hash, in a project."""
    return root / ".agac" / "attachments"


# Described files by (path, inode, size, mtime): a file is read and hashed once per
# process while it stays as it was.
_SEEN: dict[tuple[str, int, int, int], Attachment] = {}
_SEEN_MAX = 65_536


def resolve(ref: str, root: Path) -> Attachment:
    """The attachment ``ref`` names (see the module docstring); AttachmentError naming the
    reference when it cannot be sent."""
    if ref.startswith("data:"):
        return _data_url(ref, root)
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", ref):
        raise AttachmentError(
            reason="unsupported_attachment",
            message=f"{_short(ref)} is a URL; agac "
            "attaches files and data: URLs, it does not download",
            hint="download the file into the project and name its path",
        )
    path = _project_path(ref, root)
    try:
        st = os.stat(path)
    except OSError:
        return describe_file(path, what=ref)  # raises the mapped error
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    found = _SEEN.get(key)
    if found is None:
        found = describe_file(path, what=ref)
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.clear()
        _SEEN[key] = found
    return found


def resolve_all(refs: list[str], root: Path) -> tuple[Attachment, ...]:
    return tuple(resolve(r, root) for r in refs)


def _project_path(ref: str, root: Path) -> str:
    """The absolute path of a reference: an absolute path as written, a relative one under
    the project root — never out of it."""
    if os.path.isabs(ref):
        return os.path.normpath(ref)
    base = os.path.normpath(str(root))
    path = os.path.normpath(os.path.join(base, ref))
    if path != base and not path.startswith(base + os.sep):
        raise AttachmentError(
            reason="attachment_outside_project",
            message=f"{ref} leads out of the project ({root})",
            hint="write the absolute path to attach a file from elsewhere",
        )
    return path


def _data_url(ref: str, root: Path) -> Attachment:
    m = _DATA_URL.match(ref)
    if m is None or ";base64" not in m["params"]:
        raise AttachmentError(
            reason="invalid_data_url",
            message=f"{_short(ref)} is not a base64 data: URL",
            hint="data:<media type>;base64,<data>",
        )
    try:
        data = base64.b64decode(m["data"].strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise AttachmentError(
            reason="invalid_data_url",
            message=f"{_short(ref)}: the data is not base64 ({exc})",
            hint="data:<media type>;base64,<data>",
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    folder = spill_dir(root) / digest[:2]
    path = folder / digest
    att = describe_bytes(data, str(path), f"data-url-{digest[:12]}", what=_short(ref))
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{digest}.{os.getpid()}"
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return att


def _short(ref: str) -> str:
    return ref if len(ref) <= 60 else ref[:48] + "…" + ref[-8:]
