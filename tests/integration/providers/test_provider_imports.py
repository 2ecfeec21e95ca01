"""Importing an adapter module must not import its SDK: ``agac validate`` and the
registry load adapter classes for their attributes only, and stay fast."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SDKS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "google.genai",
    "groq": "groq",
    "ollama": "ollama",
}


@pytest.mark.parametrize("name", sorted(SDKS))
def test_importing_an_adapter_does_not_import_its_sdk(name: str) -> None:
    code = (
        "import json, sys\n"
        "from agac.providers.registry import provider_class\n"
        f"cls = provider_class({name!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'anthropic', 'google', 'groq', 'ollama', 'httpx', 'httpx2'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = json.loads(out)
    assert loaded == [], f"importing agac.providers.{name} loaded {loaded}"
