"""Workflow model: order, ancestors, snapshot round-trip, config_hash."""

from __future__ import annotations

import json

from agac.config.model import Workflow

WF = """
name: triage
description: first
input: {path: data, id_field: id}
actions:
  - name: reply
    model: mock/m
    dependencies: [classify]
    prompt: "{{ classify.text }}"
  - name: classify
    model: mock/m
    prompt: "{{ source.text }}"
    schema: {type: object, properties: {label: {type: string}}}
    context: {drop: [source.email]}
    rate_limit: {rpm: 10, tpm: 1000}
  - name: last
    model: mock/m
    dependencies: [reply]
    prompt: "{{ classify.label }} {{ reply.text }}"
  - name: free
    model: mock/m
    prompt: x
"""


def test_topological_order_is_stable_and_ancestors_transitive(wf) -> None:
    workflow = wf.check(WF).workflow
    assert workflow is not None
    assert workflow.action_names == ("classify", "reply", "last", "free")
    assert workflow.action("last").ancestors == ("classify", "reply")
    assert workflow.action("reply").line == 5


def test_snapshot_round_trip(wf) -> None:
    workflow = wf.check(WF).workflow
    assert workflow is not None
    snapshot = json.loads(json.dumps(workflow.snapshot()))
    rebuilt = Workflow.from_snapshot(snapshot)
    assert rebuilt == workflow
    assert rebuilt.config_hash == workflow.config_hash
    assert (
        Workflow(
            **{
                k: getattr(rebuilt, k)
                for k in (
                    "name",
                    "path",
                    "source_hash",
                    "input",
                    "actions",
                    "partial_ok",
                    "description",
                )
            }
        ).config_hash
        == workflow.config_hash
    )


def test_config_hash_ignores_layout_and_comments(wf) -> None:
    first = wf.check(WF).workflow
    second = wf.check(
        "# a comment\n" + WF.replace("description: first", "description: other") + "\n\n",
        "other.yml",
    ).workflow
    assert first is not None and second is not None
    assert first.source_hash != second.source_hash
    assert first.config_hash == second.config_hash


def test_config_hash_changes_with_execution(wf) -> None:
    base = wf.check(WF).workflow
    assert base is not None
    edits = [
        WF.replace("{{ source.text }}", "{{ source.text }}!"),
        WF.replace("rpm: 10", "rpm: 11"),
        WF.replace("id_field: id", "id_field: key"),
        WF + "partial_ok: false\n",
        WF.replace("    prompt: x\n", "    prompt: x\n    max_tokens: 9\n"),
    ]
    hashes = {base.config_hash}
    for i, text in enumerate(edits):
        workflow = wf.check(text, f"e{i}.yml").workflow
        assert workflow is not None
        hashes.add(workflow.config_hash)
    assert len(hashes) == len(edits) + 1
