"""The cache hint an llm action's runtime gives its requests (docs/workflow-reference.md,
Prompt caching): worked out once per run, shared by every request, never in the
fingerprint."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from agac.config.model import Action
from agac.engine.actions import build_runtime
from agac.engine.requests import build_request
from agac.providers.mock import MockProvider

SYSTEM = "You are careful."
PREFIX = "P" * 5000


@pytest.fixture(autouse=True)
def caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        MockProvider,
        "spec",
        dataclasses.replace(MockProvider.spec, cache_minimum=lambda model: 1024),
    )


def _action(**kw: object) -> Action:
    values: dict[str, object] = {
        "name": "a",
        "model": "mock/m",
        "provider": "mock",
        "model_name": "m",
        "system": SYSTEM,
        "prompt": "Head.\n{{ source.text }}",
    }
    values.update(kw)
    return Action(**values)  # type: ignore[arg-type]


def test_i24_hint_once_per_run_with_its_key(tmp_path: Path) -> None:
    rt = build_runtime(
        _action(context_text=PREFIX, context_prefix="x"), None, tmp_path, workflow="wf"
    )
    hint = rt.cache
    assert hint is not None and hint.static_chars == len(PREFIX + "\n\n" + "Head.\n")
    assert (
        hint.key
        == hashlib.sha256(
            "\x1f".join(("wf", "a", SYSTEM, PREFIX + "\n\nHead.\n")).encode()
        ).hexdigest()[:32]
    )
    assert rt.cache_texts == (SYSTEM, PREFIX + "\n\nHead.\n")
    one, two = (build_request(rt, {"source": {"text": t}}) for t in ("one", "two"))
    assert one.cache is two.cache is hint  # shared, not built per request
    assert (
        one.fingerprint()
        == build_request(
            build_runtime(
                _action(context_text=PREFIX, context_prefix="x", cache_mode="off", cache_ttl="1h"),
                None,
                tmp_path,
                workflow="wf",
            ),
            {"source": {"text": "one"}},
        ).fingerprint()
    )


def test_i24_a_system_reading_the_record_is_not_static(tmp_path: Path) -> None:
    rt = build_runtime(
        _action(system="About {{ source.text }}", context_text=PREFIX, context_prefix="x"),
        None,
        tmp_path,
        workflow="wf",
    )
    assert rt.cache is not None and rt.cache.system is False
    assert rt.cache_texts[0] is None


def test_i24_a_rendering_without_the_head_gets_the_prefix_only_hint(tmp_path: Path) -> None:
    rt = build_runtime(
        _action(context_text=PREFIX, context_prefix="x"), None, tmp_path, workflow="wf"
    )
    rt = dataclasses.replace(rt, cache_head="Not what renders")
    request = build_request(rt, {"source": {"text": "one"}})
    assert request.cache is rt.cache_fallback
    assert request.cache is not None and request.cache.static_chars == len(PREFIX + "\n\n")


def test_i24_no_prefix_keeps_the_prompt_alone(tmp_path: Path) -> None:
    rt = build_runtime(_action(cache_mode="on"), None, tmp_path, workflow="wf")
    request = build_request(rt, {"source": {"text": "one"}})
    assert request.chat[0].content == "Head.\none"
    assert request.cache is not None and request.cache.static_chars == len("Head.\n")
    off = build_request(
        build_runtime(_action(cache_mode="off"), None, tmp_path), {"source": {"text": "one"}}
    )
    assert off.cache is None and off.canonical() == request.canonical()


def test_i24_a_provider_without_a_minimum_gets_no_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        MockProvider, "spec", dataclasses.replace(MockProvider.spec, cache_minimum=None)
    )
    rt = build_runtime(
        _action(cache_mode="on", context_text=PREFIX, context_prefix="x"), None, tmp_path
    )
    assert rt.cache is None and rt.cache_fallback is None


def test_i24_an_empty_context_prefix_adds_nothing(tmp_path: Path) -> None:
    rt = build_runtime(
        _action(context_text="", context_prefix="{{ read('empty.md') }}"),
        None,
        tmp_path,
        workflow="wf",
    )
    plain = build_runtime(_action(), None, tmp_path, workflow="wf")
    view = {"source": {"text": "one"}}
    assert build_request(rt, view).canonical() == build_request(plain, view).canonical()
