"""Fan-out in batch mode (docs/workflow-reference.md, Fan-out and join with B1, B6) and ``versions`` against the emulator,
through the official SDKs: the items of a file go into that file's batch; items the
provider leaves out go into a retry batch or fail ``batch_not_returned`` and reach the
join as rejected; versions are distinct requests, never duplicates."""

from __future__ import annotations

from pathlib import Path

from batch_support import MAIN, MODELS, WORKFLOW, counts, params, rows, run

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

TOOLS = """
def split(inputs, ctx):
    return {"parts": inputs["source"]["parts"]}
"""


def _workflow(model: str, attempts: int) -> str:
    return f"""
name: {WORKFLOW}
input: {{path: data/, id_field: id}}
defaults:
  model: {model}
  max_tokens: 64
  retry: {{max_attempts: {attempts}, backoff: {{initial: 10ms, max: 20ms}}}}
actions:
  - {{name: split, kind: tool, function: tools:split}}
  - name: classify
    dependencies: [split]
    run_mode: batch
    fan_out: {{over: split.parts, as: part}}
    prompt: "Classify: {{{{ part }}}}"
    schema: {{type: object, properties: {{label: {{type: string, enum: [a, b, c]}}}}, required: [label], additionalProperties: false}}
  - {{name: collect, kind: join, dependencies: [classify]}}
"""


def _make(root: Path, provider: str, attempts: int) -> None:
    data = {
        "data/a.jsonl": [
            {"id": "r0", "parts": ["x0", "x1", "x2"]},
            {"id": "r1", "parts": ["y0", "y1", "y2"]},
        ],
        "data/b.jsonl": [{"id": "s0", "parts": ["z0", "z1"]}],
    }
    write_project(root, _workflow(MODELS[provider], attempts), data=data, files={"tools.py": TOOLS})


def _drop(provider: str, n: int) -> dict[str, object]:
    return {
        "provider": provider,
        "op": "batch.create",
        "nth": 1,
        "times": 1,
        "fault": {"batch_drop_records": n},
    }


@params(MAIN)
def test_b6_fan_out_items_left_out_go_into_a_retry_batch(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    _make(project, provider, attempts=2)
    emulator.add_fault(_drop(provider, 2))
    first = run(project)
    assert first.exit_code == 75
    # B1: one batch per input file, holding every item of that file's records.
    assert sorted(b["requests"] for b in emulator.stats()["batches"]) == [2, 6]
    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 75
    assert sorted(b["requests"] for b in emulator.stats()["batches"]) == [2, 2, 6]
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0, done.notes
    assert counts(done)["records"] == 8 and counts(done)["answered"] == 8
    assert counts(done, "collect")["records"] == 3 and counts(done, "collect")["answered"] == 3
    joined = rows(project, "collect")
    assert [f["key"] for f in joined["r1"]["output"]["fulfilled"]] == ["r1/0", "r1/1", "r1/2"]
    assert emulator.stats()["duplicate_answers"] == 0


@params(MAIN)
def test_b6_fan_out_items_left_out_with_no_attempt_left_are_rejected(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    _make(project, provider, attempts=1)
    emulator.add_fault(_drop(provider, 2))
    assert run(project).exit_code == 75
    emulator.advance(120)
    second = run(project)
    assert second.summary["state"] == "partial"
    classify = counts(second)
    assert classify["records"] == 8 and classify["failed"] == 2
    assert classify["reasons"] == {"batch_not_returned": 2}
    items = rows(project)
    failed = sorted(k for k, r in items.items() if r["status"] == "failed")
    rejected = sorted(
        r["key"] for row in rows(project, "collect").values() for r in row["output"]["rejected"]
    )
    assert rejected == failed and all("/" in k for k in failed)
    assert {
        r["reason"] for row in rows(project, "collect").values() for r in row["output"]["rejected"]
    } == {"batch_not_returned"}


def test_versions_are_distinct_requests_for_the_emulator(
    emulator: RunningEmulator, project: Path
) -> None:
    write_project(
        project,
        f"""
name: {WORKFLOW}
input: {{path: data/, id_field: id}}
actions:
  - name: vote
    model: {MODELS["openai"]}
    max_tokens: 32
    fan_out: {{versions: 3}}
    prompt: "Is {{{{ source.text }}}} spam?"
    schema: {{type: object, properties: {{spam: {{type: boolean}}}}, required: [spam], additionalProperties: false}}
  - {{name: tally, kind: join, dependencies: [vote]}}
""",
        data={"data/a.jsonl": [{"id": "m1", "text": "buy now"}, {"id": "m2", "text": "hello"}]},
    )
    result = run(project)
    assert result.exit_code == 0, result.notes
    assert counts(result, "vote")["calls"] == 6
    stats = emulator.stats()
    assert stats["answered"] == 6 and stats["duplicate_answers"] == 0
    assert len(rows(project, "tally")["m1"]["output"]["fulfilled"]) == 3


def test_fan_out_over_a_batch_answer_waits_for_it_then_batches_the_items(
    emulator: RunningEmulator, project: Path
) -> None:
    write_project(
        project,
        f"""
name: {WORKFLOW}
input: {{path: data/, id_field: id}}
defaults: {{model: {MODELS["openai"]}, max_tokens: 64, run_mode: batch}}
actions:
  - name: extract
    prompt: "List the parts of {{{{ source.text }}}}"
    schema: {{type: object, properties: {{parts: {{type: array, items: {{type: string}}, minItems: 2, maxItems: 2}}}}, required: [parts], additionalProperties: false}}
  - name: classify
    dependencies: [extract]
    fan_out: {{over: extract.parts, as: part}}
    prompt: "Classify: {{{{ part }}}}"
  - {{name: collect, kind: join, dependencies: [classify]}}
""",
        data={"data/a.jsonl": [{"id": f"r{i}", "text": f"thing {i}"} for i in range(3)]},
    )
    first = run(project)
    assert first.exit_code == 75
    assert [b["requests"] for b in emulator.stats()["batches"]] == [3]  # extract only (B4)
    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 75
    assert [b["requests"] for b in emulator.stats()["batches"]] == [3, 6]  # every item, one batch
    emulator.advance(120)
    done = run(project)
    assert done.exit_code == 0, done.notes
    assert counts(done)["records"] == counts(done)["answered"] == 6
    assert [f["key"] for f in rows(project, "collect")["r2"]["output"]["fulfilled"]] == [
        "r2/0",
        "r2/1",
    ]
    assert emulator.stats()["duplicate_answers"] == 0
