"""Vertex AI live calls (Gemini models) against the emulator over loopback, on both
transports: google-auth signs a service account's grant and gets a token from the
emulator's token endpoint, the call goes to Vertex's generateContent path with it, the
answer is read as Gemini's (stops, usage, schema), errors are agac's taxonomy, and
google-auth never looks for a metadata server."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from vertex_support import LOCATION, MODEL, PROJECT, request

from agac.errors import ConfigError, FatalError, RetryableError, WaitError
from agac.providers.base import ProviderSettings
from agac.providers.registry import provider_spec
from agac.providers.vertex import VertexProvider

TRANSPORTS = ["lean", "sdk"]
PATH = (
    f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/"
    f"{MODEL}:generateContent"
)


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if r["op"] == "chat" and r["provider"] == "vertex"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_vertex_live_generate_content_on_vertex_path_with_issued_token(
    vertex: Any, emulator: Any, transport: str
) -> None:
    answer = await vertex(transport).complete(request())
    assert answer.stop_reason == "end" and answer.raw_stop == "STOP"
    assert isinstance(answer.parsed, dict) and set(answer.parsed) == {"label"}
    assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0
    [chat] = _chats(emulator)
    assert chat["path"] == PATH
    body = chat["body"]
    assert body["generationConfig"]["responseJsonSchema"] == request().schema
    assert body["systemInstruction"]["parts"] == [{"text": "You label reviews."}]
    bearer = chat["headers"]["authorization"].removeprefix("Bearer ")
    assert bearer.startswith("ya29.emulator-")
    tokens = [r for r in emulator.requests() if r["path"] == "/vertex/token"]
    assert tokens == []  # the token endpoint is not a provider call: never counted


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_vertex_live_token_is_asked_once_and_reused(
    vertex: Any, emulator: Any, transport: str
) -> None:
    provider = vertex(transport)
    for i in range(3):
        await provider.complete(request(f"review {i}"))
    bearers = {c["headers"]["authorization"] for c in _chats(emulator)}
    assert len(bearers) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_vertex_live_stop_max_tokens_and_safety_read_as_gemini(
    vertex: Any, emulator: Any, transport: str
) -> None:
    emulator.add_fault(
        {
            "provider": "vertex",
            "op": "chat",
            "times": 1,
            "fault": {"reply": {"stop": "MAX_TOKENS"}},
        },
        {
            "provider": "vertex",
            "op": "chat",
            "times": 1,
            "fault": {"reply": {"stop": "SAFETY", "safety_category": "HARM_CATEGORY_HARASSMENT"}},
        },
    )
    provider = vertex(transport)
    cut = await provider.complete(request("one"))
    assert (cut.stop_reason, cut.raw_stop) == ("max_tokens", "MAX_TOKENS")
    blocked = await provider.complete(request("two"))
    assert blocked.stop_reason == "content_filter"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("status", "kind"), [(400, FatalError), (429, WaitError), (503, RetryableError)]
)
async def test_vertex_live_errors_translated(
    vertex: Any, emulator: Any, transport: str, status: int, kind: type[Exception]
) -> None:
    fault: dict[str, Any] = {"http": status}
    if status == 429:
        fault["retry_after"] = 7
    emulator.add_fault({"provider": "vertex", "op": "chat", "fault": fault})
    with pytest.raises(kind) as caught:
        await vertex(transport).complete(request())
    assert caught.value.status == status  # type: ignore[attr-defined]
    if status == 429:
        assert caught.value.retry_after == 7  # type: ignore[attr-defined]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_vertex_live_call_without_a_valid_token_is_refused(
    vertex: Any, emulator: Any, transport: str, tmp_path: Path
) -> None:
    """The emulator takes only tokens it issued: a credentials file whose token
    endpoint is elsewhere fails the call as a sign-in refusal, never a silent answer."""
    import json

    key = json.loads(Path(tmp_path / "service-account.json").read_text())
    key["token_uri"] = f"{emulator.url}/nowhere"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(key))
    provider = vertex(transport, credentials=str(other))
    with pytest.raises(Exception) as caught:
        await provider.complete(request())
    assert "token" in str(caught.value).lower()
    assert _chats(emulator) == []


def test_vertex_is_a_provider_with_batch_and_both_transports() -> None:
    spec = provider_spec("vertex")
    assert spec.transports == ("lean", "sdk")
    assert spec.batch is not None and spec.batch.max_requests == 200_000
    assert "implicit" in spec.cache_kinds and spec.flex is None


def test_vertex_without_credentials_names_the_fix_and_asks_no_metadata_server(
    gcp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key file and no gcloud sign-in: google-auth would ask a Google Cloud machine's
    metadata server last; with NO_GCE_CHECK it does not, and nothing listening at the
    metadata address hears from it."""
    heard: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]

    def watch() -> None:
        try:
            conn, _ = listener.accept()
            heard.append(conn.recv(100))
            conn.close()
        except OSError:
            return

    watcher = threading.Thread(target=watch)
    watcher.start()
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{port}")
    monkeypatch.setenv("GCE_METADATA_IP", f"127.0.0.1:{port}")
    try:
        with pytest.raises(ConfigError) as caught:
            VertexProvider(ProviderSettings(name="vertex"))
    finally:
        watcher.join()
        listener.close()
    assert caught.value.problems[0].code == "missing_credentials"
    assert "GOOGLE_APPLICATION_CREDENTIALS" in str(caught.value.problems[0].hint)
    assert heard == []


def test_vertex_without_project_names_the_option(
    gcp: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json

    key = json.loads(Path(tmp_path / "service-account.json").read_text())
    del key["project_id"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(key))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    with pytest.raises(ConfigError) as caught:
        VertexProvider(ProviderSettings(name="vertex", options={"credentials": str(bare)}))
    assert "project" in str(caught.value.problems[0].hint)
