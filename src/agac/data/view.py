"""The view a prompt, guard or tool sees (docs/workflow-reference.md, "What a template sees").

The view is a dict whose roots are ``source`` (the record) and the output of each
ancestor action under the action's name. An action's ``context`` narrows it:

- ``observe`` keeps only the listed dotted paths: ``source.text`` keeps that field
  (inside a ``source`` dict, so templates still write ``source.text``); ``classify`` or
  ``classify.*`` keeps all of ``classify``. Paths are merged: ``[source.a, source.b]``
  keeps both fields.
- ``drop`` then removes the listed dotted paths (``x.*`` drops all of ``x``).

A path that is not in the data is simply absent — never an error; a dict left empty
by ``observe`` because none of its listed paths exist is left out. Paths walk dicts
only (a segment never indexes a list), ``*`` is understood as the last segment only, and
keys holding a dot cannot be named.

The view never mutates its inputs and copies only the dicts it has to change, so it
shares unchanged subtrees with them: treat it as read-only, and copy it before handing
it to code that may modify it. Without ``observe`` and ``drop`` it costs one dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Union

__all__ = ["ViewSpec", "build_view", "compile_view"]

# A path trie: each key maps to a sub-trie, or to None meaning "all of it".
_Trie = dict[str, Union["_Trie", None]]
_MISSING: Any = object()


class ViewSpec:
    """A compiled ``context`` (observe, drop), reusable for every record of an action."""

    __slots__ = ("_drop", "_drop_all", "_observe")

    def __init__(self, observe: Sequence[str] | None, drop: Sequence[str]) -> None:
        # observe ["*"] keeps everything, which is the same as no observe at all.
        self._observe: _Trie | None = None if observe is None else _trie(observe)
        dropped = _trie(drop) if drop else {}
        self._drop_all = dropped is None
        self._drop: _Trie | None = dropped or None

    def build(self, source: Mapping[str, Any] | None, outputs: Mapping[str, Any]) -> dict[str, Any]:
        """Return the view over ``source`` and the ancestors' ``outputs``."""
        view: dict[str, Any] = dict(outputs)
        view["source"] = source
        if self._drop_all:
            return {}
        if self._observe is not None:
            view = _project(view, self._observe)
        if self._drop is not None:
            _drop_into(view, self._drop)
        return view


@lru_cache(maxsize=256)
def _compiled(observe: tuple[str, ...] | None, drop: tuple[str, ...]) -> ViewSpec:
    return ViewSpec(observe, drop)


def compile_view(observe: Sequence[str] | None, drop: Sequence[str] = ()) -> ViewSpec:
    """Return the (cached) :class:`ViewSpec` for an action's ``context``."""
    return _compiled(None if observe is None else tuple(observe), tuple(drop))


def build_view(
    source: Mapping[str, Any],
    outputs: Mapping[str, Any],
    observe: Sequence[str] | None,
    drop: Sequence[str],
) -> dict[str, Any]:
    """Return what a template sees: ``source`` plus each ancestor's output by name.

    ``observe`` (None = everything) and ``drop`` are dotted paths as described in the
    module docstring. ``source`` wins over an output named ``source``. Inputs are never
    mutated; the result shares unchanged subtrees with them.
    """
    if observe is None and not drop:
        view: dict[str, Any] = dict(outputs)
        view["source"] = source
        return view
    return compile_view(observe, drop).build(source, outputs)


def _trie(paths: Sequence[str]) -> _Trie | None:
    """The trie of ``paths``; None when one of them is ``*`` (everything)."""
    root: _Trie = {}
    for path in paths:
        parts = path.strip().split(".")
        if parts[-1] == "*":
            parts.pop()
        if not parts:
            return None
        if any(not part for part in parts):
            continue  # "a..b" or "": names nothing
        _insert(root, parts)
    return root


def _insert(root: _Trie, parts: list[str]) -> None:
    node = root
    for part in parts[:-1]:
        if part in node and node[part] is None:
            return  # an ancestor is already taken whole
        child = node.setdefault(part, {})
        assert child is not None
        node = child
    node[parts[-1]] = None


def _project(data: Mapping[str, Any], trie: _Trie) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, sub in trie.items():
        value = data.get(key, _MISSING)
        if value is _MISSING:
            continue
        if sub is None:
            out[key] = value
        elif isinstance(value, Mapping):
            inner = _project(value, sub)
            if inner:
                out[key] = inner
    return out


def _drop_into(view: dict[str, Any], trie: _Trie) -> None:
    """Remove ``trie``'s paths from ``view`` (which we own), copying shared dicts."""
    for key, sub in trie.items():
        if key not in view:
            continue
        if sub is None:
            del view[key]
            continue
        value = view[key]
        if isinstance(value, Mapping):
            pruned = _without(value, sub)
            if pruned is not value:
                if pruned:
                    view[key] = pruned
                else:
                    del view[key]  # emptied by the drop: left out, as observe leaves it out


def _without(data: Mapping[str, Any], trie: _Trie) -> Mapping[str, Any]:
    """``data`` minus ``trie``'s paths: ``data`` itself when nothing is removed."""
    copy: dict[str, Any] | None = None
    for key, sub in trie.items():
        if key not in data:
            continue
        if sub is None:
            copy = dict(data) if copy is None else copy
            del copy[key]
            continue
        value = data[key]
        if isinstance(value, Mapping):
            pruned = _without(value, sub)
            if pruned is not value:
                copy = dict(data) if copy is None else copy
                if pruned:
                    copy[key] = pruned
                else:
                    del copy[key]
    return data if copy is None else copy
