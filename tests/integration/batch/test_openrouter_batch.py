"""OpenRouter's Batch API through ``agac run``: requests inline in one create call
(``endpoint`` and ``model`` before ``requests``), results inline with the ended batch; a
refused create, a record left out (B6) and an expired batch (B7); each answer's reported
``usage.cost`` and serving provider in the ledger (ledger = billed), nothing paid twice;
more than 5,000 requests split; a lost create answer found again by its window (B2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from batch_support import counts, rows, run

from agac.emulator.openrouter_batches import MAX_REQUESTS
from agac.providers.registry import provider_spec
from agac.testing import write_project

WORKFLOW = """\
name: bw
input: {path: data/, id_field: id}
defaults:
  model: openrouter/openai/gpt-4o-mini
  run_mode: batch
  max_tokens: 64
  retry: {max_attempts: 1}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
    provider_options: {provider_order: Together}
"""


def _make(project: Path, files: dict[str, int]) -> None:
    data = {
        f"data/{stem}.jsonl": [{"id": f"{stem}{i}", "text": f"item {stem}{i}"} for i in range(n)]
        for stem, n in files.items()
    }
    write_project(project, WORKFLOW, data=data)


def _creates(emulator: Any) -> list[dict[str, Any]]:
    return [e for e in emulator.requests() if e["op"] == "batch.create"]


def _ledger(project: Path) -> list[tuple[int, float, str | None, str]]:
    with sqlite3.connect(project / ".agac" / "agac.db") as db:
        return db.execute(
            "SELECT input_tokens + cached_tokens + output_tokens, cost_usd, served_by, tier "
            "FROM usage WHERE kind = 'llm'"
        ).fetchall()


def test_openrouter_batch_end_to_end_refused_file_missing_record_and_the_ledger(
    emulator: Any, project: Path
) -> None:
    _make(project, {"a": 3, "b": 2})
    emulator.add_fault(
        {
            "provider": "openrouter",
            "op": "batch.create",
            "nth": 1,
            "times": 1,
            "fault": {"batch_drop_records": 1},
        },
        {
            "provider": "openrouter",
            "op": "batch.create",
            "nth": 2,
            "times": 1,
            "fault": {"http": 400, "message": "model does not support batch"},
        },
    )
    first = run(project)
    assert len(_creates(emulator)) == 2
    # b's create refused (B2): the action fails naming it; a's batch stays out (B0).
    assert first.exit_code == 1 and counts(first)["failed"] == 2
    emulator.advance(120)
    second = run(project)  # collects a's batch, sends b again
    assert second.exit_code == 75
    emulator.advance(120)
    third = run(project)  # collects b's
    assert third.exit_code == 1 and third.summary["state"] == "partial"

    classify = rows(project)
    reasons = sorted((r["status"], r["reason"] or "") for r in classify.values())
    # One record left out of a's results (B6, no attempt left), the rest answered.
    assert reasons == [("answered", "")] * 4 + [("failed", "batch_not_returned")]
    assert len(_creates(emulator)) == 3  # a once, b refused once then sent once
    ledger = [row for row in _ledger(project) if row[3] == "batch"]
    assert len(ledger) == 4  # one row per answer billed, none twice
    for tokens, cost, served_by, _ in ledger:
        assert cost == pytest.approx(tokens / 1e6)  # what OpenRouter reported, not a price
        assert served_by == "Together"
    assert emulator.stats()["duplicate_answers"] == 0


def test_openrouter_batch_body_is_inline_endpoint_and_model_first(
    emulator: Any, project: Path
) -> None:
    _make(project, {"a": 2})
    assert run(project).exit_code == 75
    [create] = _creates(emulator)
    assert create["path"] == "/openrouter/api/v1/batches"
    stats = emulator.stats()
    [batch] = [b for b in stats["batches"] if b["provider"] == "openrouter"]
    assert batch["requests"] == 2
    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 0
    assert counts(second)["answered"] == 2


def test_openrouter_expired_batch_reads_nothing(emulator: Any, project: Path) -> None:
    _make(project, {"a": 2})
    emulator.add_fault(
        {
            "provider": "openrouter",
            "op": "batch.create",
            "times": 1,
            "fault": {"batch_end": "expired", "answered": 1},
        }
    )
    assert run(project).exit_code == 75
    emulator.advance(120)
    second = run(project)
    assert second.exit_code == 1
    assert {r["reason"] for r in rows(project).values()} == {"batch_expired"}
    assert emulator.stats()["duplicate_answers"] == 0


def test_openrouter_lost_create_answer_is_found_by_its_window(emulator: Any, project: Path) -> None:
    """The batch was created but its answer lost (B2 unknown): OpenRouter keeps no key of
    ours, so the batch is found among those created in the submission's window with its
    request count, adopted, and never created twice."""
    _make(project, {"a": 3})
    emulator.add_fault(
        {
            "provider": "openrouter",
            "op": "batch.create",
            "times": 1,
            "fault": {"http": 500, "after_create": True},
        }
    )
    run(project)
    emulator.advance(120)
    again = run(project)
    emulator.advance(120)
    last = run(project) if again.exit_code == 75 else again
    assert last.exit_code == 0, last.notes
    assert len(_creates(emulator)) == 1
    assert counts(last)["answered"] == 3
    assert emulator.stats()["duplicate_answers"] == 0


def test_openrouter_batch_of_more_than_5000_is_refused_by_openrouter() -> None:
    """The spec's limit is OpenRouter's: the engine splits a file above it."""
    spec = provider_spec("openrouter")
    assert spec.batch is not None and spec.batch.max_requests == MAX_REQUESTS == 5000
