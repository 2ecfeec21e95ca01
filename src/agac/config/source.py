"""YAML with a line for every node, and the collector of located Problems.

PyYAML's ``compose`` gives a node tree with marks; :func:`load_located` turns it into
plain Python values plus a table from *path* (a tuple of mapping keys and sequence
indexes, ``("actions", 1, "run_mode")``) to the 1-based line of that key or item. All
later checks work on the plain values and ask :class:`Findings` to report at a path,
so every Problem names its file and line without the checks knowing about YAML.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from agac.errors import ConfigError, Problem

__all__ = ["Findings", "Located", "Path", "did_you_mean", "format_path", "load_located"]

Path = tuple[Any, ...]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Located:
    """A parsed YAML document: ``data`` and the lines of its nodes.

    ``key_lines[path]`` is the line of the key (mapping entry) or of the item (sequence
    element); ``value_lines[path]`` is the first line of the value's content (for block
    scalars ``|`` / ``>``, the line after the indicator), used to place template errors.
    """

    data: Any
    file: str
    key_lines: dict[Path, int] = field(default_factory=dict)
    value_lines: dict[Path, int] = field(default_factory=dict)
    duplicates: list[tuple[Path, int]] = field(default_factory=list)

    def line(self, path: Path) -> int:
        """Line of ``path``, or of its nearest located parent; 1 for the document."""
        while path:
            if path in self.key_lines:
                return self.key_lines[path]
            path = path[:-1]
        return 1

    def value_line(self, path: Path) -> int:
        return self.value_lines.get(path) or self.line(path)


MAX_NODES = 100_000
"""The most values a document may hold once its aliases are expanded. A workflow holds a
few thousand at most; nested aliases (``&a [x, x]``, ``&b [*a, *a]``, …) can make a
file of a few lines expand to billions, which would hang agac or exhaust its memory."""


def _tab_at(text: str, mark: Any) -> bool:
    """Whether the parser stopped at a tab (YAML's "found character that cannot start any
    token" says nothing of tabs), or the line it stopped on is indented with one."""
    if mark is None:
        return False
    lines = text.splitlines()
    if not 0 <= mark.line < len(lines):
        return False
    row = lines[mark.line]
    at = row[mark.column : mark.column + 1]
    return at == "\t" or "\t" in row[: len(row) - len(row.lstrip())]


def load_located(text: str, file: str) -> Located:
    """Parse ``text``; ConfigError ``yaml_syntax`` (with the parser's line) when malformed,
    ``yaml_too_large`` when its aliases expand past :data:`MAX_NODES` values (measured on
    the parsed node graph, before anything is expanded) or it nests too deeply.

    An empty document is ``None``. Duplicate mapping keys are kept (last wins, as in
    YAML loaders) and listed in ``duplicates`` for the caller to report.
    """
    try:
        node = yaml.compose(text, Loader=_Loader)
        if node is not None:
            _check_size(node, file)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 0
        reason = getattr(exc, "problem", None) or str(exc)
        hint = None
        if mark is not None and _tab_at(text, mark):
            reason = f"a tab character at column {mark.column + 1} ({reason})"
            hint = "YAML indents with spaces, never tabs: replace the tab with spaces"
        raise ConfigError(
            problems=[Problem("yaml_syntax", f"malformed YAML: {reason}", file, line, hint=hint)]
        ) from exc
    except RecursionError as exc:
        raise ConfigError(
            problems=[
                Problem(
                    "yaml_too_large",
                    "the document nests too deeply to be a workflow",
                    file,
                    0,
                    hint="flatten it",
                )
            ]
        ) from exc
    doc = Located(None, file)
    if node is not None:
        doc.data = _Converter(doc).convert(node, ())
    return doc


def _check_size(root: yaml.Node, file: str) -> None:
    """ConfigError ``yaml_too_large`` when ``root`` expands past MAX_NODES values, or an
    alias refers to a node that contains it (expanding it would never end)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise ConfigError(
                problems=[
                    Problem(
                        "yaml_too_large",
                        "an alias refers to a node that contains it (it would expand without end)",
                        file,
                        node.start_mark.line + 1,
                        hint="remove the alias",
                    )
                ]
            )
        open_nodes.add(id(node))
        total = 1
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        for child in children:
            total += size(child)
            if total > MAX_NODES:
                raise ConfigError(
                    problems=[
                        Problem(
                            "yaml_too_large",
                            f"the document expands to more than {MAX_NODES:,} "
                            "values through its aliases",
                            file,
                            child.start_mark.line + 1,
                            hint="write the values out, or nest fewer aliases",
                        )
                    ]
                )
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    size(root)


class _Converter:
    def __init__(self, doc: Located) -> None:
        self.doc = doc
        self.constructor = yaml.constructor.SafeConstructor()

    def convert(self, node: yaml.Node, path: Path) -> Any:
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self._locate(path + (index,), node=item, key_node=item)
                items.append(self.convert(item, path + (index,)))
            return items
        return self.constructor.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._merge(result, value_node, path)
                continue
            key = self.convert(key_node, path)
            if isinstance(key, (list, dict)):
                key = str(key)
            child = path + (key,)
            if key in result:
                self.doc.duplicates.append((child, key_node.start_mark.line + 1))
            self._locate(child, node=value_node, key_node=key_node)
            result[key] = self.convert(value_node, child)
        return result

    def _merge(self, result: dict[Any, Any], value_node: yaml.Node, path: Path) -> None:
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for source in sources:
            merged = self.convert(source, path)
            if isinstance(merged, dict):
                for key, value in merged.items():
                    result.setdefault(key, value)

    def _locate(self, path: Path, *, node: yaml.Node, key_node: yaml.Node) -> None:
        self.doc.key_lines[path] = key_node.start_mark.line + 1
        start = node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            start += 1
        self.doc.value_lines[path] = start


def format_path(path: Path) -> str:
    """``("actions", 1, "retry")`` -> ``actions[1].retry``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def did_you_mean(word: str, known: Iterable[str]) -> str | None:
    """A "did you mean X?" hint for a misspelt key, or None when nothing is close."""
    close = difflib.get_close_matches(str(word), sorted(known), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


class Findings:
    """Collects Problems located in one document."""

    def __init__(self, doc: Located) -> None:
        self.doc = doc
        self.problems: list[Problem] = []
        for path, line in doc.duplicates:
            self.problems.append(
                Problem(
                    "yaml_syntax",
                    f"duplicate key {format_path(path)!r}",
                    doc.file,
                    line,
                    path=format_path(path),
                )
            )

    def error(
        self,
        code: str,
        message: str,
        path: Path,
        *,
        hint: str | None = None,
        line: int | None = None,
    ) -> None:
        self._add(code, message, path, "error", hint, line)

    def warn(
        self,
        code: str,
        message: str,
        path: Path,
        *,
        hint: str | None = None,
        line: int | None = None,
    ) -> None:
        self._add(code, message, path, "warning", hint, line)

    def unknown_keys(
        self, mapping: dict[Any, Any], known: Iterable[str], path: Path, where: str
    ) -> None:
        """Report every key of ``mapping`` not in ``known`` as ``unknown_key``."""
        known = set(known)
        for key in mapping:
            if key not in known:
                self.error(
                    "unknown_key",
                    f"unknown key {key!r} in {where}",
                    path + (key,),
                    hint=did_you_mean(key, known),
                )

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def _add(
        self, code: str, message: str, path: Path, severity: str, hint: str | None, line: int | None
    ) -> None:
        where = line if line is not None else self.doc.line(path)
        self.problems.append(
            Problem(code, message, self.doc.file, where, severity, hint, format_path(path))
        )
