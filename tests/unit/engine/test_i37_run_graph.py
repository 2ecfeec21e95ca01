"""The run's graph, typed once (issue 37): the config frozen with a run decodes into one
:class:`RunGraph` — actions in order, ancestors, descendants, regions, joins, guards —
and the engine reads that, never the stored dict."""

from __future__ import annotations

from pathlib import Path

import pytest

from agac.config.model import Action, FanOutSpec, InputSpec, Workflow
from agac.engine.graph import RunGraph
from agac.prompt.render import Guard, RenderError


def _workflow() -> Workflow:
    return Workflow(
        name="w",
        path=Path("w.yml"),
        source_hash="",
        input=InputSpec("x.jsonl"),
        actions=(
            Action(name="a", model="mock/m", prompt="x"),
            Action(
                name="b",
                model="mock/m",
                prompt="x",
                dependencies=("a",),
                ancestors=("a",),
                when="a.ok",
            ),
            Action(name="c", kind="tool", dependencies=("b",), ancestors=("a", "b")),
        ),
    )


def test_i37_1_the_graph_decodes_the_frozen_config() -> None:
    workflow = _workflow()
    graph = RunGraph.of(Workflow.from_snapshot(workflow.snapshot()))
    assert graph.order == ("a", "b", "c")
    assert graph.ancestors["c"] == {"a", "b"}
    assert graph.descendants["a"] == {"b", "c"} and graph.descendants["c"] == set()
    assert graph.regions is None and graph.joins == frozenset()
    assert set(graph.guards) == {"b"} and graph.guards["b"].expr == "a.ok"
    assert graph.llm_actions() == {"a", "b"}
    assert graph.action("c").kind == "tool"


def test_i37_1_the_graph_knows_its_regions_and_joins() -> None:
    workflow = Workflow(
        name="w",
        path=Path("w.yml"),
        source_hash="",
        input=InputSpec("x.jsonl"),
        actions=(
            Action(name="f", model="mock/m", prompt="x", fan_out=FanOutSpec(versions=2)),
            Action(name="e", model="mock/m", prompt="x", dependencies=("f",), ancestors=("f",)),
            Action(name="j", kind="join", join="f", dependencies=("e",), ancestors=("e", "f")),
        ),
    )
    graph = RunGraph.of(Workflow.from_snapshot(workflow.snapshot()))
    assert graph.regions is not None
    assert graph.regions.per_item("e") and not graph.regions.per_item("j")
    assert graph.joins == {"j"}


def test_i37_1_one_guard_meaning() -> None:
    guard = Guard.compile("source.n > 2")
    assert guard.holds({"source": {"n": 3}}) is True
    assert guard.holds({"source": {}}) is False  # a missing field: false, skipped `guard`
    with pytest.raises(RenderError, match="guard 'source.n > 2' failed"):
        guard.holds({"source": {"n": "three"}})  # a mistake in the guard: render_error
