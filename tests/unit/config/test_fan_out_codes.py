"""Validation of fan_out, gate, join and failure_policy (docs/workflow-reference.md, Fan-out and join): codes, files, lines."""

from __future__ import annotations

BASE = """
input: {path: data.jsonl}
defaults: {model: mock/m}
actions:
  - name: extract
    prompt: "Split {{ source.text }}"
    schema: {type: object, properties: {clauses: {type: array, items: {type: string}}, title: {type: string}}}
"""

ASSESS = """
  - name: assess
    dependencies: [extract]
    fan_out: {over: extract.clauses, as: clause}
    prompt: "Assess {{ clause }}"
"""


def test_map_reduce_is_valid_and_resolves_joins(wf) -> None:
    checked = wf.check(
        BASE
        + ASSESS
        + """
  - name: summary
    dependencies: [assess, extract]
    join: assess
    failure_policy: atomic
    prompt: "{{ extract.title }} {% for f in fulfilled %}{{ f.output.text }}{% endfor %} {{ rejected | length }}"
  - name: collect
    kind: join
    dependencies: [assess]
"""
    )
    assert checked.problems == []
    wf_ = checked.workflow
    assert wf_ is not None
    assert (
        wf_.action("summary").join == "assess" and wf_.action("summary").failure_policy == "atomic"
    )
    assert wf_.action("collect").join == "assess" and wf_.action("collect").kind == "join"
    assert (
        wf_.action("assess").fan_out is not None
        and wf_.action("assess").fan_out.as_name == "clause"
    )


def test_fan_out_not_a_list(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: assess
    dependencies: [extract]
    fan_out: {over: extract.title}
    prompt: "Assess {{ item }}"
"""
    )
    p = checked.one("fan_out_not_a_list")
    assert (p.file, p.line) == ("wf.yml", checked.line_of("fan_out:"))


def test_fan_out_over_an_answer_without_schema_is_not_a_list(wf) -> None:
    checked = wf.check("""
input: {path: data.jsonl}
defaults: {model: mock/m}
actions:
  - {name: extract, prompt: x}
  - {name: assess, dependencies: [extract], fan_out: {over: extract.text}, prompt: "{{ item }}"}
""")
    assert checked.one("fan_out_not_a_list").line == checked.line_of("name: assess")


def test_join_without_fan_out(wf) -> None:
    checked = wf.check(
        BASE
        + """
  - name: collect
    kind: join
    dependencies: [extract]
"""
    )
    assert checked.one("join_without_fan_out").line == checked.line_of("kind: join")
    named = wf.check(
        BASE
        + """
  - name: summary
    dependencies: [extract]
    join: extract
    prompt: x
"""
    )
    assert named.one("join_without_fan_out").line == named.line_of("join: extract")


def test_sequential_fan_out_with_batch_mode(wf) -> None:
    text = BASE + ASSESS + "    gate: sequential\n"
    assert wf.check(text).problems == []
    checked = wf.check(text, run_mode="batch")
    p = checked.one("sequential_fan_out")
    assert p.line == checked.line_of("gate: sequential")


def test_per_item_dependency_outside_the_join(wf) -> None:
    checked = wf.check(
        BASE
        + ASSESS
        + """
  - name: collect
    kind: join
    dependencies: [assess]
  - name: after
    dependencies: [collect, assess]
    prompt: x
"""
    )
    p = checked.one("per_item_dependency")
    assert p.line == checked.line_of("dependencies: [collect, assess]")


def test_nested_fan_out_structure(wf) -> None:
    nested = (
        BASE
        + ASSESS
        + """
  - name: words
    dependencies: [assess]
    fan_out: {versions: 2}
    prompt: "{{ clause }} v{{ version }}"
  - name: inner
    kind: join
    dependencies: [words]
  - name: outer
    kind: join
    dependencies: [inner]
"""
    )
    ok = wf.check(nested)
    assert ok.problems == [] and ok.workflow is not None
    assert ok.workflow.action("inner").join == "words"
    assert ok.workflow.action("outer").join == "assess"
    # The outer join reads the inner items directly: it must go through the inner join.
    bad = wf.check(
        nested.replace("dependencies: [inner]", "dependencies: [inner, words]\n    join: assess")
    )
    assert "nested_fan_out" in bad.codes() or "per_item_dependency" in bad.codes()
    assert bad.workflow is None


def test_fan_out_spec_errors(wf) -> None:
    both = wf.check(
        BASE
        + """
  - {name: a, dependencies: [extract], fan_out: {over: extract.clauses, versions: 2}, prompt: x}
"""
    )
    assert both.one("invalid_fan_out").line == both.line_of("name: a")
    upstream = wf.check(
        BASE
        + """
  - {name: a, fan_out: {over: extract.clauses}, prompt: x}
"""
    )
    assert upstream.one("invalid_fan_out").line == upstream.line_of("name: a")
    gate = wf.check(BASE + "  - {name: a, prompt: x, gate: sequential}\n")
    assert gate.one("invalid_value").line == gate.line_of("name: a")
    policy = wf.check(BASE + "  - {name: a, prompt: x, failure_policy: atomic}\n")
    assert policy.one("invalid_value").line == policy.line_of("name: a")


def test_undefined_item_outside_the_fan_out(wf) -> None:
    checked = wf.check(
        BASE
        + ASSESS
        + """
  - name: collect
    kind: join
    dependencies: [assess]
  - name: after
    dependencies: [collect]
    prompt: "{{ clause }} {{ collect.fulfilled | length }}"
"""
    )
    assert checked.one("undefined_variable").line == checked.line_of('prompt: "{{ clause }}')


def test_join_kind_refuses_llm_keys(wf) -> None:
    checked = wf.check(
        BASE
        + ASSESS
        + """
  - name: collect
    kind: join
    dependencies: [assess]
    prompt: x
"""
    )
    assert checked.one("not_an_llm_action").line == checked.line_of("prompt: x")
