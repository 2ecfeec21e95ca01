"""OpenRouter (live): both transports against the emulator's OpenRouter route — the route
options sent as OpenRouter's ``provider`` object, the cost it reports (``usage.cost``) and
the provider that served the call read from every answer, and, through ``agac run``, both
in the cost ledger (the reported cost instead of a priced one; ``served_by``)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from provider_support import make_request

from agac import api
from agac.providers.registry import batch_providers, provider_spec
from agac.testing import write_project

ROUTE = (("allow_fallbacks", "false"), ("provider_order", "DeepInfra, Together"))


async def test_openrouter_route_cost_and_server_on_both_transports(
    make_provider: Any, emulator: Any
) -> None:
    """``provider_order`` and ``allow_fallbacks`` go as ``provider: {order,
    allow_fallbacks}``; the answer's ``usage.cost`` is what it billed, its ``provider`` who
    served it."""
    request = dataclasses.replace(make_request("openrouter"), options=ROUTE)
    response = await make_provider("openrouter").complete(request)
    assert response.stop_reason == "end" and isinstance(response.parsed, dict)
    assert response.served_by == "DeepInfra"
    tokens = response.usage.input_tokens + response.usage.output_tokens
    assert response.billed_usd == pytest.approx(tokens / 1e6)
    [chat] = [e for e in emulator.requests() if e["op"] == "chat"]
    assert chat["path"] == "/openrouter/api/v1/chat/completions"
    assert chat["body"]["provider"] == {
        "order": ["DeepInfra", "Together"],
        "allow_fallbacks": False,
    }
    assert "provider_order" not in chat["body"] and "allow_fallbacks" not in chat["body"]
    assert chat["body"]["model"] == "openai/gpt-4o-mini"


async def test_openrouter_without_route_sends_no_provider(
    make_provider: Any, emulator: Any
) -> None:
    response = await make_provider("openrouter").complete(make_request("openrouter"))
    assert response.served_by == "Openai"  # the emulator's default: the model's vendor
    [chat] = [e for e in emulator.requests() if e["op"] == "chat"]
    assert "provider" not in chat["body"]


def test_openrouter_spec_has_an_inline_batch_api_and_route_options() -> None:
    spec = provider_spec("openrouter")
    assert spec.batch is not None and "openrouter" in batch_providers()
    assert (spec.batch.input, spec.batch.max_requests, spec.batch.find) == (
        "inline",
        5000,
        "window",
    )
    assert spec.credential_env == ("OPENROUTER_API_KEY",) and spec.sdk_module == "openai"
    names = {o.name for o in spec.request_options}
    assert {"provider_order", "allow_fallbacks"} <= names


WORKFLOW = """\
name: orw
input: {path: data/, id_field: id}
defaults: {model: openrouter/openai/gpt-4o-mini, max_tokens: 64}
actions:
  - name: label
    prompt: "Label: {{ source.text }}"
    provider_options: {provider_order: Together, allow_fallbacks: "false"}
"""


def test_openrouter_ledger_takes_the_billed_cost_and_the_serving_provider(
    emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agac run``: each call's ledger row holds the cost OpenRouter reported for it (not
    the model's price table) and the provider that served it."""
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    rows = [{"id": f"r{i}", "text": f"item {i}"} for i in range(3)]
    write_project(root, WORKFLOW, data={"data/a.jsonl": rows})

    result = api.run("orw", root)

    assert result.exit_code == 0, result.notes
    with sqlite3.connect(root / ".agac" / "agac.db") as db:
        ledger = db.execute(
            "SELECT input_tokens + cached_tokens + output_tokens, cost_usd, served_by "
            "FROM usage WHERE run_id = ? AND kind = 'llm'",
            (result.run_id,),
        ).fetchall()
    assert len(ledger) == 3
    for tokens, cost, served_by in ledger:
        assert cost == pytest.approx(tokens / 1e6)
        assert served_by == "Together"
    assert result.cost_usd == pytest.approx(sum(cost for _, cost, _ in ledger))
