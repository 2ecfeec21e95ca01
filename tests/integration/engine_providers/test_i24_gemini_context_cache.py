"""Gemini explicit context caches (docs/providers.md, Gemini explicit caches): created
through the google-genai SDK against the emulator, one per run and action with ``cache:
on`` and a static prefix over the model's minimum, named by every request, deleted when
the run ends or is cancelled, left to its TTL by a crash, and its storage in the cost
ledger.

"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from cache_support import SYSTEM, make_project

from agac import api
from agac.errors import FatalError
from agac.providers.base import TRANSPORTS, ProviderSettings
from agac.providers.contextcaches import context_cache_api
from agac.providers.gemini import GeminiProvider

FLASH = "gemini-2.5-flash"
LONG = "Clause. " * 800  # ~1,600 tokens


def _live(caches: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in caches["caches"] if c["deleted_at"] is None]


def _named(emulator: Any) -> list[str | None]:
    """The cache each live generateContent call named (None: none)."""
    return [
        (r["body"] or {}).get("cachedContent")
        for r in emulator.requests()
        if r["provider"] == "gemini" and r["op"] == "chat"
    ]


def _events(run_id: str, project: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in api.events(run_id, project) if e["kind"] == kind]


# -- the adapter, on the SDK ---------------------------------------------------------------


def test_i24_gemini_context_cache_created_and_deleted_through_the_sdk(emulator: Any) -> None:
    async def go() -> tuple[Any, Any]:
        provider = GeminiProvider(ProviderSettings("gemini", base_url=emulator.url, api_key="test"))
        try:
            api_ = context_cache_api(provider, FLASH)
            assert api_ is not None and api_.minimum == 1024
            made = await provider.create_context_cache(FLASH, SYSTEM, LONG, 600, "agac-t")
            listed = emulator.context_caches()
            await provider.delete_context_cache(made.name)
            await provider.delete_context_cache(made.name)  # gone already: not an error
            return made, listed
        finally:
            await provider.aclose()

    made, listed = asyncio.run(go())
    assert made.name.startswith("cachedContents/")
    (cache,) = listed["caches"]
    assert cache["name"] == made.name and cache["tokens"] == made.tokens > 1024
    assert cache["display_name"] == "agac-t"
    assert abs(made.expires_at - cache["expires_at"]) < 2
    assert _live(emulator.context_caches()) == []
    ops = [r["op"] for r in emulator.requests() if r["provider"] == "gemini"]
    assert ops == ["cache.create", "cache.delete", "cache.delete"]


def test_i24_gemini_context_cache_under_the_minimum_is_refused_as_fatal(emulator: Any) -> None:
    async def go() -> None:
        provider = GeminiProvider(ProviderSettings("gemini", base_url=emulator.url, api_key="test"))
        try:
            await provider.create_context_cache(FLASH, None, "short", 600, "agac-t")
        finally:
            await provider.aclose()

    with pytest.raises(FatalError, match="too small"):
        asyncio.run(go())


def test_i24_gemini_context_cache_the_emulator_counts_a_named_cache_as_cached(
    emulator: Any,
) -> None:
    """A live call naming a cache reads its tokens as cached (inside the prompt count);
    one naming a deleted cache gets Gemini's 403."""

    async def go() -> str:
        provider = GeminiProvider(ProviderSettings("gemini", base_url=emulator.url, api_key="test"))
        try:
            return (await provider.create_context_cache(FLASH, SYSTEM, LONG, 600, "t")).name
        finally:
            await provider.aclose()

    name = asyncio.run(go())
    url = f"{emulator.url}/v1beta/models/{FLASH}:generateContent"
    body = {"cachedContent": name, "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    usage = httpx.post(url, json=body, headers={"x-goog-api-key": "t"}).json()["usageMetadata"]
    tokens = emulator.context_caches()["caches"][0]["tokens"]
    assert usage["cachedContentTokenCount"] == tokens < usage["promptTokenCount"]
    httpx.delete(f"{emulator.url}/v1beta/{name}", headers={"x-goog-api-key": "t"})
    gone = httpx.post(url, json=body, headers={"x-goog-api-key": "t"})
    assert gone.status_code == 403 and "CachedContent not found" in gone.text
    assert emulator.context_caches()["refused"] == 1
    assert emulator.context_caches()["caches"][0]["live"] == 1


# -- the run's lifecycle -------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_i24_gemini_context_cache_one_per_run_named_by_every_request_deleted_at_the_end(
    emulator: Any, tmp_path: Path, transport: str
) -> None:
    make_project(tmp_path, records=5, transport=transport)

    result = api.run("cached", tmp_path)

    summary = result.summary
    assert summary["state"] == "succeeded"
    (cache,) = emulator.context_caches()["caches"]  # exactly one cache for the run
    assert cache["deleted_at"] is not None  # deleted when the run ended
    assert _named(emulator) == [cache["name"]] * 5  # every request named it
    assert cache["live"] == 5 and emulator.context_caches()["refused"] == 0
    (created,) = _events(summary["run_id"], tmp_path, "context_cache_created")
    assert created["data"]["name"] == cache["name"]
    assert created["data"]["tokens"] == cache["tokens"]
    # at most an hour: a run without a deadline, an online action
    assert created["data"]["expires_at"] - created["created_at"] <= 3600 + 5
    (deleted,) = _events(summary["run_id"], tmp_path, "context_cache_deleted")
    assert deleted["data"]["name"] == cache["name"]
    cost = api.cost(summary["run_id"], tmp_path)
    calls = [r for r in cost["rows"] if r["kind"] == "llm"]
    assert sum(r["cached_tokens"] for r in calls) == 5 * cache["tokens"]
    (storage,) = [r for r in cost["rows"] if r["origin"] == "cache_storage"]
    assert storage["kind"] == "cache" and storage["calls"] == 1
    assert storage["model"] == "gemini-2.5-flash" and "price" not in storage
    # Gemini 2.5 Flash keeps a cache at $1.00 per 1M tokens per hour, billed until deleted
    seconds = deleted["created_at"] - created["created_at"]
    assert (
        deleted["data"]["cost_usd"] == pytest.approx(cache["tokens"] * seconds / 3600 * 1.00 / 1e6)
        and deleted["data"]["cost_usd"] > 0
    )
    assert storage["cost_usd"] == round(deleted["data"]["cost_usd"], 6)


