"""A crash between an answer and its judge (The quality loop: judges): the run is SIGKILLed
right after an answer to be judged is durable (``answer_kept``), or right after its
judge's verdict is (``judge_graded``), before the unit's outcome is. Nothing is lost and
nothing is asked twice: the answer is stored before its judge is asked, so the next run
reuses it and asks the judge once (or reads its stored verdict). The unit was under a
dispatch mark when the process died, so the ledger may count its call once more as a
call of unknown outcome, priced at its stored twin (S1: at least every call the provider
received, at most that plus the marks' width)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: jcrash
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_tokens: 64, max_concurrency: 1, retry: {max_attempts: 2}}
actions:
  - name: label
    prompt: "Label {{ source.text }}"
    schema:
      type: object
      properties: {label: {type: string}}
      required: [label]
      additionalProperties: false
    checks:
      - name: judged
        judge: {model: openai/gpt-4o-mini, prompt: "Is {{ answer | tojson }} right for {{ source.text }}?"}
        on_fail: %s
"""


@pytest.mark.parametrize("on_fail", ["flag", "repair"])
@pytest.mark.parametrize(
    ("point", "before"),
    [("answer_kept:1", 1), ("judge_graded:1", 2)],  # r0's answer (and its verdict)
)
def test_i38_2_a_crash_between_an_answer_and_its_judge_asks_nothing_twice(
    tmp_path: Path, point: str, before: int, on_fail: str
) -> None:
    """With a ``repair`` check too: the answer is kept before its judge, and a later run
    judges (and would repair) the kept answer instead of asking it again."""
    rows = [{"id": f"r{i}", "text": f"item {i}"} for i in range(3)]
    write_project(tmp_path, WF % on_fail, workflow_file="jcrash.yml", data={"data/a.jsonl": rows})
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "jcrash")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert emu.stats()["requests"]["openai"]["chat"] == before

        done = agac(tmp_path, env, "run", "jcrash", "--json")

        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["actions"]["label"]["answered"] == 3
        assert summary["checks"]["label"]["judged"]["passed"] == 3
        # Each answer asked once, each judged once: 3 answers and 3 verdicts in all.
        chats = [e for e in emu.requests() if e["op"] == "chat"]
        judged = [c for c in chats if "Is {" in json.dumps(c["body"])]
        asked = [json.dumps(c["body"]) for c in chats if c not in judged]
        assert (len(asked), len(judged)) == (3, 3)
        assert sum("item 0" in a for a in asked) == 1  # r0's answer was not asked again
        calls = {r["origin"]: r["calls"] for r in api.cost("jcrash", tmp_path)["rows"]}
        assert (calls["call"], calls["judge"]) == (3, 3)  # each paid for once, kept once
        assert 3 <= calls["call"] + calls.get("unknown", 0) <= 3 + 3  # S1: + the marks


BATCH_WF = """
name: bcrash
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_tokens: 64, run_mode: batch}
actions:
  - name: label
    prompt: "Label {{ source.text }}"
    schema:
      type: object
      properties: {label: {type: string}}
      required: [label]
      additionalProperties: false
    checks:
      - name: judged
        judge: {model: openai/gpt-4o-mini, prompt: "Is {{ answer | tojson }} right for {{ source.text }}?"}
        on_fail: flag
"""


@pytest.mark.parametrize(
    ("point", "run"),
    [
        ("after_submit:1", 2),  # the judges' batch accepted, not yet recorded here
        ("before_submit:1", 2),  # the judges' intents stored, nothing sent
        ("before_collected:1", 3),  # the verdicts read and stored, the batch not marked
    ],
)
def test_i38_1_a_crash_in_the_judges_batch_round_asks_and_pays_nothing_twice(
    tmp_path: Path, point: str, run: int
) -> None:
    rows = [{"id": f"r{i}", "text": f"item {i}"} for i in range(3)]
    write_project(tmp_path, BATCH_WF, workflow_file="bcrash.yml", data={"data/a.jsonl": rows})
    with RunningEmulator() as emu:
        env = emu.env()
        for n in range(1, 8):
            extra = {"AGAC_CRASH_AT": point} if n == run else {}
            got = agac(tmp_path, {**env, **extra}, "run", "bcrash", "--json")
            if n == run:
                assert got.returncode == -signal.SIGKILL, got.stderr
                continue
            if got.returncode != 75:
                break
            emu.advance(120)
        assert got.returncode == 0, got.stderr
        summary = json.loads(got.stdout)
        assert summary["actions"]["label"]["answered"] == 3
        assert summary["checks"]["label"]["judged"]["passed"] == 3
        stats = emu.stats()["requests"]["openai"]
        # One batch of answers and one of judges, each created once; nothing live.
        assert stats["batch.create"] == 2 and stats.get("chat", 0) == 0
        origins: dict[str, int] = {}
        for r in api.cost("bcrash", tmp_path)["rows"]:
            origins[r["origin"]] = origins.get(r["origin"], 0) + r["calls"]
        assert origins == {"call": 3, "judge": 3}  # each paid for once
