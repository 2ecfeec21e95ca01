"""The bulk path (issue 42): a batch line of the usual shape is read in one pass
(``_plain_wire.plain_completion``) and gives the very Response the general reader gives;
any other shape is left to the general reader (None)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agac.providers._openai_compat import chat_response
from agac.providers._plain_wire import plain_completion

_ODD = st.one_of(st.none(), st.just(""), st.just([]), st.just("odd"), st.integers(-1, 3))
_COUNT = st.one_of(st.integers(0, 500), st.just("12"), st.none(), st.just("x"))
MESSAGE = st.fixed_dictionaries(
    {"role": st.just("assistant")},
    optional={
        "content": st.one_of(
            st.just('{"sentiment": "pos", "score": 3}'),
            st.just("  <think>hm</think>\n\n{}"),
            st.just("plain text"),
            st.just("not json {"),
            st.just(""),
            st.none(),
            st.just([{"type": "text", "text": "chunk"}]),
        ),
        "refusal": st.one_of(st.none(), st.just("I cannot")),
        "annotations": st.one_of(
            st.just([]),
            st.none(),
            st.just([{"type": "url_citation", "url_citation": {"url": "https://a", "title": "A"}}]),
        ),
        "tool_calls": st.one_of(
            st.none(),
            st.just([]),
            st.just([{"id": "c", "function": {"name": "f", "arguments": "{}"}}]),
        ),
        "reasoning": st.one_of(st.none(), st.just(""), st.just("thought")),
        "reasoning_content": st.one_of(st.none(), st.just("thought")),
        "executed_tools": st.one_of(
            st.none(),
            st.just([]),
            st.just([{"type": "search", "search_results": {"results": [{"url": "https://b"}]}}]),
        ),
    },
)
USAGE = st.one_of(
    _ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "prompt_tokens": _COUNT,
            "completion_tokens": _COUNT,
            "prompt_tokens_details": st.one_of(
                _ODD,
                st.fixed_dictionaries(
                    {}, optional={"cached_tokens": _COUNT, "cache_write_tokens": _COUNT}
                ),
            ),
            "prompt_cache_hit_tokens": _COUNT,
            "completion_tokens_details": st.one_of(
                _ODD, st.fixed_dictionaries({}, optional={"reasoning_tokens": _COUNT})
            ),
        },
    ),
)
CHOICE = st.fixed_dictionaries(
    {},
    optional={
        "message": st.one_of(MESSAGE, _ODD),
        "finish_reason": st.sampled_from(["stop", "length", "content_filter", "tool_calls", None]),
        "index": st.just(0),
    },
)
BODY = st.one_of(
    _ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "model": st.one_of(st.just("gpt-4o-mini"), st.none(), st.just("")),
            "choices": st.one_of(st.lists(CHOICE, max_size=2), st.none()),
            "usage": USAGE,
            "service_tier": st.one_of(st.none(), st.just("default")),
        },
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    BODY,
    st.sampled_from(["openai", "groq", "azure", "deepseek", "mistral", "together", "openrouter"]),
    st.sampled_from(["batch", None]),
    st.booleans(),
)
def test_i42_a_plain_batch_line_reads_as_the_general_reader(
    body: Any, provider: str, tier: str | None, parse: bool
) -> None:
    said = {"latency_ms": 7.5, "service_tier": tier, "request_id": "req_1"}
    plain = plain_completion(body, provider=provider, parse=parse, **said)  # type: ignore[arg-type]
    if plain is not None:
        assert plain == chat_response(body, provider=provider, parse=parse, **said)  # type: ignore[arg-type]
    assert chat_response(body, provider=provider, parse=parse, wire=True, **said) == (  # type: ignore[arg-type]
        chat_response(body, provider=provider, parse=parse, **said)  # type: ignore[arg-type]
    )


def test_i42_the_usual_line_is_read_by_the_one_pass_reader() -> None:
    """The shape almost every line has is the one the fast reader takes (not left to
    the general one)."""
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "logprobs": None,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": '{"sentiment": "pos", "score": 3}',
                    "refusal": None,
                    "annotations": [],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 24,
            "completion_tokens": 8,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
    read = plain_completion(
        body, provider="openai", latency_ms=1.0, service_tier="batch", parse=True, request_id="r"
    )
    assert read is not None
    assert read.parsed == {"sentiment": "pos", "score": 3}
    assert (read.usage.input_tokens, read.usage.output_tokens) == (24, 8)
