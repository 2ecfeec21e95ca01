"""The static prefix of an llm action's requests (docs/workflow-reference.md, Prompt caching).

What every record of an action sends the same, first: the system prompt when it reads no
record field, then the rendered ``context_prefix`` and the prompt template's literal head —
its text before the first expression or statement, found in the Jinja AST.

``context_prefix`` is a template rendered once per run that sees no record, only
``read(path)``: the text of a file of the project, the path relative to its root and
confined to it by the rule every path from data follows (:mod:`agac.confinement`: an
absolute path, a ``..`` out of it or a symbolic link leaving it is
``context_file_refused``, and so is anything but a regular file; a file that is not there ``context_file_not_found``, with a
"did you mean" among the files beside it).
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from jinja2 import nodes

from agac.confinement import Confinement, NotRegularFile, PathLoop, PathOutside, open_regular
from agac.prompt.render import ENV, PromptTooLarge, RenderError, capped, compile_template

__all__ = [
    "PREFIX_SEPARATOR",
    "ContextFileError",
    "late_literal",
    "project_reader",
    "render_context_prefix",
    "static_head",
    "text_tokens",
]

PREFIX_SEPARATOR = "\n\n"
"""What joins the rendered ``context_prefix`` and the rendered prompt in the user message."""


class ContextFileError(RenderError):
    """A file that a ``context_prefix`` reads cannot be read."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint


def text_tokens(text: str) -> int:
    """The tokens ``text`` is estimated at: ``ceil(chars / 4)``, the estimate of the
    engine's rate windows (engine/limits/rates.py)."""
    return math.ceil(len(text) / 4)


def project_reader(root: Path, limit: int) -> Callable[[str], str]:
    """The ``read(path)`` a ``context_prefix`` calls: files of the project under ``root``,
    at most ``limit`` characters (the action's ``max_prompt_chars``)."""
    reach = Confinement.of(root)

    def read(path: str) -> str:
        return _read(reach, path, limit)

    return read


def _read(reach: Confinement, ref: object, limit: int) -> str:
    if not isinstance(ref, str) or not ref.strip():
        raise ContextFileError(
            "context_file_refused",
            f"read() takes a path relative to the project root, got {ref!r}",
            hint='read("docs/policy.md")',
        )
    if os.path.isabs(ref) or ref.startswith("~"):
        raise ContextFileError(
            "context_file_refused",
            f"read({ref!r}) names an absolute path; "
            "a context_prefix reads files of the project only",
            hint="write the path relative to the project root",
        )
    try:
        target = reach.locate(ref)
    except PathOutside as exc:
        raise ContextFileError(
            "context_file_refused",
            f"read({ref!r}) leaves the project (a '..' or a symbolic link out of it)",
            hint="copy the file into the project and read it there",
        ) from exc
    except PathLoop as exc:
        raise ContextFileError("context_file_refused", f"read({ref!r}): {exc}") from exc
    if not target.exists():
        raise ContextFileError(
            "context_file_not_found",
            f"read({ref!r}): no such file in the project",
            hint=_nearby(reach.root, ref),
        )
    try:
        fh, st = open_regular(target)
    except NotRegularFile as exc:
        raise ContextFileError(
            "context_file_refused", f"read({ref!r}) names a {exc.kind}, not a file"
        ) from exc
    except OSError as exc:
        raise ContextFileError(
            "context_file_refused", f"read({ref!r}) failed: {exc.strerror or exc}"
        ) from exc
    with fh:
        if st.st_size > 4 * limit:  # UTF-8 takes at most 4 bytes a character
            raise PromptTooLarge(
                f"read({ref!r}) is larger than the action's max_prompt_chars ({limit:,})"
            )
        try:
            text = fh.read(st.st_size + 1).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ContextFileError(
                "context_file_refused", f"read({ref!r}) is not UTF-8 text: {exc.reason}"
            ) from exc
        except OSError as exc:
            raise ContextFileError(
                "context_file_refused", f"read({ref!r}) failed: {exc.strerror or exc}"
            ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it


def _nearby(base: Path, ref: str) -> str | None:
    """ "did you mean" among the files in the folder ``ref`` names."""
    folder = (base / ref).parent
    try:
        names = [p.name for p in folder.iterdir() if p.is_file()]
    except OSError:
        return None
    close = difflib.get_close_matches(Path(ref).name, sorted(names), n=1, cutoff=0.6)
    return f"did you mean {str(Path(ref).parent / close[0])!r}?" if close else None


def render_context_prefix(
    source: str,
    root: Path,
    limit: int,
    name: str = "context_prefix",
) -> str:
    """The ``context_prefix`` template rendered: it sees ``read`` and nothing else.
    ContextFileError for a file it cannot read, RenderError for any other failure,
    PromptTooLarge when longer than ``limit`` characters."""
    return capped(compile_template(source, name), {"read": project_reader(root, limit)}, limit)


@lru_cache(maxsize=1024)
def static_head(source: str) -> str:
    """The literal text a prompt template starts with, before its first expression,
    statement (a comment renders nothing): what every rendering of it starts with."""
    parts: list[str] = []
    for node in ENV.parse(source).body:
        if not isinstance(node, nodes.Output):
            break
        for child in node.nodes:
            if not isinstance(child, nodes.TemplateData):
                return "".join(parts)
            parts.append(child.data)
    return "".join(parts)


@lru_cache(maxsize=1024)
def late_literal(source: str) -> str:
    """The longest literal text of a prompt template that comes after its first expression
    or statement (outside any block: the same for every record), or ``""``."""
    best, run, started = "", "", False
    for node in ENV.parse(source).body:
        children = node.nodes if isinstance(node, nodes.Output) else [node]
        for child in children:
            if isinstance(child, nodes.TemplateData):
                run += child.data
                continue
            if started and len(run) > len(best):
                best = run
            run, started = "", True
    return run if started and len(run) > len(best) else best
