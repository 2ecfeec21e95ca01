"""``run_mode: auto`` waits for DeepSeek's cheaper hours when the run's deadline allows:
decided at admission (the next cheaper hours open later, and the action's calls —
``ceil(units / max_concurrency) * timeout`` — fit before the deadline and before those
hours close), the start instant stored in the run's settings, nothing sent before it; the
calls made after it are priced at the window's rates. Time is the store's injected clock,
moved by the test: no real sleeps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import e2e_support
import pytest
from click.testing import CliRunner

from agac import api
from agac.cli.render import print_plan
from agac.cli.report import print_summary
from agac.cli.tables import when
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

WORKFLOW = """\
name: hours
input: {path: data/, id_field: id}
DEADLINE
defaults:
  model: deepseek/deepseek-chat
  max_tokens: 64
  timeout: 10s
actions:
  - name: ask
    run_mode: auto
OPTOUT    prompt: "Answer: {{ source.text }}"
"""
OPENS = 16 * 3600 + 30 * 60  # off-peak opens 16:30 UTC
SPAN = 10  # two records, max_concurrency 16, timeout 10 s: one wave of 10 s


def _at(hour: int, minute: int, second: int = 0) -> float:
    return datetime(2026, 12, 4, hour, minute, second, tzinfo=UTC).timestamp()


def _project(root: Path, deadline: str | None, *, opt_out: bool = False) -> None:
    chosen = e2e_support.TRANSPORT
    agac_yml = (
        f"providers:\n  deepseek: {{transport: {chosen}}}\n"
        "prices:\n"
        "  deepseek/deepseek-chat:\n"
        "    input: 0.27\n"
        "    output: 1.10\n"
        "    windows:\n"
        '      - {name: off-peak, utc: "16:30-00:30", input: 0.135, output: 0.55}\n'
    )
    workflow = WORKFLOW.replace("DEADLINE", f"deadline: {deadline}" if deadline else "")
    workflow = workflow.replace("OPTOUT", "    wait_for_cheaper: false\n" if opt_out else "")
    rows = [{"id": f"q{i}", "text": f"hi {i}"} for i in range(2)]
    write_project(root, workflow, agac_yml=agac_yml, data={"data/q.jsonl": rows})


@pytest.fixture
def clocked(project: Path) -> Any:
    clock = ManualClock()
    (project / ".agac").mkdir(exist_ok=True)
    store = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    yield clock, store
    store.close()


def _move_to(clock: ManualClock, when_: float) -> None:
    clock.advance(when_ - clock.time())


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [e for e in emulator.requests() if e["op"] == "chat"]


def _settings(store: Store, run_id: str) -> dict[str, float]:
    run = store.get_run(run_id)
    assert run is not None
    return run.settings.start_at


def test_i39_deepseek_auto_waits_when_the_deadline_allows(
    emulator: Any, project: Path, clocked: Any
) -> None:
    clock, store = clocked
    _project(project, "5h")  # 12:00 + 5 h = 17:00: the calls fit after 16:30
    _move_to(clock, _at(12, 0))
    held = api.run("hours", project, store=store)
    assert held.exit_code == 75  # waiting, like a run waiting on its batches
    run_id = held.summary["run_id"]
    assert _settings(store, run_id) == {"ask": _at(16, 30)}
    assert _chats(emulator) == []  # nothing sent before the window
    report = api.status(run_id, project, store=store)
    assert report["cheaper_starts"] == {"ask": _at(16, 30)}
    shown = CliRunner().invoke(click.Command("s", callback=lambda: print_summary(report)))
    assert f"ask: run_mode auto waits for the cheaper hours, starting {when(_at(16, 30))}" in (
        shown.output
    )
    _move_to(clock, _at(16, 29, 59))  # one second early: still held
    assert api.run("hours", project, store=store).exit_code == 75
    assert _chats(emulator) == []
    _move_to(clock, _at(16, 30))  # the window opens: the same run sends its calls
    done = api.run("hours", project, store=store)
    assert done.exit_code == 0 and done.summary["run_id"] == run_id
    assert len(_chats(emulator)) == 2
    # Once the instant has passed, status says the calls go in the cheaper hours.
    after = api.status(run_id, project, store=store)
    assert "cheaper_starts" not in after and after["cheaper_started"] == {"ask": _at(16, 30)}
    shown = CliRunner().invoke(click.Command("s", callback=lambda: print_summary(after)))
    assert f"ask: run_mode auto sends in the cheaper hours, since {when(_at(16, 30))}" in (
        shown.output
    )
    assert "waits for the cheaper hours" not in shown.output
    # Priced at the window's rates: half what the same calls cost at peak.
    _project(project, "5h", opt_out=True)
    _move_to(clock, _at(12, 0))
    peak = api.run("hours", project, store=store, fresh=True)
    assert peak.exit_code == 0 and len(_chats(emulator)) == 4
    off = api.cost(run_id, project, store=store)["cost_usd"]
    at_peak = api.cost(peak.summary["run_id"], project, store=store)["cost_usd"]
    assert at_peak > 0 and off == pytest.approx(at_peak / 2, abs=1e-6)  # rounded to 1e-6


@pytest.mark.parametrize(
    ("deadline", "waits"),
    [
        (f"{OPENS - 12 * 3600 + SPAN}s", True),  # the calls end exactly at the deadline
        (f"{OPENS - 12 * 3600 + SPAN - 1}s", False),  # one second short
        ("4h", False),  # the deadline comes before the window opens
    ],
)
def test_i39_deepseek_auto_waits_exact_boundary(
    emulator: Any, project: Path, clocked: Any, deadline: str, waits: bool
) -> None:
    clock, store = clocked
    _project(project, deadline)
    _move_to(clock, _at(12, 0))
    result = api.run("hours", project, store=store)
    start = _settings(store, result.summary["run_id"])
    if waits:
        assert result.exit_code == 75 and start == {"ask": _at(16, 30)}
        assert _chats(emulator) == []
    else:
        assert result.exit_code == 0 and start == {}
        assert len(_chats(emulator)) == 2


@pytest.mark.parametrize("deadline", [None, "5h"])
def test_i39_deepseek_auto_waits_not_without_deadline_or_opted_out(
    emulator: Any, project: Path, clocked: Any, deadline: str | None
) -> None:
    """No deadline: nothing bounds the wait, so auto does not wait; with one, an action
    that says ``wait_for_cheaper: false`` does not either."""
    clock, store = clocked
    _project(project, deadline, opt_out=deadline is not None)
    _move_to(clock, _at(12, 0))
    result = api.run("hours", project, store=store)
    assert result.exit_code == 0 and len(_chats(emulator)) == 2
    assert _settings(store, result.summary["run_id"]) == {}


def test_i39_deepseek_auto_waits_kept_on_resume(emulator: Any, project: Path, clocked: Any) -> None:
    """The start instant is stored at admission: a resumed run keeps it even when the
    prices it was decided from changed since (no cheaper hours any more)."""
    clock, store = clocked
    _project(project, "5h")
    _move_to(clock, _at(12, 0))
    run_id = api.run("hours", project, store=store).summary["run_id"]
    agac_yml = project / "agac.yml"
    agac_yml.write_text(agac_yml.read_text().split("    windows:")[0])  # calendar gone
    _move_to(clock, _at(13, 0))
    again = api.run("hours", project, store=store)
    assert again.exit_code == 75 and again.summary["run_id"] == run_id
    assert _settings(store, run_id) == {"ask": _at(16, 30)} and _chats(emulator) == []


def test_i39_deepseek_auto_waits_plan_says_so(emulator: Any, project: Path, clocked: Any) -> None:
    clock, store = clocked
    _project(project, "5h")
    _move_to(clock, _at(12, 0))
    doc = api.plan("hours", project, store=store)
    hours = doc["actions"]["ask"]["cheaper_hours"]
    assert hours["auto_waits"] is True
    assert hours["auto_saves_usd"] == pytest.approx(hours["online_usd_now"] / 2, rel=1e-3)
    shown = CliRunner().invoke(click.Command("plan", callback=lambda: print_plan(doc)))
    assert "ask: run_mode auto will wait for them (the deadline allows), saving about $" in (
        shown.output
    )
    _project(project, "4h")  # the deadline does not allow it
    hours = api.plan("hours", project, store=store)["actions"]["ask"]["cheaper_hours"]
    assert hours["auto_waits"] is False and "auto_saves_usd" not in hours
