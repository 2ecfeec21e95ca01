"""Issue 28 item 6 on the run page of `agac serve`: a refusal's category and explanation,
as Anthropic sent them, are the failure's first message (T6)."""

from __future__ import annotations

from pathlib import Path

from service_support import running_service, team_project

from agac import api
from agac.emulator.testing import RunningEmulator

WORKFLOW = """\
name: replies
input: {path: data/, id_field: id}
defaults: {model: anthropic/claude-sonnet-4-5, retry: {max_attempts: 1}}
actions:
  - name: draft
    prompt: "Draft a reply to: {{ source.text }}"
"""


def test_i28_6_the_run_page_shows_the_refusal_category_and_explanation(
    emulator: RunningEmulator, tmp_path: Path
) -> None:
    root = team_project(tmp_path / "team", workflow=WORKFLOW)
    emulator.add_fault(
        {
            "provider": "anthropic",
            "op": "chat",
            "fault": {
                "reply": {
                    "stop": "refusal",
                    "content": None,
                    "stop_details": {
                        "type": "refusal",
                        "category": "bio",
                        "explanation": "This asks for dangerous lab methods.",
                    },
                }
            },
        }
    )
    result = api.run("replies", root)
    assert result.summary["actions"]["draft"]["reasons"] == {"refusal": 2}

    with running_service(root) as service:
        page = service.browser("bob").get(f"/runs/{result.summary['run_id']}").text

    assert "<code>refusal</code>" in page
    assert "category bio: This asks for dangerous lab methods." in page
