"""Resolve a workflow's ``input.path`` to the input files it names (docs/workflow-reference.md).

An input spec is one of:

- a **file**: used as is; its extension must be one of :data:`SUPPORTED_SUFFIXES`
  (a row format possibly compressed: ``.jsonl.gz``), unless ``input.format:`` names it;
- a **folder**: its files with a supported extension, sorted by name. Only the folder
  itself is read, not its subfolders (use a glob such as ``data/**/*.jsonl`` for that);
  files with other extensions and hidden files (``.name``, like editor lock files) are
  ignored, as a glob's ``*`` ignores them. With ``input.format:`` every file is read
  except hidden ones and markers like ``_SUCCESS`` (names starting ``_``);
- a **Hugging Face dataset** saved with ``save_to_disk``: a folder holding
  ``state.json``; its ``.arrow`` shards in the order ``state.json`` lists them (a
  ``DatasetDict`` folder is refused, naming its splits: point at one);
- a **glob** (any spec holding ``*``, ``?`` or ``[``): matched relative to the project
  root (``**`` crosses folders), sorted; matches with other extensions are ignored.

Relative specs are relative to the project root; absolute ones are used as written.
Each input file is one unit of batching, so the order returned here is the order in
which records are admitted.
"""

from __future__ import annotations

import difflib
import glob as _glob
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.data.formats import COMPRESSIONS, SUFFIXES, format_of
from agac.errors import ConfigError, Problem

if TYPE_CHECKING:
    from agac.data.files import InputFile

__all__ = ["SUPPORTED_SUFFIXES", "hf_shards", "input_files", "is_supported", "resolve_input_files"]

#: Extensions agac reads, lower-case (matching is case-insensitive); a row format
#: (.jsonl, .json, .csv) may be followed by a compression: .gz, .zst, .bz2, .xz.
SUPPORTED_SUFFIXES: tuple[str, ...] = tuple(SUFFIXES)

_GLOB_CHARS = frozenset("*?[")


def is_supported(path: Path, format: str | None = None) -> bool:
    """True when ``path`` has an extension agac can read (or ``format`` names one)."""
    return format_of(path.name, format) is not None


def _listed(path: Path, format: str | None) -> bool:
    if path.name.startswith((".", "_")) if format else path.name.startswith("."):
        return False
    return path.is_file() and is_supported(path, format)


def resolve_input_files(
    path_spec: str, root: Path, *, file: str = "", line: int = 0, format: str | None = None
) -> list[Path]:
    """Return the input files ``path_spec`` names, never empty.

    ``file`` and ``line`` locate the spec in its workflow file for error messages;
    ``format`` is ``input.format:``. Raises :class:`ConfigError` with code
    ``input_not_found`` when nothing matches and ``unsupported_input`` when an explicit
    file (or every match of a glob) has an extension agac cannot read.
    """
    spec = path_spec.strip()
    if not spec:
        raise _problem("input_not_found", "input.path is empty", file, line)
    if _GLOB_CHARS.intersection(spec):
        return _resolve_glob(spec, root, file, line, format)
    path = Path(spec).expanduser()
    if not path.is_absolute():
        path = root / path
    if path.is_dir():
        shards = hf_shards(path, spec, file, line)
        if shards is not None:
            return shards
        found = sorted(p for p in path.iterdir() if _listed(p, format))
        if not found:
            raise _problem(
                "input_not_found",
                f"input folder {spec!r} holds no {_suffix_list()} files",
                file,
                line,
            )
        return found
    if path.is_file():
        if not is_supported(path, format):
            raise _problem(
                "unsupported_input",
                f"input file {spec!r} is not one of {_suffix_list()}",
                file,
                line,
            )
        return [path]
    raise _problem(
        "input_not_found",
        f"input {spec!r} does not exist (looked in {path.parent})",
        file,
        line,
        hint=_nearby(spec, root),
    )


def input_files(
    path_spec: str,
    root: Path,
    format: str | None = None,
    *,
    options: Mapping[str, Any] | None = None,
    display: Callable[[Path], str] = str,
    file: str = "",
    line: int = 0,
) -> list[InputFile]:
    """The input files ``path_spec`` names as the readers open them: local files (as
    :func:`resolve_input_files` finds them, shown by ``display``) or listed objects
    (``s3://``, ``gs://``, ``az://``; ``options``: ``object_options:``)."""
    from agac.data.files import LocalFile
    from agac.objectstores import is_cloud_url

    if is_cloud_url(path_spec):
        from agac.data.objects import ObjectFile, list_objects

        bucket, entries = list_objects(path_spec, options, format)
        return [ObjectFile(bucket, e) for e in entries]
    found: list[InputFile] = []
    for path in resolve_input_files(path_spec, root, file=file, line=line, format=format):
        fmt = format_of(path.name, format)
        assert fmt is not None  # resolve_input_files keeps only files of a known format
        found.append(LocalFile(path, fmt, display(path)))
    return found


