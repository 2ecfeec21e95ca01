"""The newcomer's path: ``agac plan`` counts what a run will send. Records whose requests
are identical are one request in the plan (its ``shared`` column counts the others), and a
run then makes exactly the calls the plan counted (S5)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import agac

from agac.testing import write_project

WF = """\
name: wf
input: {path: data/in.jsonl}
defaults: {model: mock/m, max_tokens: 16}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""
TEXTS = ["alpha", "beta", "alpha", "alpha", "gamma", "beta"]
"""Six records, three distinct requests."""


def test_i43_7_plan_counts_each_identical_request_once_and_the_run_sends_that(
    tmp_path: Path,
) -> None:
    write_project(tmp_path, WF, data={"data/in.jsonl": [{"text": t} for t in TEXTS]})

    doc = agac("plan", "wf", "--json", cwd=tmp_path).json()
    classify = doc["actions"]["classify"]
    assert (classify["units"], classify["requests"], classify["shared"]) == (6, 3, 3)
    assert (doc["requests"], doc["shared"]) == (3, 3)
    text = agac("plan", "wf", cwd=tmp_path)
    assert text.code == 0, text
    header = text.out.splitlines()[1].split()
    row = text.out.splitlines()[3].split()
    assert dict(zip(header[:7], row[:7], strict=True))["shared"] == "3"
    assert "classify: 3 of its requests are identical to another one" in text.out
    assert "3 requests, 0 answers reused, 3 identical requests sent once and shared" in text.out

    ran = agac("run", "wf", "--json", cwd=tmp_path)
    assert ran.code == 0, ran
    done = json.loads(ran.out)["actions"]["classify"]
    assert (done["answered"], done["calls"], done["reused"]) == (6, classify["requests"], 3)

    again = agac("plan", "wf", "--json", cwd=tmp_path).json()["actions"]["classify"]
    assert (again["requests"], again["reusable"], again["shared"]) == (0, 6, 0)
