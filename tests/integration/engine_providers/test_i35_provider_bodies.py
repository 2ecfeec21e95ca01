"""Issue 35, "Silent successes on real provider responses", live: bodies recorded from real
provider servers (tests/fixtures/recorded/, sources in its README) served by the emulator's
``reply: {body}`` fault and read through the engine on both transports (the ``project``
fixture runs each test once on the lean transport and once on the SDKs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import e2e_support
import pytest
from e2e_support import chat_requests, fault, project_yml

from agac import api
from agac.testing import write_project

RECORDED = Path(__file__).parents[2] / "fixtures" / "recorded"


def recorded(name: str) -> dict[str, Any]:
    return dict(json.loads((RECORDED / name).read_text(encoding="utf-8")))


def _project(root: Path, model: str, records: int = 1, attempts: int = 1) -> None:
    """One free-text action ``ask`` (no schema: the body's text is the answer as is)."""
    workflow = "\n".join(
        [
            "name: recorded",
            "input: {path: data/, id_field: id}",
            "defaults:",
            f"  model: {model}",
            "  max_tokens: 2048",
            "  timeout: 10s",
            f"  retry: {{max_attempts: {attempts}, backoff: {{initial: 10ms, max: 20ms}}}}",
            "actions:",
            "  - name: ask",
            '    prompt: "Answer: {{ source.text }}"',
        ]
    )
    data = [{"id": f"q{i}", "text": f"question {i}"} for i in range(records)]
    write_project(root, workflow + "\n", agac_yml=project_yml(), data={"data/q.jsonl": data})


def _ask(project: Path, key: str = "q0") -> dict[str, Any]:
    (entry,) = [a for a in api.record_session(key, project)["actions"] if a["action"] == "ask"]
    return dict(entry)


def _bodies(emulator: Any) -> list[dict[str, Any]]:
    return [r["body"] for r in emulator.requests() if r["op"] == "chat"]


def _answer_after_think(content: str) -> str:
    return content.split("</think>", 1)[1].lstrip()


# -- item 3: reasoning is never part of an answer ---------------------------------------------

GROQ_INLINE = recorded("groq_deepseek_r1_think_inline.json")
GROQ_PARSED = recorded("groq_deepseek_r1_reasoning_parsed.json")


@pytest.mark.parametrize(
    ("body", "answer"),
    [
        (
            GROQ_INLINE,
            _answer_after_think(GROQ_INLINE["choices"][0]["message"]["content"]),
        ),
        (GROQ_PARSED, GROQ_PARSED["choices"][0]["message"]["content"]),
    ],
    ids=["inline", "parsed"],
)
def test_i35_3_groq_reasoning_is_asked_apart_and_never_the_answer(
    body: dict[str, Any], answer: str, emulator: Any, project: Path
) -> None:
    _project(project, "groq/deepseek-r1-distill-llama-70b")
    emulator.add_fault(fault("groq", {"reply": {"body": body}}))

    assert api.run("recorded", project).summary["state"] == "succeeded"

    (sent,) = _bodies(emulator)
    assert sent["reasoning_format"] == "parsed"
    entry = _ask(project)
    assert entry["status"] == "answered"
    assert entry["output"] == {"text": answer} and "<think>" not in str(entry["output"])
    (attempt,) = entry["attempts"]
    usage = body["usage"]
    assert attempt["output_tokens"] == usage["completion_tokens"]
    # Groq reports no reasoning count for these models: the reasoning's share of the output.
    assert 0 < attempt["reasoning_tokens"] < usage["completion_tokens"]


def test_i35_3_a_groq_model_that_rejects_reasoning_format_is_asked_again_without_it(
    emulator: Any, project: Path
) -> None:
    _project(project, "groq/qwen/qwen3-32b")
    emulator.add_fault(
        fault(
            "groq",
            {
                "http": 400,
                "body": {
                    "error": {
                        "message": "reasoning_format is not supported with this model",
                        "type": "invalid_request_error",
                    }
                },
            },
            times=1,
        ),
        fault("groq", {"reply": {"body": GROQ_INLINE}}),
    )

    assert api.run("recorded", project).summary["state"] == "succeeded"

    assert [b.get("reasoning_format") for b in _bodies(emulator)] == ["parsed", None]
    content = GROQ_INLINE["choices"][0]["message"]["content"]
    assert _ask(project)["output"] == {"text": _answer_after_think(content)}


def test_i35_3_a_model_that_does_not_think_inline_is_sent_as_before(
    emulator: Any, project: Path
) -> None:
    _project(project, "groq/llama-3.3-70b-versatile")

    api.run("recorded", project)

    (sent,) = _bodies(emulator)
    assert "reasoning_format" not in sent
    assert _ask(project)["attempts"][0]["reasoning_tokens"] == 0


def test_i35_3_asking_for_reasoning_apart_is_not_part_of_the_fingerprint(
    emulator: Any, project: Path
) -> None:
    """The answer is stored under the fingerprint of the request without
    ``reasoning_format`` (the inline form is split to the same answer): the fingerprints of
    runs before this change still find their answers."""
    from agac.providers.base import Message, Request
    from agac.store.repository import Store
    from agac.tenants import DEFAULT_TENANT

    _project(project, "groq/deepseek-r1-distill-llama-70b")
    emulator.add_fault(fault("groq", {"reply": {"body": GROQ_INLINE}}))
    api.run("recorded", project)

    expected = Request(
        provider="groq",
        model="deepseek-r1-distill-llama-70b",
        messages=(Message("user", "Answer: question 0"),),
        max_tokens=2048,
    )
    assert "reasoning" not in expected.canonical()
    store = Store(f"sqlite:///{project}/.agac/agac.db")
    try:
        assert store.get_answer(expected.fingerprint(), tenant=DEFAULT_TENANT) is not None
    finally:
        store.close()


OLLAMA_INLINE = recorded("ollama_deepseek_r1_think_inline.json")


def test_i35_3_ollama_deepseek_r1_thinks_apart_and_inline_think_is_split(
    emulator: Any, project: Path
) -> None:
    _project(project, "ollama/deepseek-r1:1.5b")
    emulator.add_fault(fault("ollama", {"reply": {"body": OLLAMA_INLINE}}))

    assert api.run("recorded", project).summary["state"] == "succeeded"

    (sent,) = _bodies(emulator)
    assert sent["think"] is True
    entry = _ask(project)
    assert entry["output"] == {"text": _answer_after_think(OLLAMA_INLINE["message"]["content"])}
    (attempt,) = entry["attempts"]
    assert attempt["output_tokens"] == OLLAMA_INLINE["eval_count"]
    assert 0 < attempt["reasoning_tokens"] < OLLAMA_INLINE["eval_count"]


def test_i35_3_ollama_thinking_field_stays_out_of_the_answer(emulator: Any, project: Path) -> None:
    _project(project, "ollama/qwen3:8b")
    emulator.add_fault(fault("ollama", {"reply": {"blocks": ["thinking"]}}))

    api.run("recorded", project)

    (attempt,) = _ask(project)["attempts"]
    assert attempt["reasoning_tokens"] > 0
    assert "Thinking about the question" not in str(_ask(project)["output"])


def test_i35_3_an_ollama_model_that_rejects_think_is_asked_again_without_it(
    emulator: Any, project: Path
) -> None:
    _project(project, "ollama/deepseek-r1:1.5b")
    emulator.add_fault(
        fault(
            "ollama",
            {"http": 400, "message": '"deepseek-r1:1.5b" does not support thinking'},
            times=1,
        )
    )

    assert api.run("recorded", project).summary["state"] == "succeeded"

    bodies = _bodies(emulator)
    assert [b.get("think") for b in bodies] == [True, None]


# -- item 4: a Gemini function call that ends with STOP ----------------------------------------

GEMINI_CALL = recorded("gemini_function_call_stop.json")


def test_i35_4_gemini_function_call_with_stop_fails_unexpected_stop(
    emulator: Any, project: Path
) -> None:
    _project(project, "gemini/gemini-2.0-flash")
    emulator.add_fault(fault("gemini", {"reply": {"body": GEMINI_CALL}}))

    summary = api.run("recorded", project).summary

    assert summary["actions"]["ask"]["reasons"] == {"unexpected_stop": 1}
    (row,) = api.export_rows("recorded", "ask", project)
    assert row["status"] == "failed" and row["reason"] == "unexpected_stop"
    assert "get_user_country" in row["detail"] and "'STOP'" in row["detail"]
    assert chat_requests(emulator.stats(), "gemini") == 1  # not re-asked: never an answer


# -- item 5: billed tokens counted -------------------------------------------------------------

GROUNDED = recorded("gemini_grounding_usage.json")
COMPACTED = recorded("anthropic_compaction_iterations.json")


def test_i35_5_gemini_grounding_prompt_tokens_are_billed_input(
    emulator: Any, project: Path
) -> None:
    _project(project, "gemini/gemini-2.5-pro")
    emulator.add_fault(fault("gemini", {"reply": {"body": GROUNDED}}))

    api.run("recorded", project)

    (attempt,) = _ask(project)["attempts"]
    meta = GROUNDED["usageMetadata"]
    assert attempt["input_tokens"] == meta["promptTokenCount"] + meta["toolUsePromptTokenCount"]
    assert attempt["output_tokens"] == meta["candidatesTokenCount"] + meta["thoughtsTokenCount"]
    total = attempt["input_tokens"] + attempt["output_tokens"]
    assert total == meta["totalTokenCount"]  # every billed token counted, none twice


def test_i35_5_anthropic_compaction_iterations_are_what_is_billed(
    emulator: Any, project: Path
) -> None:
    _project(project, "anthropic/claude-sonnet-4-5")
    emulator.add_fault(fault("anthropic", {"reply": {"body": COMPACTED}}))

    api.run("recorded", project)

    entry = _ask(project)
    assert entry["output"] == {"text": "Hello!"}
    (attempt,) = entry["attempts"]
    got = (attempt["input_tokens"], attempt["output_tokens"], attempt["cache_write_tokens"])
    assert got == (329, 136, 55_096)  # top level alone: 229 / 5 / 0
    (row,) = api.cost("recorded", project)["rows"]
    assert row["cache_write_tokens"] == 55_096


# -- item 6: an odd body fails its unit, never the run -----------------------------------------

NO_MESSAGE = recorded("ollama_generate_body_no_message.json")


def test_i35_6_ollama_body_without_message_fails_the_unit_not_the_run(
    emulator: Any, project: Path
) -> None:
    _project(project, "ollama/llama3.2", attempts=2)
    emulator.add_fault(fault("ollama", {"reply": {"body": NO_MESSAGE}}))

    first = api.run("recorded", project)

    assert first.summary["actions"]["ask"]["reasons"] == {"provider_error": 1}
    (row,) = list(api.export_rows("recorded", "ask", project))
    # Lean: read and refused by agac; SDK: the SDK's ValidationError, translated.
    said = "has no message" if e2e_support.TRANSPORT == "lean" else "documented shape"
    assert said in row["detail"], row["detail"]
    assert chat_requests(emulator.stats(), "ollama") == 2  # retried, then failed
    # The run is finishable: the next command works and the unit can be asked again.
    emulator.reset()
    api.retry("recorded", project)
    (row,) = list(api.export_rows("recorded", "ask", project))
    assert row["status"] == "answered"


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini", "groq"])
def test_i35_6_another_apis_body_fails_the_unit_with_a_reason_on_every_provider(
    name: str, emulator: Any, project: Path
) -> None:
    from e2e_support import MODELS

    _project(project, f"{name}/{MODELS[name]}")
    emulator.add_fault(fault(name, {"reply": {"body": NO_MESSAGE}}))

    summary = api.run("recorded", project).summary

    (reason,) = summary["actions"]["ask"]["reasons"]
    assert reason in ("unexpected_stop", "provider_error")
    (row,) = api.export_rows("recorded", "ask", project)
    assert row["status"] == "failed" and row["detail"]


def test_i35_6_a_body_the_gemini_sdk_cannot_parse_fails_the_unit_not_the_run(
    emulator: Any, project: Path
) -> None:
    """google-genai validates answers (pydantic): a field of the wrong type raises in the SDK;
    the adapter's error translation makes it retryable, and the unit fails with a reason."""
    _project(project, "gemini/gemini-2.5-flash", attempts=2)
    odd = {"candidates": "odd", "usageMetadata": {"promptTokenCount": "many"}}
    emulator.add_fault(fault("gemini", {"reply": {"body": odd}}))

    summary = api.run("recorded", project).summary

    (row,) = list(api.export_rows("recorded", "ask", project))
    assert row["status"] == "failed"
    if e2e_support.TRANSPORT == "sdk":  # the SDK's parse error, translated
        assert summary["actions"]["ask"]["reasons"] == {"provider_error": 1}
        assert "documented shape" in row["detail"]
        assert chat_requests(emulator.stats(), "gemini") == 2  # retryable: asked again
    else:  # read leniently: no candidate, no stop reason
        assert summary["actions"]["ask"]["reasons"] == {"unexpected_stop": 1}
