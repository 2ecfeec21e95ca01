"""The normal batch lifecycle, B0 (batches outlive runs) and B1 (a batch per file).

A run submits one batch per input file and pauses (exit 75); a later run polls, reads
the ended batches and finishes; a run after that pays for nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from batch_support import (
    ALL,
    MAIN,
    batches,
    counts,
    creates,
    make,
    ops,
    params,
    rows,
    run,
)

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.errors import ConfigError


@params(ALL)
def test_lifecycle_submit_pause_collect_then_nothing_to_pay(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = make(project, provider)

    first = run(project)
    assert first.exit_code == 75
    assert first.summary["state"] == "waiting"
    classify = counts(first)
    assert (classify["pending"], classify["batches_out"], classify["calls"]) == (5, 2, 5)
    assert counts(first, "summarize")["pending"] == 5
    waiting = "\n".join(first.notes)
    assert "a.jsonl" in waiting and "b.jsonl" in waiting
    assert creates(emulator.stats(), provider) == 2

    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 0, second.notes
    assert second.summary["run_id"] == first.summary["run_id"]
    classify = counts(second)
    assert (classify["answered"], classify["batches_out"], classify["pending"]) == (5, 0, 0)
    assert counts(second, "summarize")["answered"] == 5
    outputs = rows(project)
    assert set(outputs) == set(keys["a.jsonl"] + keys["b.jsonl"])
    assert all(
        r["status"] == "answered" and r["output"]["label"] in "abc" for r in outputs.values()
    )

    emulator.reset_stats()
    third = run(project)
    assert third.exit_code == 0
    assert counts(third)["calls"] == 0 and counts(third)["reused"] == 5
    assert emulator.stats()["requests"] == {}
    assert emulator.stats()["duplicate_answers"] == 0


def test_ollama_batch_runs_locally_without_a_pause(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "ollama/llama3.2")

    result = run(project)

    assert result.exit_code == 0
    assert counts(result)["answered"] == 5 and counts(result)["batches_out"] == 0
    assert ops(emulator.stats(), "ollama") == {"chat": 10}
    assert batches(project) == []


def test_ollama_batch_says_in_the_run_notes_that_it_runs_locally(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "ollama/llama3.2")

    result = run(project)

    assert result.exit_code == 0
    [note] = [n for n in result.notes if "no batch API" in n]
    assert note.startswith("classify: ollama has no batch API") and "live calls" in note


def test_a_batch_action_on_a_provider_without_a_batch_api_is_refused_before_anything_runs(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "mock/m")

    with pytest.raises(ConfigError) as raised:
        run(project)

    [problem] = raised.value.problems
    assert problem.code == "batch_unsupported"
    assert "action 'classify'" in problem.message and "provider 'mock'" in problem.message
    assert api.list_runs(None, project) == []


@params(MAIN)
def test_b0_a_run_ended_by_new_leaves_its_batches_out_for_the_next_run_to_adopt(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider)
    first = run(project)
    assert first.exit_code == 75

    second = run(project, new=True)

    ended = api.status(first.summary["run_id"], project)
    assert ended["state"] == "cancelled"
    for action in ("classify", "summarize"):
        c = ended["actions"][action]
        assert (c["pending"], c["skipped"]) == (0, 5)
        assert c["reasons"] == {"batch_outstanding": 5}
    assert second.exit_code == 75
    assert second.summary["run_id"] != first.summary["run_id"]
    assert counts(second)["batches_out"] == 2
    assert creates(emulator.stats(), provider) == 2

    emulator.advance(120)
    third = run(project)
    assert third.exit_code == 0, third.notes
    assert third.summary["run_id"] == second.summary["run_id"]
    classify = counts(third)
    assert classify["answered"] == 5
    # The adopting run sent nothing: the answers came from the earlier run's batches.
    assert (classify["calls"], classify["reused"]) == (0, 5)
    stats = emulator.stats()
    assert creates(stats, provider) == 2
    assert ops(stats, provider).get("batch.cancel", 0) == 0
    assert stats["duplicate_answers"] == 0


@params(MAIN)
def test_b0_the_next_run_cancels_at_the_provider_the_batches_it_no_longer_needs(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider)
    assert run(project).exit_code == 75
    old_ids = {b.provider_batch_id for b in batches(project)}
    wf = project / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace('"Classify: ', '"Label this: '))

    second = run(project, new=True)

    assert second.exit_code == 75
    stats = emulator.stats()
    assert creates(stats, provider) == 4
    assert ops(stats, provider).get("batch.cancel", 0) == 2
    by_id = {b["id"]: b for b in stats["batches"]}
    assert all(
        by_id[i]["status"] in ("cancelling", "cancelled", "canceling", "ended") for i in old_ids
    )


@params(MAIN)
def test_b1_each_input_file_is_sent_as_its_own_batch_per_action(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    make(project, provider, {"a": 3, "b": 2, "c": 1}, second="batch")

    assert run(project).exit_code == 75
    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 75
    assert counts(second, "tag")["batches_out"] == 3
    emulator.advance(120)
    assert run(project).exit_code == 0

    sent = sorted((b.action, b.file, b.request_count) for b in batches(project))
    assert sent == [
        ("classify", "a.jsonl", 3),
        ("classify", "b.jsonl", 2),
        ("classify", "c.jsonl", 1),
        ("tag", "a.jsonl", 3),
        ("tag", "b.jsonl", 2),
        ("tag", "c.jsonl", 1),
    ]
    stats = emulator.stats()
    assert sorted(b["requests"] for b in stats["batches"]) == [1, 1, 2, 2, 3, 3]
    assert creates(stats, provider) == 6 and stats["duplicate_answers"] == 0


@params(MAIN)
def test_b1_a_file_is_split_further_only_by_the_providers_limits(
    provider: str, emulator: RunningEmulator, project: Path, monkeypatch: Any
) -> None:
    from agac.providers.registry import provider_class

    cls = provider_class(provider)
    monkeypatch.setattr(
        cls,
        "spec",
        dataclasses.replace(cls.spec, batch=dataclasses.replace(cls.spec.batch, max_requests=2)),
    )
    make(project, provider, {"a": 3, "b": 2})

    assert run(project).exit_code == 75
    emulator.advance(120)
    assert run(project).exit_code == 0

    sent = sorted((b.file, b.part, b.request_count) for b in batches(project))
    assert sent == [("a.jsonl", 0, 2), ("a.jsonl", 1, 1), ("b.jsonl", 0, 2)]
    assert creates(emulator.stats(), provider) == 3
