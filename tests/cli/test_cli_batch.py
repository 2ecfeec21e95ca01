"""``agac batch …`` against a real store (B0, B2, B8), and the per-run batch options
of ``agac run``/``validate``/``retry``.

Batch rows are written through the repository API exactly as a run writes them (staged
items, then the intent). ``retrieve`` and ``cancel`` talk to a real batch made in the
emulator through the OpenAI adapter; the CLI reaches it through the emulator's
environment, as a user's shell would.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import agac

from agac.config import find_project, store_url
from agac.jsontext import dumps
from agac.providers.base import BatchHandle, Message, ProviderSettings, Request
from agac.providers.registry import provider_class
from agac.store.batches import staged_key
from agac.store.repository import Store
from agac.store.rows import BatchIntent, StagedItem

WORKFLOW = """\
name: wf
input: {path: data/in.jsonl}
defaults: {model: openai/gpt-4o-mini, run_mode: batch}
actions:
  - name: classify
    prompt: "Classify: {{ source.text }}"
"""
BATCH_SECONDS = 60.0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "agac.yml").write_text("", encoding="utf-8")
    (tmp_path / "wf.yml").write_text(WORKFLOW, encoding="utf-8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.jsonl").write_text(
        "".join(json.dumps({"text": f"review {i}"}) + "\n" for i in range(3)), encoding="utf-8"
    )
    return tmp_path


@pytest.fixture
def store(project: Path) -> Iterator[Store]:
    opened = Store(store_url(find_project(project)))
    yield opened
    opened.close()


def add_intent(
    store: Store,
    key: str,
    *,
    state: str = "submitting",
    count: int = 3,
    workflow: str = "wf",
    created_at: float | None = None,
    tenant: str = "default",
    **fields: Any,
) -> list[str]:
    """Stage ``count`` items and turn them into the intent ``key`` (S1), as a run does."""
    staged = staged_key("run1", "classify", "data/in.jsonl")
    ids = [f"{key}_{i}" for i in range(count)]
    store.stage_items(
        [
            StagedItem(
                staged,
                cid,
                workflow,
                "classify",
                f"data/in.jsonl:{i}",
                "data/in.jsonl",
                f"fp{cid}",
                1,
                "{}",
            )
            for i, cid in enumerate(ids)
        ],
        tenant=tenant,
    )
    now = created_at if created_at is not None else time.time()
    intent = BatchIntent(
        key, workflow, "classify", "data/in.jsonl", 0, "openai", "run1", count, now, tenant
    )
    store.create_intents(staged, [(intent, ids)])
    if state != "submitting" or fields:
        store.update_batch(key, state=state, **fields)
    return ids


def item_statuses(store: Store, key: str) -> list[str]:
    return [item.status for item in store.iter_batch_items(key)]


# -- list and status -------------------------------------------------------------------------


def test_batch_list_shows_every_batch_newest_first(project: Path, store: Store) -> None:
    add_intent(
        store,
        "agac_old",
        state="collected",
        created_at=time.time() - 60,
        provider_batch_id="batch_old",
    )
    add_intent(store, "agac_new", state="submitted", provider_batch_id="batch_new")
    add_intent(store, "agac_other", workflow="other", created_at=time.time() - 30)
    result = agac("batch", "list", "wf", "--json", cwd=project)
    assert result.code == 0, result
    rows = result.json()
    assert [r["key"] for r in rows] == ["agac_new", "agac_old"]
    assert rows[0]["batch_id"] == "batch_new" and rows[0]["open"] is True
    assert rows[1]["state"] == "collected" and rows[1]["open"] is False
    assert {"action", "file", "provider", "requests", "run_id", "created_at"} <= rows[0].keys()
    everything = agac("batch", "list", "--json", cwd=project).json()
    assert [r["key"] for r in everything] == ["agac_new", "agac_other", "agac_old"]
    text = agac("batch", "list", "wf.yml", cwd=project)
    assert text.code == 0
    assert text.out.splitlines()[2].split()[:4] == ["agac_new", "batch_new", "wf", "classify"]


def test_batch_status_defaults_to_the_latest_batch_and_counts_items(
    project: Path, store: Store
) -> None:
    add_intent(store, "agac_old", state="collected", created_at=time.time() - 60)
    add_intent(store, "agac_new", state="submitted", provider_batch_id="batch_new")
    store.set_item_results("agac_new", [("agac_new_0", "answered", None, None)])
    doc = agac("batch", "status", "wf", "--json", cwd=project).json()
    assert doc["key"] == "agac_new" and doc["items"] == {"answered": 1, "pending": 2}
    assert doc["next"] == "agac run wf"
    by_id = agac("batch", "status", "--batch-id", "agac_old", "--json", cwd=project).json()
    assert by_id["key"] == "agac_old" and by_id["next"] is None
    text = agac("batch", "status", "--batch-id", "batch_new", cwd=project)
    assert text.code == 0, text
    assert "state        submitted" in text.out and "next: agac run wf" in text.out


def test_batch_status_of_an_unknown_submission_names_resolve(project: Path, store: Store) -> None:
    add_intent(store, "agac_lost", state="unknown")
    doc = agac("batch", "status", "--json", cwd=project).json()
    assert doc["next"] == "agac batch resolve agac_lost --batch-id ID | --not-submitted"


def test_batch_status_without_batches_or_with_a_wrong_id_exits_2(
    project: Path, store: Store
) -> None:
    empty = agac("batch", "status", "wf", cwd=project)
    assert empty.code == 2 and "wf has no batches yet" in empty.err
    add_intent(store, "agac_a", workflow="other")
    wrong = agac("batch", "status", "wf", "--batch-id", "agac_a", "--json", cwd=project)
    assert wrong.code == 2 and wrong.json()["ok"] is False
    assert "no batch 'agac_a' of wf" in wrong.err


# -- resolve (B2) --------------------------------------------------------------------------


def test_batch_resolve_with_batch_id_makes_the_next_run_poll_it(
    project: Path, store: Store
) -> None:
    add_intent(store, "agac_lost", state="unknown", error="timeout")
    result = agac("batch", "resolve", "agac_lost", "--batch-id", "batch_123", "--json", cwd=project)
    assert result.code == 0, result
    doc = result.json()
    assert (doc["state"], doc["batch_id"], doc["error"]) == ("submitted", "batch_123", None)
    row = store.get_batch("batch_123")
    assert row is not None and row.key == "agac_lost" and row.submitted_at is not None
    assert item_statuses(store, "agac_lost") == ["pending"] * 3


def test_batch_resolve_not_submitted_releases_its_items(project: Path, store: Store) -> None:
    add_intent(store, "agac_lost")  # still submitting: the process died mid-submit
    result = agac("batch", "resolve", "agac_lost", "--not-submitted", cwd=project)
    assert result.code == 0, result
    assert "sends its records again" in result.out
    row = store.get_batch("agac_lost")
    assert row is not None and row.state == "not_submitted" and row.provider_batch_id is None
    assert item_statuses(store, "agac_lost") == ["not_submitted"] * 3


def test_batch_resolve_refuses_what_it_cannot_settle(project: Path, store: Store) -> None:
    add_intent(store, "agac_done", state="submitted", provider_batch_id="batch_9")
    add_intent(store, "agac_lost", state="unknown")
    settled = agac("batch", "resolve", "agac_done", "--not-submitted", cwd=project)
    assert settled.code == 2 and "only an intent whose submission is unknown" in settled.err
    both = agac("batch", "resolve", "agac_lost", "--not-submitted", "--batch-id", "x", cwd=project)
    neither = agac("batch", "resolve", "agac_lost", cwd=project)
    for result in (both, neither):
        assert result.code == 2 and "exactly one of --batch-id ID or --not-submitted" in result.err
    taken = agac("batch", "resolve", "agac_lost", "--batch-id", "batch_9", cwd=project)
    assert taken.code == 2 and "already belongs to agac_done" in taken.err
    missing = agac("batch", "resolve", "agac_nope", "--not-submitted", cwd=project)
    assert missing.code == 2 and "no batch intent with key 'agac_nope'" in missing.err
    row = store.get_batch("agac_lost")
    assert row is not None and row.state == "unknown"


# -- retrieve and cancel, against the emulator -------------------------------------------------


async def _with_openai(call: Any) -> Any:
    adapter = provider_class("openai")(ProviderSettings(name="openai"))
    try:
        return await call(adapter)
    finally:
        await adapter.aclose()


def submit_real_batch(store: Store, key: str) -> BatchHandle:
    """A batch the emulator really holds, recorded as submitted (as a run records it)."""
    ids = add_intent(store, key)
    requests = [
        Request(
            provider="openai",
            model="gpt-4o-mini",
            max_tokens=64,
            custom_id=cid,
            messages=(Message("user", f"Review {cid}: works fine."),),
        )
        for cid in ids
    ]
    handle: BatchHandle = asyncio.run(_with_openai(lambda a: a.submit_batch(requests, key)))
    store.update_batch(
        key,
        state="submitted",
        provider_batch_id=handle.id,
        meta=dumps(handle.meta),
        submitted_at=time.time(),
    )
    return handle


def test_batch_retrieve_writes_raw_results_as_jsonl(
    project: Path, store: Store, emulator: Any
) -> None:
    handle = submit_real_batch(store, "agac_r")
    emulator.advance(BATCH_SECONDS + 1)
    out = project / "out" / "results.jsonl"
    result = agac(
        "batch", "retrieve", "wf", "--out", str(out), "--json", cwd=project, env=emulator.env()
    )
    assert result.code == 0, result
    doc = result.json()
    assert doc["batch_id"] == handle.id and doc["results"] == 3
    assert doc["types"] == {"succeeded": 3}
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["custom_id"] for line in lines) == ["agac_r_0", "agac_r_1", "agac_r_2"]
    for line in lines:
        assert set(line) == {"custom_id", "type", "response", "error"}
        assert line["type"] == "succeeded" and line["error"] is None
        assert line["response"]["text"] and line["response"]["stop_reason"] == "end"
        assert line["response"]["usage"]["output_tokens"] > 0
    # to stdout: JSONL, one result per line; nothing was recorded in the store
    plain = agac("batch", "retrieve", "--batch-id", handle.id, cwd=project, env=emulator.env())
    assert plain.code == 0, plain
    assert len(plain.out.splitlines()) == 3
    assert item_statuses(store, "agac_r") == ["pending"] * 3
    row = store.get_batch("agac_r")
    assert row is not None and row.state == "submitted" and row.collected_by is None


def test_batch_retrieve_refuses_a_batch_that_has_not_ended(
    project: Path, store: Store, emulator: Any
) -> None:
    submit_real_batch(store, "agac_r")
    result = agac("batch", "retrieve", "wf", cwd=project, env=emulator.env())
    assert result.code == 2 and "can be read once it has ended" in result.err
    assert result.out == ""
    add_intent(store, "agac_s")
    never = agac("batch", "retrieve", "--batch-id", "agac_s", cwd=project, env=emulator.env())
    assert never.code == 2 and "never accepted by the provider" in never.err


def test_batch_cancel_cancels_at_the_provider_and_claims_nothing(
    project: Path, store: Store, emulator: Any
) -> None:
    handle = submit_real_batch(store, "agac_c")
    result = agac(
        "batch", "cancel", "wf", "--batch-id", handle.id, "--json", cwd=project, env=emulator.env()
    )
    assert result.code == 0, result
    assert result.json()["state"] == "cancelling"
    status = asyncio.run(_with_openai(lambda a: a.poll_batch(handle)))
    assert status.state in ("cancelling", "cancelled"), status
    row = store.get_batch("agac_c")
    assert row is not None and row.state == "cancelling" and row.collected_by is None
    assert item_statuses(store, "agac_c") == ["pending"] * 3
    again = agac(
        "batch",
        "status",
        "--batch-id",
        "agac_c",
        "--poll",
        "--json",
        cwd=project,
        env=emulator.env(),
    )
    assert again.code == 0, again
    assert again.json()["provider_status"]["state"] in ("cancelling", "cancelled")


def test_batch_cancel_refuses_closed_or_unsent_batches(project: Path, store: Store) -> None:
    add_intent(store, "agac_done", state="collected", provider_batch_id="batch_d")
    add_intent(store, "agac_lost", state="unknown")
    closed = agac("batch", "cancel", "--batch-id", "batch_d", cwd=project)
    assert closed.code == 2 and "already collected" in closed.err
    unsent = agac("batch", "cancel", "--batch-id", "agac_lost", cwd=project)
    assert unsent.code == 2 and "agac batch resolve agac_lost" in unsent.err
    no_id = agac("batch", "cancel", "wf", cwd=project)
    assert no_id.code == 2 and "--batch-id" in no_id.err


# -- per-run options ---------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--poll-interval", "--batch-deadline"])
@pytest.mark.parametrize("value", ["0s", "soon", "1.5h"])
def test_run_rejects_a_bad_duration_with_exit_2(project: Path, option: str, value: str) -> None:
    result = agac("run", "wf", option, value, cwd=project)
    assert result.code == 2, result
    assert f"Invalid value for '{option}'" in result.err


def test_validate_takes_the_run_mode_and_tuning_of_a_run(project: Path) -> None:
    # Ollama runs batch actions locally and needs no key (the mock has no batch API).
    (project / "mock.yml").write_text(
        WORKFLOW.replace("name: wf", "name: mocked").replace(
            "openai/gpt-4o-mini, run_mode: batch", "ollama/m"
        ),
        encoding="utf-8",
    )
    result = agac(
        "validate",
        "mocked",
        "--run-mode",
        "batch",
        "--poll-interval",
        "30s",
        "--batch-deadline",
        "2h",
        "--json",
        cwd=project,
    )
    assert result.code == 0, result
    assert result.json()["warnings"] == []
    online = agac("validate", "mocked", "--poll-interval", "30s", "--json", cwd=project)
    assert online.code == 0, online
    assert [w["code"] for w in online.json()["warnings"]] == ["tuning_without_batch"]
    memory = agac(
        "validate",
        "mocked",
        "--run-mode",
        "batch",
        "--json",
        cwd=project,
        env={"AGAC_STORE": "memory"},
    )
    assert memory.code == 2
    assert [e["code"] for e in memory.json()["errors"]] == ["not_durable"]


def test_run_refuses_batch_mode_on_a_provider_without_a_batch_api(project: Path) -> None:
    (project / "mock.yml").write_text(
        WORKFLOW.replace("name: wf", "name: mocked").replace(
            "openai/gpt-4o-mini, run_mode: batch", "mock/m"
        ),
        encoding="utf-8",
    )
    refused = agac("run", "mocked", "--run-mode", "batch", "--json", cwd=project)
    assert refused.code == 2, refused
    [error] = refused.json()["errors"]
    assert error["code"] == "batch_unsupported" and error["file"] == "mock.yml"
    assert "action 'classify'" in error["message"] and "provider 'mock'" in error["message"]
    text = agac("run", "mocked", "--run-mode", "batch", cwd=project)
    assert text.code == 2 and "[batch_unsupported]" in text.err
    assert agac("run", "mocked", cwd=project).code == 0  # online, as written


def test_retry_takes_abandon_in_flight(project: Path) -> None:
    (project / "mock.yml").write_text(
        WORKFLOW.replace("name: wf", "name: mocked").replace("openai/gpt-4o-mini", "ollama/m"),
        encoding="utf-8",
    )
    result = agac("retry", "mocked", "--abandon-in-flight", cwd=project)
    assert result.code == 2, result
    assert "has no finished run to retry" in result.err