def test_i24_gemini_context_cache_storage_price_comes_from_prices_in_agac_yml(
    emulator: Any, tmp_path: Path
) -> None:
    make_project(tmp_path, records=1)
    (tmp_path / "agac.yml").write_text(
        "providers:\n  gemini: {transport: lean}\n"
        "prices:\n  gemini/gemini-2.5-flash: {input: 0.3, output: 2.5, cache_storage: 3600000}\n",
        encoding="utf-8",
    )

    summary = api.run("cached", tmp_path).summary

    (cache,) = emulator.context_caches()["caches"]
    (storage,) = [
        r for r in api.cost(summary["run_id"], tmp_path)["rows"] if r["origin"] == "cache_storage"
    ]
    (created,) = _events(summary["run_id"], tmp_path, "context_cache_created")
    (deleted,) = _events(summary["run_id"], tmp_path, "context_cache_deleted")
    # $3.6M per 1M tokens per hour is $0.001 per token-second, from creation to deletion
    seconds = deleted["created_at"] - created["created_at"]
    assert seconds > 0
    assert storage["cost_usd"] == pytest.approx(cache["tokens"] * seconds * 0.001, rel=1e-3)
    assert deleted["data"]["cost_usd"] == pytest.approx(storage["cost_usd"], abs=1e-6)


def test_i24_gemini_context_cache_refused_by_the_provider_the_requests_go_whole(
    emulator: Any, tmp_path: Path
) -> None:
    emulator.add_fault({"provider": "gemini", "op": "cache.create", "fault": {"http": 429}})
    make_project(tmp_path, records=2)

    summary = api.run("cached", tmp_path).summary

    assert summary["state"] == "succeeded"
    assert emulator.context_caches()["caches"] == [] and _named(emulator) == [None, None]
    (refused,) = _events(summary["run_id"], tmp_path, "context_cache_refused")
    assert "429" in refused["data"]["error"]


@pytest.mark.parametrize("cache", ["auto", "off"])
def test_i24_gemini_context_cache_none_without_cache_on(
    emulator: Any, tmp_path: Path, cache: str
) -> None:
    make_project(tmp_path, records=2, cache=cache)

    assert api.run("cached", tmp_path).summary["state"] == "succeeded"

    assert emulator.context_caches()["caches"] == []
    assert _named(emulator) == [None, None]


