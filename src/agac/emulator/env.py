"""Shell exports that point every provider SDK at a running emulator.

Each variable is the one the SDK itself reads, with the value it expects there:
``OPENAI_BASE_URL`` includes ``/v1`` (the SDK's default is ``https://api.openai.com/v1``);
``ANTHROPIC_BASE_URL``, ``GROQ_BASE_URL`` and ``DEEPSEEK_BASE_URL`` are the bare root (their SDKs add ``/v1/…`` and
``/openai/v1/…``); ``GOOGLE_GEMINI_BASE_URL`` is the root (google-genai adds ``/v1beta``);
``OLLAMA_HOST`` is ``http://host:port``; ``MISTRAL_BASE_URL`` and ``TOGETHER_BASE_URL`` are ``<root>/mistral``
and ``<root>/together`` (their SDKs add ``/v1/…``); ``OPENROUTER_BASE_URL`` is
``<root>/openrouter/api/v1``; ``VLLM_BASE_URL`` is ``<root>/vllm/v1`` (no key needed);
``XAI_BASE_URL`` is ``<root>/xai/v1`` and ``FIREWORKS_BASE_URL``
``<root>/fireworks/inference/v1`` (with a ``FIREWORKS_ACCOUNT_ID`` for its batches); ``AZURE_OPENAI_ENDPOINT`` is ``<root>/azure`` (the
SDK adds ``/openai/…``), with an ``OPENAI_API_VERSION`` Azure takes; boto3's
``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` and ``AWS_ENDPOINT_URL_BEDROCK`` are ``<root>/bedrock-runtime``
and ``<root>/bedrock`` (AWS credentials and S3 are left as they are: the emulator's Bedrock
jobs read and write the S3 that boto3 reaches from its own environment). Keys are dummies: the emulator accepts any.
``GEMINI_API_KEY`` and ``GOOGLE_API_KEY`` get the same value, so whichever one the
google-genai SDK prefers (``GOOGLE_API_KEY``) is a dummy too, never a real key.
"""

from __future__ import annotations

import shlex

__all__ = ["exports", "variables"]

DUMMY_KEY = "emulator-key"


def variables(port: int, host: str = "127.0.0.1") -> dict[str, str]:
    """The environment variables, by name."""
    root = f"http://{host}:{port}"
    return {
        "OPENAI_BASE_URL": f"{root}/v1",
        "OPENAI_API_KEY": DUMMY_KEY,
        "ANTHROPIC_BASE_URL": root,
        "ANTHROPIC_API_KEY": DUMMY_KEY,
        "GOOGLE_GEMINI_BASE_URL": root,
        "GEMINI_API_KEY": DUMMY_KEY,
        "GOOGLE_API_KEY": DUMMY_KEY,
        "GROQ_BASE_URL": root,
        "GROQ_API_KEY": DUMMY_KEY,
        "DEEPSEEK_BASE_URL": root,
        "DEEPSEEK_API_KEY": DUMMY_KEY,
        "MISTRAL_BASE_URL": f"{root}/mistral",
        "MISTRAL_API_KEY": DUMMY_KEY,
        "TOGETHER_BASE_URL": f"{root}/together",
        "TOGETHER_API_KEY": DUMMY_KEY,
        "OPENROUTER_BASE_URL": f"{root}/openrouter/api/v1",
        "OPENROUTER_API_KEY": DUMMY_KEY,
        "XAI_BASE_URL": f"{root}/xai/v1",
        "XAI_API_KEY": DUMMY_KEY,
        "FIREWORKS_BASE_URL": f"{root}/fireworks/inference/v1",
        "FIREWORKS_API_KEY": DUMMY_KEY,
        "FIREWORKS_ACCOUNT_ID": "emulator",
        "OLLAMA_HOST": root,
        "VLLM_BASE_URL": f"{root}/vllm/v1",
        "AZURE_OPENAI_ENDPOINT": f"{root}/azure",
        "AZURE_OPENAI_API_KEY": DUMMY_KEY,
        "OPENAI_API_VERSION": "2025-04-01-preview",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": f"{root}/bedrock-runtime",
        "AWS_ENDPOINT_URL_BEDROCK": f"{root}/bedrock",
    }


def exports(port: int, host: str = "127.0.0.1") -> str:
    """``export NAME=value`` lines for ``eval "$(agac emulator env --port N)"``."""
    return "".join(
        f"export {name}={shlex.quote(value)}\n" for name, value in variables(port, host).items()
    )
