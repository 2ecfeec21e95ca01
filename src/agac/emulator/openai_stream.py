"""A chat completion streamed as server-sent events (``stream: true``): its text in
``chat.completion.chunk`` deltas, the finish reason on the last, a final chunk with the
usage when ``stream_options.include_usage`` asks for it, then ``[DONE]``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["chunks"]


async def chunks(reply: dict[str, Any], include_usage: bool) -> AsyncIterator[bytes]:
    """A completion as ``chat.completion.chunk`` server-sent events, then ``[DONE]``."""
    choice = reply["choices"][0]
    head = {k: reply[k] for k in ("id", "created", "model", "system_fingerprint", "service_tier")}
    text = choice["message"]["content"] or ""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": text[i : i + 16]} for i in range(0, len(text), 16)]
    if choice["message"]["refusal"]:
        deltas.append({"refusal": choice["message"]["refusal"]})
    for index, delta in enumerate(deltas):
        last = index == len(deltas) - 1
        chunk = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": choice["finish_reason"] if last else None,
                }
            ],
        }
        if include_usage:
            chunk["usage"] = None
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    if include_usage:
        usage = {**head, "object": "chat.completion.chunk", "choices": [], "usage": reply["usage"]}
        yield f"data: {json.dumps(usage)}\n\n".encode()
    yield b"data: [DONE]\n\n"
