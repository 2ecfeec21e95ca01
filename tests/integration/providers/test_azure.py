"""Azure OpenAI (docs/providers.md, Azure OpenAI): each of Azure's rules, through the
adapter on both online transports (the ``transport`` fixture) and both surfaces, against
the emulator speaking Azure's routes, ``api-key`` header, ``api-version`` and batch rules.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from provider_support import MODELS, is_model_call, make_request, poll_until

from agac.errors import ConfigError, FatalError, RetryableError, UnsupportedError, WaitError
from agac.media import describe_file
from agac.providers.base import Message, ProviderSettings
from agac.providers.registry import provider_class
from agac.samplefiles import pdf_bytes, png_bytes

DEPLOYMENT = MODELS["azure"]
SURFACES = ("deployments", "v1")


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in emulator.requests()
        if e["op"] == "chat" and is_model_call(e["method"], e["path"])
    ]


def _ops(emulator: Any, op: str) -> list[dict[str, Any]]:
    return [e for e in emulator.requests() if e["op"] == op]


async def test_azure_classic_surface_sends_the_deployment_path_api_key_and_api_version(
    make_provider: Any, emulator: Any
) -> None:
    answer = await make_provider("azure").complete(make_request("azure"))
    assert answer.parsed is not None and answer.stop_reason == "end"
    (entry,) = _chats(emulator)
    assert entry["path"] == f"/azure/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert "api-version=2025-04-01-preview" in entry["query"]
    assert entry["headers"]["api-key"] == "emulator-key"


async def test_azure_v1_surface_names_the_deployment_as_model_without_a_version(
    make_provider: Any, emulator: Any
) -> None:
    answer = await make_provider("azure", surface="v1").complete(make_request("azure"))
    assert answer.parsed is not None
    (entry,) = _chats(emulator)
    assert entry["path"] == "/azure/openai/v1/chat/completions"
    assert entry["body"]["model"] == DEPLOYMENT
    assert "api-version" not in entry["query"]


async def test_azure_endpoint_and_api_version_come_from_agac_yml(
    make_provider: Any, emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = emulator.env()["AZURE_OPENAI_ENDPOINT"]
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT")
    monkeypatch.delenv("OPENAI_API_VERSION")
    adapter = make_provider("azure", endpoint=endpoint, api_version="2024-10-21")
    assert (await adapter.complete(make_request("azure"))).parsed is not None
    assert "api-version=2024-10-21" in _chats(emulator)[0]["query"]


@pytest.mark.parametrize("missing", ["AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"])
def test_azure_without_an_endpoint_or_version_is_refused_naming_it(
    missing: str, emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(missing)
    with pytest.raises(ConfigError) as caught:
        provider_class("azure")(ProviderSettings(name="azure"))
    assert missing in str(caught.value.problems[0].hint)


async def test_azure_entra_token_is_sent_as_a_bearer_when_no_key_is_set(
    make_provider: Any, emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-token")
    assert (await make_provider("azure").complete(make_request("azure"))).parsed is not None
    headers = _chats(emulator)[0]["headers"]
    assert headers["authorization"] == "Bearer entra-token" and "api-key" not in headers


def test_azure_with_no_credentials_at_all_is_missing_credentials(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key, no Entra token, and no azure-identity to find one."""
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    monkeypatch.setitem(sys.modules, "azure.identity", None)  # not installed
    with pytest.raises(UnsupportedError) as caught:
        provider_class("azure")(ProviderSettings(name="azure"))
    assert caught.value.code == "missing_credentials"
    assert "AZURE_OPENAI_API_KEY" in str(caught.value)


