"""An llm action's ``attachments:``: templates that render to file references, and the
files they name.

Each template renders to one reference or a list of them: a path (relative to the
project root, or absolute), or a ``data:`` URL. A template that is a single expression
(``{{ source.pages }}``) gives its value as it is — a string or a list of strings; any
other template gives its text (a JSON list of strings counts as a list).

Paths are judged before anything is read (:mod:`agac.confinement`): a path, relative or
absolute, is resolved with every symbolic link followed and must lead inside the project
or inside a folder the action's ``attachment_folders`` lists (else
``attachment_outside_project``); what it names must be a regular file
(``attachment_not_regular_file``) within the provider's size limit by ``stat``
(``attachment_too_large``). A ``data:`` URL must be base64; its bytes are kept once, by hash, under
``.agac/attachments/`` in the project, so that a request names them by path like any
file and the store holds no bytes.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Template

from agac.confinement import Confinement, PathLoop, PathOutside
from agac.media import Attachment, AttachmentError, Destination, describe_bytes, describe_file
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


def resolve(ref: str, reach: Confinement, destination: Destination | None = None) -> Attachment:
    """The attachment ``ref`` names (see the module docstring); AttachmentError naming the
    reference when it cannot be sent. ``reach``: where a path may lead (the project and
    the action's ``attachment_folders``); ``destination``: whose size limit a file is
    judged against, by ``stat``, before it is read."""
    if ref.startswith("data:"):
        return _data_url(ref, reach.root)
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", ref):
        raise AttachmentError(
            reason="unsupported_attachment",
            message=f"{_short(ref)} is a URL; agac "
            "attaches files and data: URLs, it does not download",
            hint="download the file into the project and name its path",
        )
    real = _locate(ref, reach)
    path = os.path.normpath(os.path.join(reach.root, ref))
    try:
        st = os.stat(real)
    except OSError:
        st = None  # describe_file raises the mapped error
    key = (str(real), st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else None
    found = _SEEN.get(key) if key is not None else None
    if found is None:
        found = describe_file(str(real), what=ref, destination=destination)
        if key is not None:
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            _SEEN[key] = found
    # named as the reference spells it: where it is read again, and what people see
    return dataclasses.replace(found, path=path, name=os.path.basename(path))


def resolve_all(
    refs: list[str], reach: Confinement, destination: Destination | None = None
) -> tuple[Attachment, ...]:
    return tuple(resolve(r, reach, destination) for r in refs)


def _locate(ref: str, reach: Confinement) -> Path:
    """Where ``ref`` leads with every symbolic link followed; never outside ``reach``."""
    try:
        return reach.locate(ref)
    except PathLoop as exc:
        raise AttachmentError(
            reason="attachment_unreadable", message=f"{ref} is a symlink loop"
        ) from exc
    except PathOutside as exc:
        listed = ", ".join(str(f) for f in reach.folders)
        raise AttachmentError(
            reason="attachment_outside_project",
            message=f"{ref} leads out of the project ({reach.root})"
            + (f" and the action's attachment_folders ({listed})" if listed else "")
            + (f": it resolves to {exc.resolved}" if str(exc.resolved) != ref else ""),
            hint="a path from the data is read only inside the project; to attach files "
            "from another folder, list it in the action's attachment_folders",
        ) from exc


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
