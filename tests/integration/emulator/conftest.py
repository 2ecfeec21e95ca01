"""Fixtures of the emulator suite: one emulator per session (a clean slate per test) and
the five official SDK clients pointed at it, with their own retries off so every request
a test makes is one request the emulator sees."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import groq
import ollama
import openai
import pytest
from emulator_support import BATCH_SECONDS
from google import genai
from google.genai import types as genai_types

from agac.emulator.testing import RunningEmulator


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[RunningEmulator]:
    with RunningEmulator(batch_seconds=BATCH_SECONDS) as server:
        yield server


@pytest.fixture
def emu(emulator_server: RunningEmulator) -> Iterator[RunningEmulator]:
    """The session's emulator with no files, batches, faults or counts."""
    emulator_server.reset()
    yield emulator_server
    emulator_server.reset()


@pytest.fixture
def oai(emu: RunningEmulator) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=emu.env()["OPENAI_BASE_URL"], api_key="x", max_retries=0)
    yield client
    client.close()


@pytest.fixture
def claude(emu: RunningEmulator) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(
        base_url=emu.env()["ANTHROPIC_BASE_URL"], api_key="x", max_retries=0
    )
    yield client
    client.close()


@pytest.fixture
def gem(emu: RunningEmulator) -> Iterator[genai.Client]:
    client = genai.Client(
        api_key="x",
        http_options=genai_types.HttpOptions(base_url=emu.env()["GOOGLE_GEMINI_BASE_URL"]),
    )
    yield client
    client.close()


@pytest.fixture
def gq(emu: RunningEmulator) -> Iterator[groq.Groq]:
    client = groq.Groq(base_url=emu.env()["GROQ_BASE_URL"], api_key="x", max_retries=0)
    yield client
    client.close()


@pytest.fixture
def oll(emu: RunningEmulator) -> Iterator[ollama.Client]:
    client = ollama.Client(host=emu.env()["OLLAMA_HOST"])
    yield client
    client.close()