@pytest.mark.parametrize(
    ("headers", "query", "status"),
    [({}, "?api-version=2025-04-01-preview", 401), ({"api-key": "k"}, "", 404)],
    ids=["no-key", "no-version"],
)
def test_azure_the_emulator_refuses_a_call_without_a_key_or_a_version(
    headers: dict[str, str], query: str, status: int, emulator: Any
) -> None:
    """The emulator's door is Azure's: what the adapters pass it proves they send both."""
    url = f"{emulator.url}/azure/openai/deployments/{DEPLOYMENT}/chat/completions{query}"
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    sent = urllib.request.Request(
        url, body, {"Content-Type": "application/json", **headers}, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(sent, timeout=10)
    caught.value.close()
    assert caught.value.code == status


async def test_azure_content_filter_results_are_the_stop_detail(
    make_provider: Any, emulator: Any
) -> None:
    emulator.add_fault(
        {
            "provider": "azure",
            "op": "chat",
            "fault": {
                "reply": {
                    "stop": "content_filter",
                    "filter": {"category": "violence", "severity": "high"},
                }
            },
        }
    )
    answer = await make_provider("azure").complete(make_request("azure"))
    assert answer.stop_reason == "content_filter"
    assert answer.stop_detail == "content filter: answer violence (severity high)"


#: Azure's refusal of a prompt by its content filter, as Azure sends it (an HTTP 400; the
#: openai SDK raises it as ``BadRequestError``).
PROMPT_FILTERED = {
    "error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's "
        "content management policy. Please modify your prompt and retry. To learn more about "
        "our content filtering policies please read our documentation: "
        "https://go.microsoft.com/fwlink/?linkid=2198766",
        "type": None,
        "param": "prompt",
        "code": "content_filter",
        "status": 400,
        "innererror": {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {
                "hate": {"filtered": True, "severity": "high"},
                "jailbreak": {"filtered": True, "detected": True},
                "self_harm": {"filtered": False, "severity": "safe"},
                "sexual": {"filtered": False, "severity": "safe"},
                "violence": {"filtered": True, "severity": "medium"},
            },
        },
    }
}


@pytest.mark.parametrize("surface", SURFACES)
async def test_azure_prompt_content_filter_400_fails_content_filter_naming_the_categories(
    surface: str, make_provider: Any, emulator: Any
) -> None:
    """A prompt Azure's filter refuses (HTTP 400, ``code: content_filter``) is a final
    ``content_filter`` failure, never retried, naming each filtered category and its
    severity from ``innererror.content_filter_result``."""
    emulator.add_fault(
        {
            "provider": "azure",
            "op": "chat",
            "fault": {"http": 400, "code": "content_filter", "body": PROMPT_FILTERED},
        }
    )
    with pytest.raises(FatalError) as caught:
        await make_provider("azure", surface=surface).complete(make_request("azure"))
    err = caught.value
    assert (err.reason, err.code, err.status) == ("content_filter", "content_filter", 400)
    assert "content filter: prompt hate (severity high), prompt jailbreak, " in str(err)
    assert "prompt violence (severity medium)" in str(err)
    assert "self_harm" not in str(err) and "sexual" not in str(err)


async def test_azure_the_emulator_s_prompt_filter_fault_has_azure_s_shape(
    make_provider: Any, emulator: Any
) -> None:
    """With no body of its own, the emulator's ``content_filter`` fault answers as Azure
    does: the innererror names the category it filtered."""
    emulator.add_fault(
        {"provider": "azure", "op": "chat", "fault": {"http": 400, "code": "content_filter"}}
    )
    with pytest.raises(FatalError) as caught:
        await make_provider("azure").complete(make_request("azure"))
    assert caught.value.reason == "content_filter"
    assert "content filter: prompt violence (severity medium)" in str(caught.value)


async def test_azure_an_ordinary_400_stays_a_provider_error(
    make_provider: Any, emulator: Any
) -> None:
    emulator.add_fault(
        {"provider": "azure", "op": "chat", "fault": {"http": 400, "code": "invalid_request"}}
    )
    with pytest.raises(FatalError) as caught:
        await make_provider("azure").complete(make_request("azure"))
    assert caught.value.reason == "provider_error"


