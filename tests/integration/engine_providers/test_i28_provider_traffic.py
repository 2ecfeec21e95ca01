"""Issue 28 through the engine: real provider traffic read right, live, on both transports
(the ``project`` fixture runs every test once on the lean transport and once on the SDKs).

The emulator sends the bodies real servers send (its ``reply`` fault): a paused turn, a
tool call nobody asked for, a stop value agac does not know, refusal details, every
usage field, provider request ids and error bodies as they come.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_support import MODELS, chat_requests, fault, make_project, run

from agac import api

ANTHROPIC = f"anthropic/{MODELS['anthropic']}"
PAUSED = {
    "stop": "pause_turn",
    "blocks": ["preamble", "server_tool_use"],
    "usage": {"web_search_requests": 1},
}


def _classify(project: Path, key: str = "r000") -> dict[str, Any]:
    session = api.record_session(key, project)
    (entry,) = [a for a in session["actions"] if a["action"] == "classify"]
    return entry


def test_i28_2_pause_turn_is_continued_and_each_leg_is_in_the_ledger(
    emulator: Any, project: Path
) -> None:
    make_project(project, ANTHROPIC, records=1, summarize=False)
    emulator.add_fault(fault("anthropic", {"reply": PAUSED}, times=1))

    summary = run(project).summary

    classify = summary["actions"]["classify"]
    assert (classify["answered"], classify["calls"]) == (1, 2)
    assert chat_requests(emulator.stats(), "anthropic") == 2
    # The continuation sent the paused content back as the assistant turn.
    second = [r for r in emulator.requests() if r["op"] == "chat"][-1]["body"]
    last = second["messages"][-1]
    assert last["role"] == "assistant"
    assert [b["type"] for b in last["content"]] == ["text", "server_tool_use"]
    entry = _classify(project)
    assert entry["status"] == "answered" and set(entry["output"]) == {"sentiment", "score"}
    legs = entry["attempts"]
    assert [(a["attempt"], a["status"]) for a in legs] == [(1, "ok"), (1, "ok")]
    assert "pause_turn" in legs[0]["error"] and legs[1]["error"] is None
    assert all(a["output_tokens"] > 0 for a in legs)


def test_i28_2_a_turn_paused_past_the_bound_fails_unexpected_stop(
    emulator: Any, project: Path
) -> None:
    make_project(project, ANTHROPIC, records=1, summarize=False)
    emulator.add_fault(fault("anthropic", {"reply": PAUSED}))

    summary = run(project).summary

    classify = summary["actions"]["classify"]
    assert classify["reasons"] == {"unexpected_stop": 1}
    assert chat_requests(emulator.stats(), "anthropic") == 5  # PAUSE_LEGS, no re-ask
    (row,) = api.export_rows("triage", "classify", project)
    assert row["reason"] == "unexpected_stop" and "pause_turn" in row["detail"]
    assert len(_classify(project)["attempts"]) == 5


# -- item 3: every usage field counted and shown ---------------------------------------------

USAGE = {
    "cache_read_tokens": 30,
    "cache_write_tokens": 20,
    "reasoning_tokens": 5,
    "web_search_requests": 2,
    "web_fetch_requests": 1,
}


def test_i28_3_cache_reasoning_and_server_tools_are_recorded_priced_and_shown(
    emulator: Any, project: Path, capsys: Any
) -> None:
    from agac.cli.render import print_cost, print_session
    from agac.providers.pricing import PriceTable

    make_project(project, ANTHROPIC, records=1, summarize=False)
    emulator.add_fault(fault("anthropic", {"reply": {"usage": USAGE}}))

    assert run(project).summary["state"] == "succeeded"

    (attempt,) = _classify(project)["attempts"]
    assert (
        attempt["cached_tokens"],
        attempt["cache_write_tokens"],
        attempt["reasoning_tokens"],
    ) == (30, 20, 5)
    assert attempt["server_tools"] == {"web_fetch": 1, "web_search": 2}
    # Priced from genai-prices: tokens, cache reads and writes, and $10 per 1,000 searches;
    # web_fetch has no price there: counted $0 and marked.
    prices = PriceTable()
    price = prices.get(ANTHROPIC)
    assert price is not None and dict(price.tools)["web_search"] == pytest.approx(0.01)
    tokens = (
        attempt["input_tokens"] * price.input
        + 30 * (price.cached_input or 0)
        + 20 * (price.cache_write or 0)
        + attempt["output_tokens"] * price.output
    ) / 1e6
    assert attempt["cost_usd"] == pytest.approx(tokens + 0.02, abs=1e-6)
    doc = api.cost("triage", project)
    (row,) = doc["rows"]
    assert (row["cached_tokens"], row["cache_write_tokens"], row["reasoning_tokens"]) == (30, 20, 5)
    assert row["server_tools"] == {"web_fetch": 1, "web_search": 2}
    assert row["unpriced_tools"] == ["web_fetch"]

    capsys.readouterr()
    print_cost(doc)
    table = capsys.readouterr().out
    for column in ("cache read", "cache write", "reasoning", "web_search", "web_fetch"):
        assert column in table, table
    assert "web_fetch uses have no known price" in table
    print_session(api.record_session("r000", project))
    shown = capsys.readouterr().out
    assert "cache read 30, cache write 20, reasoning 5, web_fetch x1, web_search x2" in shown


def test_i28_3_columns_appear_only_when_non_zero(emulator: Any, project: Path, capsys: Any) -> None:
    from agac.cli.render import print_cost, print_session

    make_project(project, f"openai/{MODELS['openai']}", records=1, summarize=False)
    emulator.add_fault(fault("openai", {"reply": {"usage": {"reasoning_tokens": 7}}}))
    run(project)

    (attempt,) = _classify(project)["attempts"]
    assert attempt["reasoning_tokens"] == 7 and attempt["server_tools"] == {}
    capsys.readouterr()
    print_cost(api.cost("triage", project))
    table = capsys.readouterr().out
    assert "reasoning" in table
    assert "cache read" not in table and "cache write" not in table and "web_search" not in table
    print_session(api.record_session("r000", project))
    assert "(reasoning 7)" in capsys.readouterr().out


# -- item 4: the provider's request id ----------------------------------------------------------

#: Where each provider puts its request id (Gemini and Ollama send none on an error).
REQUEST_ID_HEADER = {"anthropic": "request-id", "openai": "x-request-id", "groq": "x-request-id"}


@pytest.mark.parametrize("name", tuple(REQUEST_ID_HEADER))
def test_i28_4_every_attempt_keeps_the_request_id_and_a_failure_prints_it(
    name: str, emulator: Any, project: Path, capsys: Any
) -> None:
    from agac.cli.render import print_session

    make_project(
        project, f"{name}/{MODELS[name]}", records=2, summarize=False, retry="{max_attempts: 1}"
    )
    emulator.add_fault(
        fault(
            name,
            {"http": 400, "message": "messages: bad shape"},
            match={"model": MODELS[name]},
            times=1,
        )
    )

    run(project)

    rows = {r["key"]: r for r in api.export_rows("triage", "classify", project)}
    (failed,) = [r for r in rows.values() if r["status"] == "failed"]
    (answered,) = [r for r in rows.values() if r["status"] == "answered"]
    (bad,) = _classify(project, failed["key"])["attempts"]
    (good,) = _classify(project, answered["key"])["attempts"]
    assert bad["request_id"] and bad["request_id"].startswith("req_")
    assert good["request_id"] and good["request_id"].startswith("req_")
    assert bad["request_id"] != good["request_id"]
    assert f"(request id {bad['request_id']})" in failed["detail"]
    assert "messages: bad shape" in failed["detail"]
    print_session(api.record_session(failed["key"], project))
    assert f"request id {bad['request_id']}" in capsys.readouterr().out
    served = [r for r in emulator.requests() if r["op"] == "chat"]
    assert len(served) == 2


# -- item 6: refusal and block details on the failed unit --------------------------------------

DETAILS = {
    "anthropic": (
        {
            "stop": "refusal",
            "content": None,
            "stop_details": {
                "type": "refusal",
                "category": "cyber",
                "explanation": "The request asks for working malware.",
            },
        },
        "refusal",
        ["category cyber", "The request asks for working malware."],
    ),
    "openai": (
        {"refusal": "I can't help with building that."},
        "refusal",
        ["I can't help with building that."],
    ),
    "gemini": (
        {
            "block_reason": "PROHIBITED_CONTENT",
            "block_reason_message": "The prompt was blocked for prohibited content.",
        },
        "content_filter",
        [
            "PROHIBITED_CONTENT",
            "the prompt was blocked",
            "The prompt was blocked for prohibited content.",
        ],
    ),
    "groq": ({"stop": "content_filter", "content": None}, "content_filter", ["content_filter"]),
}


@pytest.mark.parametrize("name", tuple(DETAILS))
def test_i28_6_refusal_and_block_details_are_kept_and_shown(
    name: str, emulator: Any, project: Path, capsys: Any
) -> None:
    from agac.cli.render import print_session

    reply, reason, said = DETAILS[name]
    make_project(project, f"{name}/{MODELS[name]}", records=1, summarize=False)
    emulator.add_fault(fault(name, {"reply": reply}))

    summary = run(project).summary

    assert summary["actions"]["classify"]["reasons"] == {reason: 1}
    assert chat_requests(emulator.stats(), name) == 1  # final: not asked again
    (row,) = api.export_rows("triage", "classify", project)
    for part in said:
        assert part in row["detail"], row["detail"]
    print_session(api.record_session("r000", project))
    shown = capsys.readouterr().out
    assert all(part in shown for part in said)


def test_i28_6_a_gemini_safety_stop_names_its_category(emulator: Any, project: Path) -> None:
    make_project(project, f"gemini/{MODELS['gemini']}", records=1, summarize=False)
    emulator.add_fault(
        fault(
            "gemini",
            {
                "reply": {
                    "stop": "SAFETY",
                    "content": None,
                    "safety_category": "HARM_CATEGORY_HARASSMENT",
                }
            },
        )
    )

    run(project)

    (row,) = api.export_rows("triage", "classify", project)
    assert row["reason"] == "content_filter"
    assert "SAFETY" in row["detail"] and "HARM_CATEGORY_HARASSMENT" in row["detail"]


# -- item 1 through the engine: no answer from an unfinished turn ------------------------------

#: A tool call nobody asked for (seen behind gateways), and a stop value agac does not know.
UNFINISHED = [
    ("anthropic", {"stop": "tool_use", "blocks": ["text", "tool_use"]}, "'tool_use'"),
    ("openai", {"stop": "tool_calls", "content": None, "blocks": ["tool_calls"]}, "'tool_calls'"),
    ("groq", {"stop": "tool_calls", "content": None, "blocks": ["tool_calls"]}, "'tool_calls'"),
    ("anthropic", {"stop": "compaction_2027"}, "'compaction_2027'"),
    ("openai", {"stop": "end_of_stream"}, "'end_of_stream'"),
    ("gemini", {"stop": "PLANETARY_ALIGNMENT"}, "'PLANETARY_ALIGNMENT'"),
    ("ollama", {"stop": "interrupted"}, "'interrupted'"),
]


@pytest.mark.parametrize(
    ("name", "reply", "raw"), UNFINISHED, ids=[f"{n}-{r}" for n, _, r in UNFINISHED]
)
def test_i28_1_a_stop_outside_the_list_fails_the_unit_never_answers(
    name: str, reply: dict[str, Any], raw: str, emulator: Any, project: Path
) -> None:
    make_project(project, f"{name}/{MODELS[name]}", records=1)
    emulator.add_fault(fault(name, {"reply": reply}))

    summary = run(project).summary

    classify = summary["actions"]["classify"]
    assert classify["reasons"] == {"unexpected_stop": 1} and classify["answered"] == 0
    assert classify["calls"] == 1  # not asked again: paying again is the user's call
    assert summary["actions"]["summarize"]["reasons"] == {"upstream_failed": 1}
    (row,) = api.export_rows("triage", "classify", project)
    assert row["output"] is None and raw in row["detail"]
