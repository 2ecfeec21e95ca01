"""B13: a batch action with ``hybrid: {live_after}`` goes live before the run's deadline —
its batches cancelled once, its records without an answer sent live, each answered once,
and a batch answer that arrives for a record answered live counted ``hybrid_overlap``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_support import ALL, MODELS, WORKFLOW, events, ops, params, records, rows, run
from click.testing import CliRunner

from agac import api
from agac.cli.main import cli
from agac.emulator.testing import RunningEmulator
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

ONE_ATTEMPT = "{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}"
KEYS = [f"{stem}{i}" for stem, n in (("a", 3), ("b", 2)) for i in range(n)]


def hybrid_project(
    root: Path,
    provider: str,
    *,
    deadline: str = "60s",
    live_after: str = "30s",
    poll_interval: str = "5m",
) -> None:
    """``classify`` (batch, hybrid) -> ``summarize`` (online), two input files."""
    text = (
        "\n".join(
            [
                f"name: {WORKFLOW}",
                "input: {path: data/, id_field: id}",
                f"deadline: {deadline}",
                "actions:",
                "  - name: classify",
                f"    model: {MODELS[provider]}",
                "    run_mode: batch",
                f"    poll_interval: {poll_interval}",
                f"    hybrid: {{live_after: {live_after}}}",
                "    max_tokens: 64",
                f"    retry: {ONE_ATTEMPT}",
                '    prompt: "Classify: {{ source.text }}"',
                "  - name: summarize",
                "    dependencies: [classify]",
                f"    model: {MODELS[provider]}",
                "    max_tokens: 64",
                '    prompt: "Summarize {{ source.text }}: {{ classify.text }}"',
            ]
        )
        + "\n"
    )
    write_project(
        root, text, data={"data/a.jsonl": records("a", 3), "data/b.jsonl": records("b", 2)}
    )


def live_classify_calls(emulator: RunningEmulator) -> dict[str, int]:
    """Per record key, how many live calls of ``classify`` the provider received."""
    out = dict.fromkeys(KEYS, 0)
    for r in emulator.requests():
        if r["op"] != "chat":
            continue
        body = json.dumps(r["body"])
        for key in KEYS:
            if f"Classify: item {key} says" in body:
                out[key] += 1
    return out


@pytest.fixture
def clocked(project: Path) -> Iterator[tuple[ManualClock, Store]]:
    clock = ManualClock()
    st = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    try:
        yield clock, st
    finally:
        st.close()


@params(ALL)
def test_b13_hybrid_meets_deadline(
    provider: str, emulator: RunningEmulator, project: Path, clocked: tuple[ManualClock, Store]
) -> None:
    clock, st = clocked
    hybrid_project(project, provider)
    first = run(project, store=st)
    assert first.exit_code == 75  # both files out as batches, which will not end in time
    [(action, planned)] = first.summary["hybrid"].items()
    assert action == "classify" and planned["switched"] is False

    clock.advance(31)  # past live_after, well before the deadline
    switched = run(project, store=st)
    assert switched.summary["actions"]["classify"]["answered"] == 5  # live, at once
    # the work is done: the run ends though the cancelled batches have not (B8, B13)
    assert switched.exit_code == 0 and switched.summary["state"] == "succeeded"
    [event] = events(project, kind="hybrid_switched")
    assert event["data"]["live"] == 5 and len(event["data"]["batches"]) == 2

    emulator.advance(10)  # the cancels take effect; the batches would end only at 60 s
    ended = run(project, store=st)  # the next run reads what they billed

    assert ended.exit_code == 0 and ended.summary["state"] == "succeeded"
    assert clock.time() < switched.summary["deadline_at"]  # ended before its deadline
    # the instant fixed at admission is the one every later invocation used (R4)
    assert event["data"]["live_at"] == planned["live_at"]
    assert switched.summary["hybrid"] == {
        "classify": {"live_at": planned["live_at"], "switched": True}
    }
    assert {k: r["status"] for k, r in rows(project).items()} == dict.fromkeys(KEYS, "answered")
    assert rows(project, "summarize").keys() == set(KEYS)
    assert live_classify_calls(emulator) == dict.fromkeys(KEYS, 1)
    assert ops(emulator.stats(), provider)["batch.cancel"] == 2
    assert ops(emulator.stats(), provider)["batch.create"] == 2


@params(("anthropic",))
def test_b13_overlap_counted(
    provider: str, emulator: RunningEmulator, project: Path, clocked: tuple[ManualClock, Store]
) -> None:
    clock, st = clocked
    hybrid_project(project, provider)
    first = run(project, store=st)
    assert first.exit_code == 75
    emulator.advance(36)  # the batches are 70% through when they are cancelled
    clock.advance(31)
    assert run(project, store=st).exit_code == 0  # answered live: the run's work is done
    emulator.advance(10)  # cancelled: they end with 2 + 1 answers already made (B8)
    ended = run(project, store=st)  # the next run reads them (decision 0097)

    assert ended.exit_code == 0 and ended.summary["state"] == "succeeded"
    cost = api.cost(first.run_id, project)  # the ledger of the run that sent them
    overlap = [r for r in cost["rows"] if r["origin"] == "hybrid_overlap"]
    assert [(r["action"], r["tier"], r["calls"]) for r in overlap] == [("classify", "batch", 3)]
    assert overlap[0]["cost_usd"] > 0
    text = CliRunner().invoke(cli, ["cost", first.run_id], catch_exceptions=False).output
    assert "hybrid_overlap: answered in a batch cancelled to go live" in text
    classify = list(rows(project).values())
    assert len(classify) == 5 and {r["status"] for r in classify} == {"answered"}
    assert live_classify_calls(emulator) == dict.fromkeys(KEYS, 1)
    assert ops(emulator.stats(), provider)["batch.cancel"] == 2


@pytest.fixture
def cancels_end(emulator: RunningEmulator) -> Iterator[None]:
    """Batches being cancelled end at once (the others run on, far past the test)."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.2):
            for b in emulator.stats()["batches"]:
                if b["status"] in ("cancelling", "canceling"):
                    emulator.advance_batch(b["id"])

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


