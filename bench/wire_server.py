"""A minimal provider server for the online benchmarks: every live-call route of the five
providers, each answering a fixed response after ``asyncio.sleep(latency)``.

Usage: python bench/wire_server.py [--port 18780] [--latency-ms 50]

It is not agac's emulator on purpose: the emulator renders a schema-conforming answer per
request, counts, fingerprints and journals it, and would compete with the client for
the two cores more than a real provider's network does. This server only parses nothing
and sleeps. Routes: ``POST /v1/chat/completions`` (OpenAI), ``/openai/v1/chat/completions``
(Groq), ``/v1/messages`` (Anthropic), ``/v1/models/{model}:generateContent`` (Gemini),
``/api/chat`` (Ollama); ``GET /health``; ``GET /count`` (requests answered so far).
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web

TEXT = "A fixed answer from the benchmark server: the review is positive."
USAGE = {
    "prompt_tokens": 24,
    "completion_tokens": 14,
    "total_tokens": 38,
    "prompt_tokens_details": {"cached_tokens": 0},
}
ANSWERS = {
    "openai": {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "gpt-4o-mini",
        "service_tier": "default",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": TEXT, "refusal": None},
            }
        ],
        "usage": USAGE,
    },
    "groq": {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "llama-3.3-70b-versatile",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": TEXT},
            }
        ],
        "usage": USAGE,
    },
    "anthropic": {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "content": [{"type": "text", "text": TEXT}],
        "usage": {
            "input_tokens": 24,
            "output_tokens": 14,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    },
    "gemini": {
        "candidates": [
            {
                "content": {"parts": [{"text": TEXT}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 24,
            "candidatesTokenCount": 14,
            "totalTokenCount": 38,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "bench",
    },
    "ollama": {
        "model": "llama3.2",
        "created_at": "2026-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": TEXT},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 24,
        "eval_count": 14,
    },
}
ROUTES = {
    "openai": "/v1/chat/completions",
    "groq": "/openai/v1/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "/v1/models/{model}",
    "ollama": "/api/chat",
}


def make_app(latency: float) -> web.Application:
    app = web.Application()
    counter = {"n": 0}

    def handler(body: bytes) -> object:
        async def answer(request: web.Request) -> web.Response:
            await request.read()
            await asyncio.sleep(latency)
            counter["n"] += 1
            return web.Response(body=body, content_type="application/json")

        return answer

    for provider, path in ROUTES.items():
        app.router.add_post(path, handler(json.dumps(ANSWERS[provider]).encode()))

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def count(request: web.Request) -> web.Response:
        return web.json_response({"answered": counter["n"]})

    app.router.add_get("/health", health)
    app.router.add_get("/count", count)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18780)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    web.run_app(
        make_app(args.latency_ms / 1000),
        host="127.0.0.1",
        port=args.port,
        access_log=None,
        print=None,
        backlog=1024,
    )


if __name__ == "__main__":
    main()
