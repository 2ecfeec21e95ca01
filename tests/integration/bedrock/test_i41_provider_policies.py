"""Issue "Providers, part 3": docs/providers.md shows the IAM role and bucket each cloud
needs as a minimal policy. Every control-plane and runtime operation agac's Bedrock
adapter makes in a job's whole life (live call, create, poll, read, find, stop), as the
emulator saw it over loopback, is an action the page's Bedrock list grants; the service
role's policy is valid JSON granting the S3 reads and writes a job does, its trust policy
names Bedrock; the Vertex bindings are valid JSON giving the bucket role to agac's
identity and to Vertex's service agent."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bedrock_support import MODEL, requests

from agac.providers.base import Message, Request

DOCS = Path(__file__).resolve().parents[3] / "docs" / "providers.md"

#: The IAM action behind each operation the emulator names.
BEDROCK_ACTIONS = {
    "chat": "bedrock:InvokeModel",
    "batch.create": "bedrock:CreateModelInvocationJob",
    "batch.get": "bedrock:GetModelInvocationJob",
    "batch.list": "bedrock:ListModelInvocationJobs",
    "batch.cancel": "bedrock:StopModelInvocationJob",
}


def _section(start: str, end: str) -> str:
    text = DOCS.read_text()
    return text[text.index(start) : text.index(end)]


def _json_blocks(text: str) -> list[Any]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.DOTALL)]


async def test_i41_docs_bedrock_policy_grants_every_operation_agac_makes(
    bedrock: Any, emulator: Any
) -> None:
    provider = bedrock()
    await provider.complete(Request("bedrock", MODEL, (Message("user", "hi"),)))
    handle = await provider.submit_batch(requests(100), "k-policy")
    await provider.poll_batch(handle)
    await provider.find_batch("k-policy")
    await provider.cancel_batch(handle)
    emulator.advance(3600)
    await provider.poll_batch(handle)
    seen = {r["op"] for r in emulator.requests() if r["provider"] == "bedrock"}
    assert seen == set(BEDROCK_ACTIONS)
    section = _section('<a id="bedrock"></a>', '<a id="vertex"></a>')
    for op in sorted(seen):
        assert f"`{BEDROCK_ACTIONS[op]}`" in section, op
    for action in ("iam:PassRole", "s3:PutObject", "s3:GetObject", "s3:DeleteObject"):
        assert f"`{action}`" in section, action
    [role_policy] = _json_blocks(section)
    [statement] = role_policy["Statement"]
    assert statement["Effect"] == "Allow"
    assert set(statement["Action"]) == {"s3:GetObject", "s3:PutObject", "s3:ListBucket"}
    bucket = re.search(r"batch_bucket: s3://([^/\s]+)/(\S+)", section)
    assert bucket is not None
    name, folder = bucket.groups()
    assert set(statement["Resource"]) == {
        f"arn:aws:s3:::{name}",
        f"arn:aws:s3:::{name}/{folder}/*",
    }
    trust = re.search(r"trust policy\s*`(\{.*?\})`", section, re.DOTALL)
    assert trust is not None
    assert json.loads(trust.group(1))["Principal"] == {"Service": "bedrock.amazonaws.com"}


def test_i41_docs_vertex_policy_binds_the_bucket_role_to_agac_and_the_service_agent() -> None:
    section = _section('<a id="vertex"></a>', "#### Claude on Vertex AI")
    [policy] = _json_blocks(section)
    [binding] = policy["bindings"]
    assert binding["role"] == "roles/storage.objectUser"
    members = binding["members"]
    assert any(m.endswith("@gcp-sa-aiplatform.iam.gserviceaccount.com") for m in members)
    assert any(not m.endswith("@gcp-sa-aiplatform.iam.gserviceaccount.com") for m in members)
    for permission in (
        "aiplatform.endpoints.predict",
        "aiplatform.batchPredictionJobs.create",
        "roles/aiplatform.user",
    ):
        assert permission in section, permission