@params(("openai",))
def test_b13_wait_goes_live_at_live_after_by_itself(
    provider: str, emulator: RunningEmulator, project: Path, cancels_end: None
) -> None:
    """The numbers are examples: deadline 60 s, live after 10 s (time for a loaded machine
    to send both batches first), polls every second."""
    hybrid_project(project, provider, deadline="60s", live_after="10s", poll_interval="1s")

    result = run(project, wait=True)

    assert result.exit_code == 0 and result.summary["state"] == "succeeded"
    [event] = events(project, kind="hybrid_switched")
    [admitted] = events(project, kind="run_admitted")
    live_at = event["data"]["live_at"]
    assert 9.5 < live_at - admitted["created_at"] <= 10  # fixed once, at admission (R4)
    assert event["created_at"] >= live_at
    assert live_classify_calls(emulator) == dict.fromkeys(KEYS, 1)
    assert ops(emulator.stats(), provider)["batch.cancel"] == 2


@params(("openai",))
def test_b13_deadline_while_only_cancelled_batches_are_out_ends_with_the_outcomes(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    """The cancels never take effect within the test: the run ends as soon as every record
    is answered live, before its deadline (10 s here), and leaves the two batches out for
    the next run (decision 0097)."""
    hybrid_project(project, provider, deadline="10s", live_after="4s", poll_interval="1h")

    result = run(project, wait=True)

    assert result.exit_code == 0 and result.summary["state"] == "succeeded"
    assert {k: r["status"] for k, r in rows(project).items()} == dict.fromkeys(KEYS, "answered")
    assert live_classify_calls(emulator) == dict.fromkeys(KEYS, 1)
    assert ops(emulator.stats(), provider)["batch.cancel"] == 2
    assert result.summary["actions"]["classify"]["batches_out"] == 2  # still cancelling
