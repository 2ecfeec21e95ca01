"""DeepSeek's prices by the hour, end to end: the ledger prices each call at the time it
was made (the store's clock, moved by the test), so the same call on either side of a
window's start costs differently; ``agac plan`` names the cheaper window and when it
opens (the API's document and the CLI's line)."""

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
from agac.store.repository import Store
from agac.testing import ManualClock, write_project

WORKFLOW = """\
name: hours
input: {path: data/, id_field: id}
defaults:
  model: deepseek/deepseek-chat
  max_tokens: 64
  timeout: 10s
actions:
  - name: ask
    prompt: "Answer: {{ source.text }}"
"""


def _at(hour: int, minute: int) -> float:
    return datetime(2026, 12, 4, hour, minute, tzinfo=UTC).timestamp()


def _project(root: Path) -> None:
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
    write_project(
        root, WORKFLOW, agac_yml=agac_yml, data={"data/q.jsonl": [{"id": "q0", "text": "hi"}]}
    )


@pytest.fixture
def clocked(project: Path) -> Any:
    clock = ManualClock()
    (project / ".agac").mkdir(exist_ok=True)
    store = Store(f"sqlite:///{project}/.agac/agac.db", clock=clock)
    yield clock, store
    store.close()


def _move_to(clock: ManualClock, when: float) -> None:
    clock.advance(when - clock.time())


def test_deepseek_calls_either_side_of_a_window_start_are_priced_differently(
    emulator: Any, project: Path, clocked: Any
) -> None:
    clock, store = clocked
    _project(project)
    _move_to(clock, _at(16, 20))  # ten minutes before off-peak opens
    before = api.run("hours", project, store=store)
    assert before.exit_code == 0
    _move_to(clock, _at(16, 40))  # ten minutes after
    after = api.run("hours", project, store=store, fresh=True)
    assert after.exit_code == 0
    peak = api.cost(before.summary["run_id"], project, store=store)
    off = api.cost(after.summary["run_id"], project, store=store)
    assert peak["cost_usd"] > 0
    # The same request, the same usage (the emulator answers alike): half the price.
    assert off["cost_usd"] == pytest.approx(peak["cost_usd"] / 2, rel=1e-6)


def test_deepseek_plan_names_the_cheaper_window(emulator: Any, project: Path, clocked: Any) -> None:
    clock, store = clocked
    _project(project)
    _move_to(clock, _at(12, 0))
    doc = api.plan("hours", project, store=store)
    hours = doc["actions"]["ask"]["cheaper_hours"]
    assert hours["name"] == "off-peak" and hours["hours"] == "16:30-00:30 UTC"
    assert hours["opens_at"] == _at(16, 30)
    assert hours["opens_in_s"] == pytest.approx(4.5 * 3600, abs=60)
    assert hours["online_usd_then"] == pytest.approx(hours["online_usd_now"] / 2, rel=1e-3)
    # The estimate itself is the price now (peak), not the base of some other hour.
    assert doc["actions"]["ask"]["cost_usd"]["online"] == pytest.approx(
        hours["online_usd_now"],
        abs=1e-6,  # the plan's costs are rounded to 6 decimals
    )
    printing = click.Command("plan", callback=lambda: print_plan(doc))  # as `agac plan` does
    shown = CliRunner().invoke(printing)
    assert "cheaper off-peak, 16:30-00:30 UTC, opening in 4 h 30 min" in shown.output
    _move_to(clock, _at(17, 0))  # inside the window: nothing cheaper ahead
    assert "cheaper_hours" not in api.plan("hours", project, store=store)["actions"]["ask"]
