"""Azure OpenAI through ``agac run``, live on both transports (docs/providers.md, Azure
OpenAI): what Azure's content filter refuses — a prompt (HTTP 400 ``content_filter``) or
an answer (``finish_reason: content_filter``) — fails its record ``content_filter`` with
the filter's categories and severities in the record's export row and session; with no
key, a run signs in with Entra ID through azure-identity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import e2e_support
import pytest
from e2e_support import reviews, workflow

from agac import api
from agac.testing import write_project

MODEL = "azure/gpt-4o-mini"


def _project(root: Path) -> None:
    write_project(
        root,
        workflow(MODEL, concurrency=1, summarize=False),
        agac_yml=f"providers:\n  azure: {{transport: {e2e_support.TRANSPORT}}}\n",
        data={"data/reviews.jsonl": reviews(4)},
    )


def _filter_faults() -> tuple[dict[str, Any], ...]:
    """The first call's prompt refused by the filter, the second call's answer filtered."""
    return (
        {
            "provider": "azure",
            "op": "chat",
            "nth": 1,
            "times": 1,
            "fault": {"http": 400, "code": "content_filter"},
        },
        {
            "provider": "azure",
            "op": "chat",
            "nth": 2,
            "times": 1,
            "fault": {
                "reply": {
                    "stop": "content_filter",
                    "filter": {"category": "hate", "severity": "high"},
                }
            },
        },
    )


def test_azure_content_filter_live_fails_content_filter_with_categories_in_export_and_session(
    emulator: Any, project: Path
) -> None:
    _project(project)
    emulator.add_fault(*_filter_faults())

    done = api.run("triage", project)

    assert done.exit_code == 1, done.notes
    assert done.summary["actions"]["classify"]["reasons"] == {"content_filter": 2}
    rows = {r["key"]: r for r in api.export_rows("triage", "classify", project)}
    failed = {k: r for k, r in rows.items() if r["status"] == "failed"}
    assert {r["reason"] for r in failed.values()} == {"content_filter"}
    details = sorted(str(r["detail"]) for r in failed.values())
    assert "refused the prompt (content filter: prompt violence (severity medium))" in details[0]
    assert (
        "stopped the answer (content_filter, content filter: answer hate (severity high))"
        in (details[1])
    )
    for key, row in failed.items():
        session = str(api.record_session(key, project, workflow="triage"))
        assert "content_filter" in session and str(row["detail"]) in session
    # A filtered prompt or answer is final: one call each, never retried.
    assert emulator.stats()["requests"]["azure"]["chat"] == 4


def test_azure_entra_id_run_signs_in_through_azure_identity_with_no_key(
    emulator: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agac run`` with no Azure key: azure-identity's default credential signs in at the
    (emulated) managed identity once, and every call carries its token."""
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDENTITY_ENDPOINT", f"{emulator.url}/azure/identity/token")
    monkeypatch.setenv("IDENTITY_HEADER", "emulator-identity-secret")
    _project(project)

    done = api.run("triage", project)

    assert done.exit_code == 0, done.notes
    assert done.summary["actions"]["classify"]["answered"] == 4
    (token,) = [t["token"] for t in emulator.entra()["issued"]]
    chats = [e for e in emulator.requests() if e["op"] == "chat"]
    assert len(chats) == 4
    assert {c["headers"].get("authorization") for c in chats} == {f"Bearer {token}"}
