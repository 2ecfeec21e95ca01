"""Gemini 3's thought signatures on function calls, as the emulator gives and checks them.

A Gemini 3 model (``gemini-3…``) signs a turn that calls functions: the first
``functionCall`` part of the turn carries a ``thoughtSignature`` (base64). The signature
must come back unchanged on that part in every later request of the conversation; a
model turn of function calls without it, or with another one, is refused with a 400
``INVALID_ARGUMENT`` in the API's words, naming the call and the content's position
(1-based). The API reads base64 in either alphabet (the Python SDK sends URL-safe), so
the bytes are compared. A signature here is a digest of the call it signs, so the
emulator needs no memory to check it; older models neither give nor ask for one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

__all__ = ["sign_calls", "unsigned_call"]

SIGNING_FAMILY = "gemini-3"


def _signs(model: str) -> bool:
    return model.removeprefix("models/").startswith(SIGNING_FAMILY)


def _digest(call: dict[str, Any]) -> bytes:
    text = json.dumps([call.get("name"), call.get("args") or {}], sort_keys=True)
    return hashlib.sha256(b"emulated thought:" + text.encode()).digest()


def sign_calls(model: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's ``functionCall`` parts, the first one signed on a Gemini 3 model."""
    if not _signs(model) or not parts:
        return parts
    first = parts[0]
    signature = base64.b64encode(_digest(first["functionCall"])).decode("ascii")
    return [{**first, "thoughtSignature": signature}, *parts[1:]]


def unsigned_call(model: str, contents: Any) -> str | None:
    """The API's refusal of a conversation whose model turn of function calls lost its
    signature (None: every such turn is signed as it was given, or the model signs none)."""
    if not _signs(model):
        return None
    for position, content in enumerate(contents or (), start=1):
        if not isinstance(content, dict) or content.get("role") != "model":
            continue
        calls = [
            p for p in content.get("parts") or () if isinstance(p, dict) and "functionCall" in p
        ]
        if not calls:
            continue
        first = calls[0]
        if _decoded(first.get("thoughtSignature")) != _digest(first["functionCall"]):
            name = first["functionCall"].get("name")
            return (
                "Function call is missing a thought_signature in functionCall parts. This is "
                "required for tools to work correctly, and missing thought_signature may lead "
                f"to degraded model performance. Additional data, function call "
                f"`default_api:{name}` , position {position}. Please refer to "
                "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
            )
    return None


def _decoded(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    padded = value + "=" * (-len(value) % 4)
    try:
        return base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))
    except (binascii.Error, ValueError):
        return None
