"""A crash between an answer and its judge (The quality loop: judges): the run is SIGKILLed
right after a judge's verdict is durable and before the unit it grades is. The verdict
survives and is never asked again; the answer it graded was not yet stored, so it is
asked again, and its first asking is in the ledger as a call of unknown outcome (S1: at
least every call the provider received, at most that plus the dispatch marks' width)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

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
        on_fail: flag
"""


def test_i38_a_crash_after_a_verdict_asks_no_judge_twice(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "text": f"item {i}"} for i in range(3)]
    write_project(tmp_path, WF, workflow_file="jcrash.yml", data={"data/a.jsonl": rows})
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": "judge_graded:1"}, "run", "jcrash")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        assert emu.stats()["requests"]["openai"]["chat"] == 2  # r0's answer and its verdict

        done = agac(tmp_path, env, "run", "jcrash", "--json")

        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["actions"]["label"]["answered"] == 3
        assert summary["checks"]["label"]["judged"]["passed"] == 3
        # r0's answer asked twice (the first lost with the process), each answer judged
        # once: 4 answers and 3 verdicts.
        chats = [e for e in emu.requests() if e["op"] == "chat"]
        judged = [c for c in chats if "Is {" in json.dumps(c["body"])]
        assert (len(chats), len(judged)) == (7, 3)
        calls = {r["origin"]: r["calls"] for r in api.cost("jcrash", tmp_path)["rows"]}
        assert (calls["call"], calls["judge"]) == (3, 3)  # each verdict paid for once
        assert 4 <= calls["call"] + calls["unknown"] <= 3 + 3  # r0's lost asking counted
