"""A project to review in the service (The quality loop: looking at answers where people look):
an llm action with a schema and a check, some failures (the mock's deterministic
failure rate), one record with a word nothing else has; a pilot of it, a full run, and a
second run whose prompt differs (so the two can be compared)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from service_support import team_project

from agac import api

WORKFLOW = """\
name: replies
input: {{path: data/, id_field: id}}
defaults: {{model: mock/m}}
actions:
  - name: classify
    prompt: "{prompt}: {{{{ source.text }}}}"
    retry: {{max_attempts: 1}}
    schema:
      type: object
      properties:
        label: {{type: string, enum: [pos, neg, neutral]}}
        score: {{type: integer}}
      required: [label, score]
      additionalProperties: false
    checks:
      - {{name: not_neg, expr: "answer.label != 'neg'", message: "a negative label", on_fail: flag}}
"""

AGAC_YML = (
    "identity: login\nproviders:\n  mock: {fail_rate: 0.1}\n"
    "prices:\n  mock/m: {input: 2.5, output: 10.0}\n"
)
RECORDS = 60
ZEBRA = "r0042"
"""The one record whose text says "zebra"."""


def workflow(prompt: str = "Classify this message") -> str:
    return WORKFLOW.format(prompt=prompt)


def rows(n: int = RECORDS) -> list[dict[str, str]]:
    return [
        {"id": f"r{i:04d}", "text": "a zebra crossed" if f"r{i:04d}" == ZEBRA else f"message {i}"}
        for i in range(n)
    ]


@dataclass(frozen=True)
class Reviewed:
    root: Path
    pilot: str
    """The pilot's run (a sample of 20)."""
    full: str
    """The full run after the pilot."""
    other: str
    """A run of the same records with another prompt."""


def reviewed_project(root: Path) -> Reviewed:
    """The project with a pilot, a full run and a second variant's run, all ended."""
    team_project(root, workflow=workflow(), rows=rows(), agac_yml=AGAC_YML)
    pilot = api.pilot("replies", root, sample=20, seed=3, progress=False)
    full = api.run("replies", root, progress=False)
    (root / "workflows" / "replies.yml").write_text(
        workflow("Say what this message feels like"), encoding="utf-8"
    )
    other = api.run("replies", root, progress=False)
    assert full.final and other.final and other.run_id != full.run_id
    return Reviewed(root, str(pilot["run_id"]), full.run_id, other.run_id)
