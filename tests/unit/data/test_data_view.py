"""build_view: what a template or tool sees, narrowed by context observe/drop (docs/workflow-reference.md)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agac.data.view import build_view, compile_view

SOURCE = {"text": "great", "email": "a@b.c", "meta": {"lang": "en", "stars": 5}}
OUTPUTS = {"classify": {"sentiment": "pos", "score": 0.9}, "extract": {"items": [1, 2]}}


def test_without_context_the_view_has_source_and_every_ancestor() -> None:
    view = build_view(SOURCE, OUTPUTS, None, [])
    assert view == {"source": SOURCE, **OUTPUTS}


def test_source_wins_over_an_output_named_source() -> None:
    assert build_view({"a": 1}, {"source": {"b": 2}}, None, [])["source"] == {"a": 1}


def test_observe_a_field_keeps_the_nesting() -> None:
    view = build_view(SOURCE, OUTPUTS, ["source.text", "classify.sentiment"], [])
    assert view == {"source": {"text": "great"}, "classify": {"sentiment": "pos"}}


def test_observe_star_and_bare_name_take_everything_under_it() -> None:
    assert build_view(SOURCE, OUTPUTS, ["classify.*"], []) == {"classify": OUTPUTS["classify"]}
    assert build_view(SOURCE, OUTPUTS, ["classify"], []) == {"classify": OUTPUTS["classify"]}


def test_observe_paths_merge() -> None:
    view = build_view(SOURCE, OUTPUTS, ["source.text", "source.meta.lang", "source.meta"], [])
    assert view == {"source": {"text": "great", "meta": SOURCE["meta"]}}


def test_observe_everything_and_nothing() -> None:
    assert build_view(SOURCE, OUTPUTS, ["*"], []) == {"source": SOURCE, **OUTPUTS}
    assert build_view(SOURCE, OUTPUTS, [], []) == {}


def test_missing_paths_are_absent_not_errors() -> None:
    view = build_view(SOURCE, OUTPUTS, ["source.nope", "source.text.deeper", "ghost.x"], [])
    assert view == {}
    view = build_view(SOURCE, OUTPUTS, ["source.text", "extract.items.0"], ["a.b", "ghost"])
    assert view == {"source": {"text": "great"}}


def test_drop_removes_paths() -> None:
    view = build_view(SOURCE, OUTPUTS, None, ["source.email", "source.meta.stars", "extract"])
    assert view == {
        "source": {"text": "great", "meta": {"lang": "en"}},
        "classify": OUTPUTS["classify"],
    }


def test_drop_star() -> None:
    assert build_view(SOURCE, OUTPUTS, None, ["classify.*"]) == {
        "source": SOURCE,
        "extract": OUTPUTS["extract"],
    }
    assert build_view(SOURCE, OUTPUTS, None, ["*"]) == {}


def test_observe_then_drop() -> None:
    view = build_view(SOURCE, OUTPUTS, ["source", "classify.sentiment"], ["source.email"])
    assert view == {
        "source": {"text": "great", "meta": SOURCE["meta"]},
        "classify": {"sentiment": "pos"},
    }


def test_inputs_are_never_mutated_and_unchanged_parts_are_shared() -> None:
    source, outputs = copy.deepcopy(SOURCE), copy.deepcopy(OUTPUTS)
    view = build_view(source, outputs, None, ["source.meta.stars"])
    assert source == SOURCE and outputs == OUTPUTS
    assert view["classify"] is outputs["classify"]  # untouched subtree: no copy
    assert view["source"] is not source


def test_compiled_view_is_cached_and_reusable() -> None:
    spec = compile_view(["source.text"], ["x"])
    assert compile_view(["source.text"], ["x"]) is spec
    assert spec.build({"text": 1}, {}) == {"source": {"text": 1}}
    assert spec.build({"text": 2}, {}) == {"source": {"text": 2}}


# --- properties ---------------------------------------------------------------------

NAMES = st.sampled_from(["source", "a", "b", "c", "d"])
LEAVES = st.one_of(
    st.none(),
    st.integers(),
    st.text(alphabet="xyz✓", max_size=3),
    st.lists(st.integers(), max_size=2),
)
TREES = st.recursive(LEAVES, lambda inner: st.dictionaries(NAMES, inner, max_size=4), max_leaves=12)
PATHS = st.lists(NAMES, min_size=1, max_size=3).map(".".join)


def leaf_paths(data: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every path to a non-dict value (or an empty dict)."""
    if not isinstance(data, dict) or not data:
        return {prefix}
    return set().union(*(leaf_paths(v, (*prefix, k)) for k, v in data.items()))


def lookup(data: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False, None
        data = data[part]
    return True, data


def covered(path: tuple[str, ...], selectors: list[str]) -> bool:
    return any(path[: len(s.split("."))] == tuple(s.split(".")) for s in selectors)


@given(
    source=st.dictionaries(NAMES, TREES, max_size=4),
    outputs=st.dictionaries(NAMES.filter(lambda n: n != "source"), TREES, max_size=3),
    observe=st.one_of(st.none(), st.lists(PATHS, max_size=4)),
    drop=st.lists(PATHS, max_size=3),
)
def test_view_properties(
    source: dict[str, Any], outputs: dict[str, Any], observe: list[str] | None, drop: list[str]
) -> None:
    before = copy.deepcopy((source, outputs))
    full = {**outputs, "source": source}
    view = build_view(source, outputs, observe, drop)

    assert (source, outputs) == before  # inputs never mutated
    for path in leaf_paths(view) - {()}:
        found, value = lookup(full, path)
        assert found  # nothing invented
        assert observe is None or covered(path, observe)  # only what was observed
        assert not covered(path, drop)  # nothing dropped survives
    for selector in observe if observe is not None else []:
        parts = tuple(selector.split("."))
        found, value = lookup(full, parts)
        if (
            found
            and not covered(parts, drop)
            and not any(covered(d, [selector]) for d in (tuple(x.split(".")) for x in drop))
        ):
            assert lookup(view, parts) == (True, value)  # observed and not dropped: intact