def _nearby(spec: str, root: Path) -> str:
    """A "did you mean" for a path that does not exist: the names, in the deepest folder
    of ``spec`` that exists, closest to the first part that does not; else what is there."""
    parts = Path(spec.rstrip("/")).parts
    base = Path(parts[0]) if Path(spec).is_absolute() else Path()
    skip = 1 if Path(spec).is_absolute() else 0
    for index in range(skip, len(parts)):
        folder = base if base.is_absolute() else root / base
        if _GLOB_CHARS.intersection(parts[index]) or not (folder / parts[index]).exists():
            names = _names_in(folder)
            close = difflib.get_close_matches(parts[index], list(names), n=3, cutoff=0.5)
            shown = (base / parts[index]).as_posix()
            if close:
                tail = "/".join(parts[index + 1 :])
                guesses = [(base / names[c] / tail).as_posix().rstrip("/") for c in close]
                return "did you mean " + " or ".join(repr(g) for g in guesses) + "?"
            where = f"{base.as_posix()}/" if base.parts else "the project root"
            listed = ", ".join(sorted(names.values())[:8]) or "nothing"
            if _GLOB_CHARS.intersection(parts[index]):
                return f"nothing in {where} matches {parts[index]!r}; it holds: {listed}"
            return f"there is no {shown!r}; {where} holds: {listed}"
        base = base / parts[index]
    return "input.path is a file, a folder or a glob, relative to the project root"


def _names_in(folder: Path) -> dict[str, str]:
    """Visible entries of ``folder``: name -> name as shown (folders end with ``/``)."""
    try:
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    except OSError:
        return {}
    return {p.name: p.name + ("/" if p.is_dir() else "") for p in entries}


def hf_shards(folder: Path, spec: str, file: str = "", line: int = 0) -> list[Path] | None:
    """The ``.arrow`` shards of a Hugging Face dataset saved to ``folder``
    (``Dataset.save_to_disk``), in ``state.json``'s order; None when ``folder`` is not one.
    A ``DatasetDict`` folder is refused (``unsupported_input``), naming its splits."""
    splits = folder / "dataset_dict.json"
    if splits.is_file():
        try:
            names = json.loads(splits.read_text(encoding="utf-8")).get("splits") or []
        except (OSError, ValueError, AttributeError):
            names = []
        shown = ", ".join(f"{spec.rstrip('/')}/{n}" for n in names) or "one split folder"
        raise _problem(
            "unsupported_input",
            f"input {spec!r} is a Hugging Face DatasetDict (several splits)",
            file,
            line,
            hint=f"point input.path at one split: {shown}",
        )
    state = folder / "state.json"
    if not state.is_file():
        return None
    try:
        listed = json.loads(state.read_text(encoding="utf-8"))["_data_files"]
        shards = [folder / str(entry["filename"]) for entry in listed]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _problem(
            "input_unreadable",
            f"input {spec!r} looks like a Hugging Face dataset "
            f"but its state.json cannot be read ({exc})",
            file,
            line,
            hint="save the dataset again with save_to_disk",
        ) from exc
    missing = [p.name for p in shards if not p.is_file()]
    if missing:
        raise _problem(
            "input_not_found",
            f"the Hugging Face dataset {spec!r} lists shards "
            f"that are not there: {', '.join(missing[:5])}",
            file,
            line,
            hint="save the dataset again with save_to_disk",
        )
    return shards


def _resolve_glob(
    spec: str, root: Path, file: str, line: int, format: str | None = None
) -> list[Path]:
    pattern = spec if Path(spec).is_absolute() else str(root / spec)
    matches = sorted(Path(p) for p in _glob.glob(pattern, recursive=True))
    files = [p for p in matches if p.is_file()]
    found = [p for p in files if is_supported(p, format)]
    if found:
        return found
    if files:
        raise _problem(
            "unsupported_input",
            f"input glob {spec!r} matches only files that are not {_suffix_list()}",
            file,
            line,
        )
    raise _problem(
        "input_not_found",
        f"input glob {spec!r} matches no files",
        file,
        line,
        hint=_nearby(spec, root),
    )


def _suffix_list() -> str:
    return "/".join(SUPPORTED_SUFFIXES) + " (a row format may end " + "/".join(COMPRESSIONS) + ")"


def _problem(code: str, message: str, file: str, line: int, hint: str | None = None) -> ConfigError:
    return ConfigError(
        problems=[
            Problem(
                code=code,
                message=message,
                file=file,
                line=line,
                path="input.path",
                hint=hint
                or "input.path is a file, a folder or a glob, relative to the project root",
            )
        ]
    )
