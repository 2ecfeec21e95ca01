"""Shell exports that point every provider SDK at a running emulator.

Each variable is the one the SDK itself reads, with the value it expects there:
``OPENAI_BASE_URL`` includes ``/v1`` (the SDK's default is ``https://api.openai.com/v1``);
``ANTHROPIC_BASE_URL``, ``GROQ_BASE_URL`` and ``DEEPSEEK_BASE_URL`` are the bare root (their SDKs add ``/v1/…`` and
``/openai/v1/…``); ``GOOGLE_GEMINI_BASE_URL`` is the root (google-genai adds ``/v1beta``);
``OLLAMA_HOST`` is ``http://host:port``, with ``OLLAMA_WEB_SEARCH_URL`` its
``/api/web_search`` (Ollama's web search API, which agac sends an action's searches to) and
an ``OLLAMA_API_KEY``; ``MISTRAL_BASE_URL`` and ``TOGETHER_BASE_URL`` are ``<root>/mistral``
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

The shell exports (:func:`exports`) add Vertex AI's (:func:`vertex_variables`): Google's
libraries take no dummy key, so a service account key file is written for the emulator
(its ``token_uri`` the emulator's token endpoint, its ``gcs_base_url`` the emulator's Cloud
Storage) under ``$XDG_CACHE_HOME/agac/emulator/<host>-<port>/`` (else ``~/.cache/…``), and
``GOOGLE_APPLICATION_CREDENTIALS``, ``GOOGLE_SERVICE_ACCOUNT``, ``GOOGLE_CLOUD_PROJECT``,
``GOOGLE_CLOUD_LOCATION`` and ``GOOGLE_VERTEX_BASE_URL`` name it, the project, a region and
the emulator (:func:`agac.emulator.google_auth.vertex_env`). Writing the key needs
``cryptography`` (which google-auth, and so the ``vertex`` extra, brings); without it, or
when the folder cannot be written, a comment line says why the Vertex exports are missing.
They are not in :func:`variables`: a test's emulator points Vertex at itself with
``RunningEmulator.vertex_env`` and a folder of the test's own.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

__all__ = ["exports", "variables", "vertex_folder", "vertex_variables"]

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
        "OLLAMA_API_KEY": DUMMY_KEY,
        "OLLAMA_WEB_SEARCH_URL": f"{root}/api/web_search",
        "VLLM_BASE_URL": f"{root}/vllm/v1",
        "AZURE_OPENAI_ENDPOINT": f"{root}/azure",
        "AZURE_OPENAI_API_KEY": DUMMY_KEY,
        "OPENAI_API_VERSION": "2025-04-01-preview",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": f"{root}/bedrock-runtime",
        "AWS_ENDPOINT_URL_BEDROCK": f"{root}/bedrock",
    }


def vertex_folder(port: int, host: str = "127.0.0.1") -> Path:
    """Where the service account key of the emulator at ``host:port`` is written."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agac" / "emulator" / f"{host}-{port}"


def vertex_variables(port: int, host: str = "127.0.0.1") -> dict[str, str]:
    """Vertex AI's environment for the emulator at ``host:port``, its key file written
    in :func:`vertex_folder`. Raises ImportError without ``cryptography``, OSError when the
    folder cannot be written."""
    from .google_auth import vertex_env

    folder = vertex_folder(port, host)
    folder.mkdir(parents=True, exist_ok=True)
    return vertex_env(folder, f"http://{host}:{port}")


def exports(port: int, host: str = "127.0.0.1") -> str:
    """``export NAME=value`` lines for ``eval "$(agac emulator env --port N)"``: every
    provider's, Vertex AI's included (else a comment line saying why they are missing)."""
    lines = [
        f"export {name}={shlex.quote(value)}\n" for name, value in variables(port, host).items()
    ]
    try:
        google = vertex_variables(port, host)
    except ImportError:
        lines.append(
            "# no Vertex AI exports: writing a service account key for the emulator needs "
            "cryptography (pip install -e '.[vertex]')\n"
        )
    except OSError as exc:
        lines.append(f"# no Vertex AI exports: cannot write {vertex_folder(port, host)}: {exc}\n")
    else:
        lines += [f"export {name}={shlex.quote(value)}\n" for name, value in google.items()]
    return "".join(lines)
