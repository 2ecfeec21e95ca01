"""docs/python.md runs as written: its Python blocks, in order, in one namespace, inside a
running event loop (as a notebook's cells run), against the emulator (README.md, Contributing).

A ``<!-- docs test: ... -->`` line between blocks is where the reader waits: the batches
end there (the emulator's clock moves past their processing time)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from agac.emulator.testing import RunningEmulator

DOC = Path(__file__).resolve().parents[3] / "docs" / "python.md"
PIECE = re.compile(r"```python\n(?P<code>.*?)```|<!-- docs test: (?P<marker>[^>]*)-->", re.DOTALL)


def _pieces() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    return [
        ("code", m["code"]) if m["code"] is not None else ("wait", m["marker"])
        for m in PIECE.finditer(text)
    ]


@pytest.fixture
def emulator(
    emulator: RunningEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> RunningEmulator:
    """The session's emulator (tests/conftest.py), its clock held: batches progress only
    when advanced; the test's folder is the cwd."""
    emulator.hold_clock()
    monkeypatch.chdir(tmp_path)
    return emulator


async def test_the_python_walk_through_runs_as_written(
    emulator: RunningEmulator, tmp_path: Path
) -> None:
    asyncio.get_running_loop()  # cells run inside the kernel's event loop
    pieces = _pieces()
    assert sum(1 for kind, _ in pieces if kind == "code") >= 7
    assert [kind for kind, _ in pieces].count("wait") == 1
    ns: dict[str, Any] = {"__name__": "__docs__"}
    for kind, text in pieces:
        if kind == "wait":
            emulator.advance(3600)
            continue
        exec(compile(text, str(DOC), "exec"), ns)  # noqa: S102 - the documentation's own code

    run, submitted, later = ns["run"], ns["submitted"], ns["later"]
    assert (run.state, run.exit_code) == ("succeeded", 0)
    assert run.cost_usd > 0 and run.actions["classify"]["answered"] == 4
    assert (submitted.state, submitted.exit_code) == ("waiting", 75)
    assert later.run_id == submitted.run_id and later.state == "succeeded"
    df, batch_df = ns["df"], ns["batch_df"]
    assert df["key"].tolist() == ["r1", "r2", "r3", "r4"]
    assert set(df["classify.sentiment"]) <= {"pos", "neg", "neutral"}
    assert len(batch_df) == 6 and set(batch_df["classify#status"]) == {"answered"}
    tiers = {row["tier"] for row in ns["cost"]["rows"]}
    assert "batch" in tiers
    assert (tmp_path / "triage" / "triage.parquet").is_file()
    assert sum(n for _, n in ns["by_sentiment"]) == 4
    assert emulator.stats()["duplicate_answers"] == 0
    # The page's workflows, given as dicts, satisfy the shipped JSON Schema too.
    from jsonschema import Draft7Validator

    from agac.config.schema import workflow_schema

    validator = Draft7Validator(workflow_schema())
    for name in ("workflow", "batch_wf"):
        assert list(validator.iter_errors(ns[name])) == [], name
