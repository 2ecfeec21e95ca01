"""Issue 35 item 8, "Runs that wait for nothing": once every unit of a hybrid action is
answered live, the run ends, though the provider is still cancelling its batches (the
emulator keeps them cancelling); the next run of the workflow reconciles them into the
ledger once they have ended (decision 0097). ``hybrid`` is accepted in ``defaults``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_support import WORKFLOW, events, params, rows, run
from test_b13_hybrid import KEYS, hybrid_project, live_classify_calls

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

ORIGIN = {"anthropic": "hybrid_overlap", "openai": "unread"}
"""How each provider's cancelled batch is counted: Anthropic returns what it answered
before the cancel (read, not used); OpenAI's cancelled batch is not read (B7), what it
billed is counted from its usage."""


@pytest.fixture
def clocked(project: Path) -> Iterator[tuple[ManualClock, Store]]:
    clock = ManualClock()
    st = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    try:
        yield clock, st
    finally:
        st.close()


def open_batches(st: Store) -> list[str]:
    return [b.state for b in st.list_batches(WORKFLOW, tenants=None, open_only=True)]


@params(("anthropic", "openai"))
def test_i35_8_the_run_ends_when_its_work_is_done_and_the_next_run_reconciles(
    provider: str, emulator: RunningEmulator, project: Path, clocked: tuple[ManualClock, Store]
) -> None:
    clock, st = clocked
    hybrid_project(project, provider)
    sent = run(project, store=st)
    assert sent.exit_code == 75
    emulator.advance(36)  # the batches are well through when they are cancelled
    emulator.add_fault(
        {"provider": provider, "op": "batch.get", "fault": {"batch_stuck_cancelling": True}}
    )
    clock.advance(31)  # past live_after; the deadline is 29 s away and is never reached

    switched = run(project, store=st)

    assert switched.exit_code == 0 and switched.summary["state"] == "succeeded"
    assert switched.run_id == sent.run_id
    first = sent.run_id  # what the batches billed is the ledger of the run that sent them
    assert clock.time() < switched.summary["deadline_at"]
    assert {k: r["status"] for k, r in rows(project).items()} == dict.fromkeys(KEYS, "answered")
    assert rows(project, "summarize").keys() == set(KEYS)
    assert switched.summary["actions"]["classify"]["batches_out"] == 2  # still cancelling
    assert len(open_batches(st)) == 2

    # still cancelling at the provider: the next run leaves them, and ends at once too
    again = run(project, store=st)
    assert again.exit_code == 0 and again.summary["state"] == "succeeded"
    assert len(open_batches(st)) == 2
    assert not [r for r in api.cost(first, project)["rows"] if r["origin"] == ORIGIN[provider]]

    emulator.clear_faults()  # the cancels take effect
    emulator.advance(10)
    reconciled = run(project, store=st)

    assert reconciled.exit_code == 0 and reconciled.summary["state"] == "succeeded"
    assert open_batches(st) == []
    billed = [r for r in api.cost(first, project)["rows"] if r["origin"] == ORIGIN[provider]]
    assert [(r["action"], r["tier"]) for r in billed] == [("classify", "batch")]
    assert billed[0]["calls"] == 3 and billed[0]["cost_usd"] > 0
    assert live_classify_calls(emulator) == dict.fromkeys(KEYS, 1)  # nothing sent again
    if provider == "anthropic":
        assert {e["data"].get("given_up") for e in events(project, kind="collected")} == {True}
    # a later run finds nothing left to reconcile: nothing is counted twice
    run(project, store=st)
    again_billed = [r for r in api.cost(first, project)["rows"] if r["origin"] == ORIGIN[provider]]
    assert again_billed == billed


def test_i35_8_hybrid_is_accepted_in_defaults(emulator: RunningEmulator, project: Path) -> None:
    write_project(
        project,
        """
name: wf
input: {path: data/, id_field: id}
deadline: 1h
defaults: {model: openai/gpt-4o-mini, hybrid: {live_after: 30m}}
actions:
  - {name: batched, run_mode: batch, prompt: 'A {{ source.text }}'}
  - {name: online, prompt: 'B {{ source.text }}'}
""",
        data={"data/a.jsonl": [{"id": "r1", "text": "x"}]},
    )
    workflow = api.load_workflow("wf", project)
    live_after = {a.name: a.live_after for a in workflow.actions}
    assert live_after == {"batched": 1800.0, "online": None}
