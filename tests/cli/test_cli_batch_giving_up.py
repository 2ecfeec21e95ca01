"""What happens to batches out when a person ends a run early, through the real process
and the emulator (issue 12 item 7): ``agac cancel`` then ``agac run`` does what the
message says (starts over on the cancelled units), and ``--fresh`` that cannot cancel an
old batch at the provider records it instead of calling it "abandoned" silently."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """\
name: wf
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, run_mode: batch}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""
DATA = {
    "data/a.jsonl": [{"id": i, "text": f"a{i}"} for i in range(3)],
    "data/b.jsonl": [{"id": 10 + i, "text": f"b{i}"} for i in range(3)],
}


def test_cancel_then_run_starts_over_on_the_cancelled_units(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    write_project(tmp_path, WF, data=DATA)
    emulator.hold_clock()  # the batches move only when advanced, however slow the machine
    env = emulator.env()
    assert agac("run", "wf", cwd=tmp_path, env=env).code == 75  # two batches out

    cancelled = agac("cancel", "wf", "--json", cwd=tmp_path, env=env)
    assert cancelled.code == 0, cancelled  # the cancel did what was asked
    doc = cancelled.json()
    assert doc["state"] == "cancelled"
    assert doc["actions"]["ask"]["reasons"] == {"batch_cancelled": 6}
    assert doc["next"] == "agac run wf"

    again = agac("run", "wf", "--json", cwd=tmp_path, env=env)
    assert again.code == 75, again  # it sent the cancelled units again, in new batches
    assert again.json()["actions"]["ask"]["pending"] == 6
    emulator.advance(120)
    done = agac("run", "wf", "--json", cwd=tmp_path, env=env)
    assert done.code == 0, done
    assert done.json()["actions"]["ask"]["answered"] == 6
    assert emulator.stats()["requests"]["openai"]["batch.create"] == 4


def test_fresh_that_cannot_cancel_an_old_batch_records_it(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    write_project(tmp_path, WF, data=DATA)
    emulator.hold_clock()  # the batches move only when advanced, however slow the machine
    env = emulator.env()
    assert agac("run", "wf", cwd=tmp_path, env=env).code == 75
    first_run = agac("runs", "list", "--json", cwd=tmp_path, env=env).json()[0]["run_id"]
    emulator.add_fault(
        {
            "provider": "openai",
            "op": "batch.cancel",
            "fault": {"http": 500, "message": "cancel is unavailable"},
        }
    )

    fresh = agac("run", "wf", "--fresh", cwd=tmp_path, env=env)

    assert fresh.code == 75, fresh
    assert "could not cancel batch" in fresh.err and "may still run and be billed" in fresh.err
    assert "abandoned batch" not in fresh.err
    batches = agac("batch", "list", "wf", "--json", cwd=tmp_path, env=env).json()
    old = [b for b in batches if b["run_id"] == first_run]
    assert len(old) == 2 and {b["state"] for b in old} == {"not_cancelled"}
    assert all("cancel is unavailable" in b["error"] for b in old)
    text = agac("batch", "list", "wf", cwd=tmp_path, env=env)
    assert "not_cancelled" in text.out and "may still run and be billed" in text.out
    events = agac("events", first_run, "--json", cwd=tmp_path, env=env).json()
    kinds = [e["kind"] for e in (events["events"] if isinstance(events, dict) else events)]
    assert kinds.count("batch_not_cancelled") == 2


def test_fresh_over_ended_batches_shows_what_they_billed_in_agac_cost(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    write_project(tmp_path, WF, data=DATA)
    emulator.hold_clock()  # the batches move only when advanced, however slow the machine
    env = emulator.env()
    assert agac("run", "wf", cwd=tmp_path, env=env).code == 75
    first_run = agac("runs", "list", "--json", cwd=tmp_path, env=env).json()[0]["run_id"]
    emulator.advance(120)  # both batches ended: the provider billed 6 answers

    fresh = agac("run", "wf", "--fresh", cwd=tmp_path, env=env)

    assert fresh.code == 75, fresh
    assert fresh.err.count("the provider billed 3 answers") == 2, fresh.err
    cost = agac("cost", first_run, "--json", cwd=tmp_path, env=env).json()
    [unread] = [r for r in cost["rows"] if r["origin"] == "unread"]
    assert (unread["calls"], unread["estimated"]) == (6, 0) and cost["cost_usd"] > 0
    text = agac("cost", first_run, cwd=tmp_path, env=env)
    assert "unread: billed by the provider in a batch agac did not read" in text.out
    events = agac("events", first_run, "--json", cwd=tmp_path, env=env).json()
    listed = events["events"] if isinstance(events, dict) else events
    assert sorted(e["data"]["billed_unread"] for e in listed if e["kind"] == "batch_abandoned") == [
        3,
        3,
    ]


def test_fresh_shows_batch_abandoned_in_status_records_show_and_the_events(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    write_project(tmp_path, WF, data=DATA)
    emulator.hold_clock()  # the batches move only when advanced, however slow the machine
    env = emulator.env()
    assert agac("run", "wf", cwd=tmp_path, env=env).code == 75  # two batches out
    first_run = agac("runs", "list", "--json", cwd=tmp_path, env=env).json()[0]["run_id"]

    assert agac("run", "wf", "--fresh", cwd=tmp_path, env=env).code == 75

    status = agac("status", first_run, "--json", cwd=tmp_path, env=env).json()
    assert status["actions"]["ask"]["reasons"] == {"batch_abandoned": 6}
    text = agac("status", first_run, cwd=tmp_path, env=env)
    assert "batch_abandoned" in text.out
    shown = agac(
        "records",
        "show",
        "0",
        "--workflow",
        "wf",
        "--run",
        first_run,
        "--json",
        cwd=tmp_path,
        env=env,
    ).json()
    [ask] = shown["actions"]
    assert (ask["status"], ask["reason"]) == ("failed", "batch_abandoned")
    assert "abandoned by --fresh" in ask["detail"] and "a.jsonl" in ask["detail"]
    human = agac(
        "records", "show", "0", "--workflow", "wf", "--run", first_run, cwd=tmp_path, env=env
    )
    assert "batch_abandoned" in human.out
    events = agac("events", first_run, "--json", cwd=tmp_path, env=env).json()
    listed = events["events"] if isinstance(events, dict) else events
    abandoned = [e["data"] for e in listed if e["kind"] == "batch_abandoned"]
    assert sorted((d["file"], d["units"]) for d in abandoned) == [("a.jsonl", 3), ("b.jsonl", 3)]


def test_i35_14_fresh_over_a_batch_whose_status_cannot_be_read_counts_its_worst_case(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    """The provider is unreachable for the old batches (neither their status nor a cancel
    gets through): ``--fresh`` gives them up and counts every request at its worst case."""
    write_project(tmp_path, WF, data=DATA)
    emulator.hold_clock()  # the batches move only when advanced, however slow the machine
    env = emulator.env()
    assert agac("run", "wf", cwd=tmp_path, env=env).code == 75
    first_run = agac("runs", "list", "--json", cwd=tmp_path, env=env).json()[0]["run_id"]
    for op in ("batch.get", "batch.cancel"):
        emulator.add_fault(
            {"provider": "openai", "op": op, "fault": {"http": 403, "message": "unreachable"}}
        )

    fresh = agac("run", "wf", "--fresh", cwd=tmp_path, env=env)

    assert fresh.code == 75, fresh
    assert fresh.err.count("its status could not be read") == 2, fresh.err
    assert "counted at its worst case: 3 answers" in fresh.err
    cost = agac("cost", first_run, "--json", cwd=tmp_path, env=env).json()
    [unread] = [r for r in cost["rows"] if r["origin"] == "unread"]
    assert (unread["calls"], unread["estimated"]) == (6, 6) and cost["cost_usd"] > 0
    events = agac("events", first_run, "--json", cwd=tmp_path, env=env).json()
    listed = events["events"] if isinstance(events, dict) else events
    given_up = [e for e in listed if e["kind"] == "batch_not_cancelled"]
    assert [e["data"]["billed_unread"] for e in given_up] == [3, 3]
    assert all("unreachable" in e["data"]["status_unreadable"] for e in given_up)