async def test_azure_a_prompt_filtered_batch_line_is_a_content_filter_error(
    make_provider: Any, emulator: Any
) -> None:
    """In a batch, the line of a prompt the filter refused (``status_code: 400``, Azure's
    error body) is an errored result whose error fails ``content_filter``; the others are
    answered."""
    emulator.add_fault(
        {
            "provider": "azure",
            "op": "batch.create",
            "match": {"custom_id": "r1"},
            "fault": {"http": 400, "code": "content_filter", "body": PROMPT_FILTERED},
        }
    )
    adapter = make_provider("azure")
    requests = [make_request("azure", f"review {i}", custom_id=f"r{i}") for i in range(3)]
    handle = await adapter.submit_batch(requests, "azure-filtered-line")
    emulator.advance(3600)
    await poll_until(adapter, handle, ("ended",))
    results = {r.custom_id: r async for r in adapter.batch_results(handle)}
    assert {k: r.type for k, r in results.items()} == {
        "r0": "succeeded",
        "r1": "errored",
        "r2": "succeeded",
    }
    err = results["r1"].error
    assert isinstance(err, FatalError) and err.reason == "content_filter"
    assert "prompt hate (severity high)" in str(err)


@pytest.mark.parametrize("surface", SURFACES)
async def test_azure_batch_names_the_deployment_and_writes_no_bom(
    surface: str, make_provider: Any, emulator: Any
) -> None:
    """Every line's ``body.model`` is the deployment and its url the surface's, the batch's
    endpoint too, and the file starts with its first line, not a BOM — read back through
    the openai SDK's own Azure client."""
    adapter = make_provider("azure", surface=surface)
    requests = [make_request("azure", f"review {i}", custom_id=f"r{i}") for i in range(3)]
    handle = await adapter.submit_batch(requests, f"azure-lines-{surface}")
    url = "/v1/chat/completions" if surface == "v1" else "/chat/completions"
    env = emulator.env()
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=env["AZURE_OPENAI_ENDPOINT"],
        api_key=env["AZURE_OPENAI_API_KEY"],
        api_version=env["OPENAI_API_VERSION"],
        max_retries=0,
    )
    try:
        batch = await client.batches.retrieve(handle.id)
        content = (await client.files.content(batch.input_file_id)).content
    finally:
        await client.close()
    assert batch.endpoint == url
    assert content.startswith(b'{"custom_id":')
    lines = [json.loads(line) for line in content.splitlines()]
    assert {(line["url"], line["body"]["model"]) for line in lines} == {(url, DEPLOYMENT)}
    emulator.advance(3600)
    assert (await poll_until(adapter, handle, ("ended",))).raw_status == "completed"
    results = [r async for r in adapter.batch_results(handle)]
    assert sorted(r.custom_id for r in results) == ["r0", "r1", "r2"]
    assert {r.type for r in results} == {"succeeded"}


async def test_azure_batch_file_with_two_deployments_fails_at_the_emulator(
    make_provider: Any, emulator: Any
) -> None:
    """One deployment per file, as Azure: the emulator fails a file naming two (an
    action's requests are one model, so agac never writes one)."""
    adapter = make_provider("azure")
    requests = [
        make_request("azure", custom_id="r0"),
        dataclasses.replace(make_request("azure", custom_id="r1"), model="other-deployment"),
    ]
    handle = await adapter.submit_batch(requests, "azure-two-deployments")
    emulator.advance(3600)
    status = await poll_until(adapter, handle, ("failed",))
    assert status.raw_status == "failed"


async def test_azure_pending_file_is_waited_for_not_refused(
    make_provider: Any, emulator: Any
) -> None:
    emulator.add_fault(
        {"provider": "azure", "op": "file.upload", "times": 1, "fault": {"file_pending": 3}}
    )
    adapter = make_provider("azure")
    handle = await adapter.submit_batch([make_request("azure", custom_id="r0")], "azure-pending")
    gets = _ops(emulator, "file.get")
    assert len(gets) == 4  # three looks at a pending file, then the processed one
    assert len(_ops(emulator, "batch.create")) == 1
    emulator.advance(3600)
    assert (await poll_until(adapter, handle, ("ended",))).state == "ended"


