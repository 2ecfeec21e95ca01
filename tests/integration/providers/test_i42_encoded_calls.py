"""Issue 42, "The bulk path": a live call's wire body encoded before its unit's slot comes
(``SupportsEncodedCalls``). On the lean transport a Chat Completions adapter encodes the
body ahead and sends exactly what :meth:`complete` would; a body whose form no longer
holds at the send (the model was found to reject ``json_schema`` meanwhile) is encoded
again; the SDK transport, and Groq (whose ``reasoning_format`` fallback lives in
``complete``), leave the encoding to the send. Both transports run each test (conftest).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_support import make_request

from agac.providers.encoded import SupportsEncodedCalls

ENCODING = ("openai", "azure", "mistral", "together")
REJECTION = "Invalid parameter: 'response_format' of type 'json_schema' is not supported."


def _bodies(emulator: Any) -> list[dict[str, Any]]:
    return [r["body"] for r in emulator.requests() if r["op"] == "chat"]


@pytest.mark.parametrize("name", ENCODING)
async def test_i42_an_encoded_call_sends_the_body_complete_sends(
    name: str, emulator: Any, make_provider: Any, transport: str
) -> None:
    provider = make_provider(name)
    assert isinstance(provider, SupportsEncodedCalls)
    request = make_request(name)
    encoded = provider.encode_call(request)
    if transport == "sdk":
        assert encoded is None  # the SDK encodes its own body, at the send
        return
    assert encoded is not None
    ahead = await provider.complete_encoded(request, encoded)
    plain = await provider.complete(request)
    first, second = _bodies(emulator)
    assert first == json.loads(encoded.body) == second
    assert ahead.text == plain.text and ahead.stop_reason == plain.stop_reason == "end"


async def test_i42_a_body_encoded_before_the_schema_was_rejected_is_encoded_again(
    emulator: Any, make_provider: Any, transport: str
) -> None:
    emulator.add_fault(
        {
            "provider": "openai",
            "op": "chat",
            "times": 1,
            "fault": {"http": 400, "message": REJECTION},
        }
    )
    provider = make_provider("openai")
    request = make_request("openai")
    early, late = provider.encode_call(request), provider.encode_call(request)
    if transport == "sdk":
        assert early is None and late is None
        return
    assert early is not None and late is not None
    assert (await provider.complete_encoded(request, early)).stop_reason == "end"
    assert (await provider.complete_encoded(request, late)).stop_reason == "end"
    rejected, fallback, straight = _bodies(emulator)
    assert rejected["response_format"]["type"] == "json_schema"
    # The late body was encoded in the native form; it goes in JSON mode, as remembered.
    assert fallback["response_format"] == straight["response_format"] == {"type": "json_object"}


async def test_i42_groq_leaves_its_body_to_the_send(make_provider: Any) -> None:
    assert make_provider("groq").encode_call(make_request("groq")) is None