def test_i24_gemini_context_cache_agac_cancel_deletes_it(emulator: Any, tmp_path: Path) -> None:
    """A batch action's cache lives until its batch ends (its batch deadline): the paused
    run holds it, ``agac cancel`` deletes it."""
    make_project(tmp_path, records=3, run_mode="batch")

    paused = api.run("cached", tmp_path).summary
    assert paused["state"] == "waiting"
    (cache,) = _live(emulator.context_caches())
    assert cache["batch"] == 3  # every line of the batch named it
    assert cache["expires_at"] - cache["created_at"] > 24 * 3600  # the batch deadline

    api.cancel(paused["run_id"], tmp_path)

    assert _live(emulator.context_caches()) == []
    (deleted,) = _events(paused["run_id"], tmp_path, "context_cache_deleted")
    assert deleted["data"]["name"] == cache["name"]
    kinds = {r["origin"] for r in api.cost(paused["run_id"], tmp_path)["rows"]}
    assert "cache_storage" in kinds


def test_i24_gemini_context_cache_a_continued_batch_run_reuses_it(
    emulator: Any, tmp_path: Path
) -> None:
    make_project(tmp_path, records=3, run_mode="batch")
    assert api.run("cached", tmp_path).summary["state"] == "waiting"
    for batch in emulator.stats()["batches"]:
        emulator.advance_batch(batch["id"])

    summary = api.run("cached", tmp_path).summary

    assert summary["state"] == "succeeded"
    (cache,) = emulator.context_caches()["caches"]  # the continuation created none
    assert cache["deleted_at"] is not None and emulator.context_caches()["refused"] == 0
    cost = api.cost(summary["run_id"], tmp_path)
    assert (
        sum(r["cached_tokens"] for r in cost["rows"] if r["kind"] == "llm") == 3 * cache["tokens"]
    )


# -- a crash ---------------------------------------------------------------------------------


def _agac(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        check=False,
        cwd=root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_i24_gemini_context_cache_sigkill_leaves_it_and_the_rerun_reuses_it(
    emulator: Any, tmp_path: Path
) -> None:
    make_project(tmp_path, records=12, concurrency=1)

    crashed = _agac(
        tmp_path, "run", "cached", "--json", env={"AGAC_CRASH_AT": "after_checkpoint:3"}
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (left,) = _live(emulator.context_caches())  # the crash left it to its TTL

    resumed = _agac(tmp_path, "run", "cached", "--json")

    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["state"] == "succeeded"
    (cache,) = emulator.context_caches()["caches"]  # reused: no second cache
    assert cache["name"] == left["name"] and cache["deleted_at"] is not None
    assert emulator.context_caches()["refused"] == 0  # no request named a deleted cache
    assert set(_named(emulator)) == {cache["name"]}
    cost = json.loads(_agac(tmp_path, "cost", "cached", "--json").stdout)
    (storage,) = [r for r in cost["rows"] if r["origin"] == "cache_storage"]
    assert (storage["kind"], storage["calls"]) == ("cache", 1)


def test_i24_gemini_context_cache_a_rerun_after_the_cache_expired_creates_another(
    emulator: Any, tmp_path: Path
) -> None:
    """The crash left the cache to its TTL; an hour later it is gone: the continued run
    ledgers its storage until it expired, creates another and names only that one."""
    from agac.api.projects import project_of, store_url
    from agac.store.repository import Store
    from agac.testing import ManualClock

    make_project(tmp_path, records=12, concurrency=1)
    crashed = _agac(
        tmp_path, "run", "cached", "--json", env={"AGAC_CRASH_AT": "after_checkpoint:3"}
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (first,) = emulator.context_caches()["caches"]
    lived = first["expires_at"] - first["created_at"]
    emulator.advance(lived + 1)  # it expires at the provider, and for agac
    clock = ManualClock()
    clock.advance(lived + 1)
    store = Store(store_url(project_of(tmp_path)), clock=clock)
    emulator.reset_stats()
    try:
        summary = api.run("cached", tmp_path, store=store).summary
    finally:
        store.close()

    assert summary["state"] == "succeeded"
    caches = emulator.context_caches()["caches"]
    assert len(caches) == 2 and caches[1]["deleted_at"] is not None
    assert set(_named(emulator)) == {caches[1]["name"]}
    assert emulator.context_caches()["refused"] == 0
    (expired,) = _events(summary["run_id"], tmp_path, "context_cache_expired")
    assert expired["data"]["name"] == first["name"]
    storage = [
        r for r in api.cost(summary["run_id"], tmp_path)["rows"] if r["origin"] == "cache_storage"
    ]
    assert storage[0]["calls"] == 2
    # the expired one is billed for its whole hour: $1.00 per 1M tokens per hour
    assert storage[0]["cost_usd"] >= first["tokens"] * 1.00 / 1e6 * 0.99