async def test_azure_quota_refusal_on_create_is_a_wait_and_the_file_is_reused(
    make_provider: Any, emulator: Any
) -> None:
    emulator.add_fault(
        {
            "provider": "azure",
            "op": "batch.create",
            "times": 1,
            "fault": {"http": 429, "code": "token_limit_exceeded", "retry_after": 2},
        }
    )
    adapter = make_provider("azure")
    requests = [make_request("azure", custom_id="r0")]
    with pytest.raises(WaitError) as caught:
        await adapter.submit_batch(requests, "azure-quota")
    assert caught.value.retry_after == 2 and caught.value.code == "token_limit_exceeded"
    handle = await adapter.submit_batch(requests, "azure-quota")
    assert len(_ops(emulator, "file.upload")) == 1
    assert len(_ops(emulator, "batch.create")) == 2
    assert handle.meta["input_file_id"]


def test_azure_entra_id_through_azure_identity_needs_no_key(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no key, azure-identity (the ``azure`` extra) is the credential: validation does
    not ask for a key, and the adapter takes its bearer-token provider."""
    from agac.providers.registry import credentials_missing, provider_spec

    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    spec = provider_spec("azure")
    assert credentials_missing(spec) == []
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    assert credentials_missing(spec) == ["AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"]


#: What azure-identity reads to choose a credential: none of the developer's may leak in.
IDENTITY_ENV = (
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_USERNAME",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_AUTHORITY_HOST",
    "AZURE_TOKEN_CREDENTIALS",
    "IDENTITY_SERVER_THUMBPRINT",
    "IMDS_ENDPOINT",
    "MSI_ENDPOINT",
    "MSI_SECRET",
)
IDENTITY_SECRET = "emulator-identity-secret"


@pytest.fixture
def managed_identity(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key: azure-identity's DefaultAzureCredential finds a managed identity whose token
    endpoint (``IDENTITY_ENDPOINT``, as App Service sets it) is the emulator's."""
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    for name in IDENTITY_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDENTITY_ENDPOINT", f"{emulator.url}/azure/identity/token")
    monkeypatch.setenv("IDENTITY_HEADER", IDENTITY_SECRET)


@pytest.mark.parametrize("surface", SURFACES)
async def test_azure_entra_id_through_azure_identity_end_to_end_refreshed_before_expiry(
    surface: str, make_provider: Any, emulator: Any, managed_identity: None
) -> None:
    """With no key, every call carries a bearer token azure-identity's default credential
    got from the (emulated) managed-identity endpoint, for Azure OpenAI's resource. A token
    within five minutes of its expiry is replaced before the next call; a fresh one is
    reused. Batch and file calls carry it too."""
    emulator.entra(token_seconds=120)  # expires inside the refresh margin
    adapter = make_provider("azure", surface=surface)
    assert (await adapter.complete(make_request("azure", "one"))).parsed is not None
    emulator.entra(token_seconds=3600)
    await adapter.complete(make_request("azure", "two"))
    await adapter.complete(make_request("azure", "three"))
    await adapter.submit_batch([make_request("azure", custom_id="r0")], f"entra-{surface}")

    issued = [t["token"] for t in emulator.entra()["issued"]]
    assert len(issued) == 2
    chats = _chats(emulator)
    assert [c["headers"]["authorization"] for c in chats] == [
        f"Bearer {issued[0]}",
        f"Bearer {issued[1]}",
        f"Bearer {issued[1]}",
    ]
    assert all("api-key" not in c["headers"] for c in chats)
    for op in ("file.upload", "batch.create"):
        (call,) = _ops(emulator, op)
        assert call["headers"]["authorization"] == f"Bearer {issued[1]}"
    fetched = _ops(emulator, "token")
    assert len(fetched) == 2
    assert {t["headers"]["x-identity-header"] for t in fetched} == {IDENTITY_SECRET}
    resources = {urllib.parse.parse_qs(t["query"])["resource"][0] for t in fetched}
    assert resources == {"https://cognitiveservices.azure.com"}


async def test_azure_entra_sign_in_refused_is_retryable_naming_the_fix(
    make_provider: Any, emulator: Any, managed_identity: None
) -> None:
    """A token endpoint that refuses the sign-in is a retryable error naming what to set,
    never an azure-identity exception escaping the adapter."""
    emulator.add_fault({"provider": "azure", "op": "token", "fault": {"http": 400}})
    adapter = make_provider("azure")
    with pytest.raises(RetryableError) as caught:
        await adapter.complete(make_request("azure"))
    assert "Entra ID sign-in failed" in str(caught.value)
    assert "AZURE_OPENAI_API_KEY" in str(caught.value)
    assert _chats(emulator) == []


def test_azure_the_emulator_refuses_an_entra_token_it_issued_once_expired(emulator: Any) -> None:
    emulator.entra(token_seconds=0.000001)
    url = f"{emulator.url}/azure/identity/token?api-version=2019-08-01&resource="
    got = urllib.request.Request(
        url + "https://cognitiveservices.azure.com", headers={"X-IDENTITY-HEADER": "s"}
    )
    with urllib.request.urlopen(got, timeout=10) as answer:
        token = json.loads(answer.read())["access_token"]
    chat = f"{emulator.url}/azure/openai/deployments/{DEPLOYMENT}/chat/completions"
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    sent = urllib.request.Request(
        chat + "?api-version=2025-04-01-preview",
        body,
        {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(sent, timeout=10)
    caught.value.close()
    assert caught.value.code == 401


@pytest.mark.parametrize("surface", SURFACES)
async def test_azure_attachments_and_structured_output_go_as_on_openai(
    surface: str, make_provider: Any, emulator: Any, tmp_path: Path
) -> None:
    """An image and a PDF go as OpenAI's ``image_url`` and ``file`` parts and the schema
    as ``response_format: json_schema``, live and in a batch line; the emulator, reading
    them as Azure does, saw both files."""
    (tmp_path / "photo.png").write_bytes(png_bytes(20, 10, seed=3))
    (tmp_path / "invoice.pdf").write_bytes(pdf_bytes(2, "invoice 9"))
    files = (
        describe_file(str(tmp_path / "photo.png")),
        describe_file(str(tmp_path / "invoice.pdf")),
    )
    asked = dataclasses.replace(
        make_request("azure", custom_id="r0"),
        messages=(Message("user", "What is in these files?", files, "before"),),
    )
    adapter = make_provider("azure", surface=surface)

    answer = await adapter.complete(asked)

    assert answer.parsed is not None
    (chat,) = _chats(emulator)
    parts = chat["body"]["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["image_url", "file", "text"]
    assert parts[1]["file"]["filename"] == "invoice.pdf"
    assert chat["body"]["response_format"]["type"] == "json_schema"
    assert all(f.sha256 in json.dumps(chat["body"]) for f in files)  # read as attachments
    handle = await adapter.submit_batch([asked], f"azure-attachments-{surface}")
    env = emulator.env()
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=env["AZURE_OPENAI_ENDPOINT"],
        api_key=env["AZURE_OPENAI_API_KEY"],
        api_version=env["OPENAI_API_VERSION"],
        max_retries=0,
    )
    try:
        batch = await client.batches.retrieve(handle.id)
        (line,) = (await client.files.content(batch.input_file_id)).content.splitlines()
    finally:
        await client.close()
    sent = json.loads(line)["body"]
    image = base64.b64encode(png_bytes(20, 10, seed=3)).decode()
    assert sent["messages"][-1]["content"][0]["image_url"]["url"].endswith(image)
    assert sent["response_format"]["type"] == "json_schema"
