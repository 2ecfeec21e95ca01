"""Issue 28 in batches: result lines in the shapes real servers send, read by the same
rules as live answers (the emulator's ``reply`` fault on ``batch.create`` items)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batch_support import counts, make, ops, rows, run

from agac import api
from agac.emulator.testing import RunningEmulator

PAUSED = {"stop": "pause_turn", "blocks": ["preamble", "server_tool_use"]}


def _item_fault(provider: str, custom_id: str, fault: dict[str, Any]) -> dict[str, Any]:
    return {
        "provider": provider,
        "op": "batch.create",
        "match": {"custom_id": custom_id},
        "fault": fault,
    }


def _collect(emulator: RunningEmulator, project: Path) -> Any:
    assert run(project).exit_code == 75
    emulator.advance(120)
    return run(project)


def test_i28_2_a_turn_paused_in_a_batch_is_continued_live_never_the_partial_text(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "anthropic", {"a": 2}, summarize=False)
    emulator.add_fault(
        {"provider": "anthropic", "op": "batch.create", "times": 1, "fault": {"reply": PAUSED}}
    )

    result = _collect(emulator, project)

    assert counts(result)["answered"] == 2
    assert ops(emulator.stats(), "anthropic").get("chat") == 2  # each paused item, live
    for key, row in rows(project).items():
        assert row["status"] == "answered" and row["output"]["label"] in ("a", "b", "c"), key
        attempts = [a for a in api.record_session(key, project)["actions"][0]["attempts"]]
        assert [a["tier"] for a in attempts] == ["batch", "live"]
        assert "paused in the batch, continued live" in attempts[0]["error"]


def test_i28_2_a_paused_batch_turn_that_cannot_be_continued_fails(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "anthropic", {"a": 1}, summarize=False)
    emulator.add_fault(
        {"provider": "anthropic", "op": "batch.create", "times": 1, "fault": {"reply": PAUSED}},
        {"provider": "anthropic", "op": "chat", "fault": {"http": 400}},
    )

    result = _collect(emulator, project)

    assert counts(result)["reasons"] == {"unexpected_stop": 1}
    (row,) = rows(project).values()
    assert "continuing it live failed" in row["detail"] and "I'll search" not in str(row["output"])


def test_i28_4_a_batch_answer_keeps_the_provider_request_id(
    emulator: RunningEmulator, project: Path
) -> None:
    make(project, "openai", {"a": 2}, summarize=False)

    _collect(emulator, project)

    for key in rows(project):
        (attempt,) = api.record_session(key, project)["actions"][0]["attempts"]
        assert attempt["tier"] == "batch" and attempt["request_id"].startswith("req_")


#: The issue's table, per batch provider: what the item's answer is bent to, and the
#: outcome agac must record (reason, parts of the detail).
TABLE: dict[str, list[tuple[dict[str, Any], str, tuple[str, ...]]]] = {
    "anthropic": [
        (
            {"reply": {"stop": "tool_use", "blocks": ["text", "tool_use"]}},
            "unexpected_stop",
            ("'tool_use'", "did not ask for"),
        ),
        ({"reply": {"stop": "compaction_2027"}}, "unexpected_stop", ("'compaction_2027'",)),
        (
            {
                "reply": {
                    "stop": "refusal",
                    "content": None,
                    "stop_details": {
                        "type": "refusal",
                        "category": "cyber",
                        "explanation": "No exploits.",
                    },
                }
            },
            "refusal",
            ("category cyber: No exploits.",),
        ),
        (
            {
                "http": 400,
                "body": {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "max_tokens: too large"},
                    "request_id": "req_b1",
                },
            },
            "provider_error",
            ("invalid_request_error: max_tokens: too large", "(request id req_b1)"),
        ),
    ],
    "openai": [
        (
            {"reply": {"stop": "tool_calls", "content": None, "blocks": ["tool_calls"]}},
            "unexpected_stop",
            ("'tool_calls'", "did not ask for"),
        ),
        ({"reply": {"stop": "end_of_stream"}}, "unexpected_stop", ("'end_of_stream'",)),
        (
            {"reply": {"refusal": "I can't help with that."}},
            "refusal",
            ("I can't help with that.",),
        ),
        (
            {
                "http": 400,
                "body": {
                    "error": {
                        "message": "Invalid 'max_completion_tokens'.",
                        "type": "invalid_request_error",
                        "param": "max_completion_tokens",
                        "code": None,
                    }
                },
            },
            "provider_error",
            (
                "invalid_request_error: Invalid 'max_completion_tokens'.",
                "(param: max_completion_tokens)",
                "(request id req_",
            ),
        ),
    ],
}
USAGE = {
    "cache_read_tokens": 40,
    "cache_write_tokens": 8,
    "reasoning_tokens": 6,
    "web_search_requests": 3,
}


@pytest.mark.parametrize("provider", tuple(TABLE))
def test_i28_the_issue_table_reads_right_in_a_batch(
    provider: str, emulator: RunningEmulator, project: Path, capsys: Any
) -> None:
    from agac.cli.render import print_cost

    cases = TABLE[provider]
    keys = make(
        project, provider, {"a": len(cases) + 1}, summarize=False, retry="{max_attempts: 1}"
    )["a.jsonl"]
    # Batch custom_ids are r<seq>a<attempt>, in record order.
    for i, (bent, _, _) in enumerate(cases):
        emulator.add_fault(_item_fault(provider, f"r{i}a1", bent))
    emulator.add_fault(_item_fault(provider, f"r{len(cases)}a1", {"reply": {"usage": USAGE}}))

    result = _collect(emulator, project)

    outcome = rows(project)
    for key, (_, reason, said) in zip(keys, cases, strict=False):
        assert outcome[key]["reason"] == reason, (key, outcome[key])
        for part in said:
            assert part in outcome[key]["detail"], (key, outcome[key]["detail"])
    answered = outcome[keys[-1]]
    assert answered["status"] == "answered"
    (attempt,) = api.record_session(keys[-1], project)["actions"][0]["attempts"]
    assert (attempt["cached_tokens"], attempt["cache_write_tokens"]) == (40, 8)
    if provider == "anthropic":  # OpenAI's chat usage reports no server tools
        assert attempt["reasoning_tokens"] == 6 and attempt["server_tools"] == {"web_search": 3}
    else:
        assert attempt["reasoning_tokens"] == 6
    assert counts(result)["answered"] == 1
    capsys.readouterr()
    print_cost(api.cost("bw", project))
    table = capsys.readouterr().out
    assert "cache read" in table and "reasoning" in table
