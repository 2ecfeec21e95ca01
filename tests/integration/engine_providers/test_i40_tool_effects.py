"""Tools per record: a function tool marked ``effect:`` goes through the effects rules
(E1, E2) in a tool loop, online through the emulator on both transports (the ``project``
fixture).

Each call's idempotency key is the record's, the function's and its arguments': the
model asking for the same call again, later in the loop or in a later run, is told the
stored receipt and nothing runs again; a call that raises is a failed effect, told to the
model; a call that times out is unknown — the unit waits on a person, listed by
``agac effects list`` — until ``agac effects resolve``. The record's session shows each
call's effect and its state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from e2e_support import project_yml

from agac import api
from agac.cli.main import cli
from agac.testing import write_project

TOOLS = '''\
"""A shop's refunds; each call of refund appends its order and key to calls.log."""

import asyncio
import json
from pathlib import Path


def refund(order_id: str, ctx) -> dict:
    """Refund an order."""
    with (Path(__file__).parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"order": order_id, "key": ctx.idempotency_key}) + "\\n")
    if order_id == "boom":
        raise RuntimeError("the payment service refused")
    return {"refunded": order_id}


async def cancel(order_id: str) -> dict:
    """Cancel an order (never answers)."""
    await asyncio.Event().wait()
    return {}
'''

TWICE = (
    'refund [[emulator calls: refund {"order_id": "A1"}]] '
    '[[emulator calls: refund {"order_id": "A1"} | refund {"order_id": "boom"}]]'
)


def _project(root: Path, records: list[dict[str, Any]]) -> None:
    workflow = """name: shop
input: {path: data/, id_field: id}
defaults:
  model: openai/gpt-4o-mini
  max_tokens: 256
  timeout: 10s
  retry: {max_attempts: 2, backoff: {initial: 10ms, max: 50ms}}
actions:
  - name: reply
    prompt: "Answer the customer: {{ source.text }}"
    tools:
      - {function: tools.shop:refund, effect: true}
      - {function: tools.shop:cancel, effect: true, timeout: 10ms}
"""
    write_project(
        root,
        workflow,
        agac_yml=project_yml(),
        data={"data/in.jsonl": records},
        files={"tools/__init__.py": "", "tools/shop.py": TOOLS},
    )


def _calls(root: Path) -> list[dict[str, str]]:
    log = root / "tools" / "calls.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [json.loads(line) for line in lines]


def test_i40_effect_tool_runs_once_per_key_and_its_session_shows_it(
    emulator: Any, project: Path
) -> None:
    _project(project, [{"id": "r0", "text": TWICE}])

    summary = api.run("shop", project).summary

    assert summary["actions"]["reply"]["answered"] == 1, summary
    calls = _calls(project)
    assert [c["order"] for c in calls] == ["A1", "boom"]  # A1 asked twice, run once
    (row,) = api.export_rows("shop", "reply", project)
    assert row["output"]["text"].count('{"refunded": "A1"}') == 2  # the receipt told again
    assert "the payment service refused" in row["output"]["text"]
    effects = {e["arguments"]["order_id"]: e for e in api.effects_list("shop", project)}
    assert {k: e["state"] for k, e in effects.items()} == {"A1": "succeeded", "boom": "failed"}
    assert effects["A1"]["action"] == "reply" and effects["A1"]["record"] == "r0"
    assert effects["A1"]["function"] == "tools.shop:refund"
    assert effects["A1"]["key"] == calls[0]["key"]  # the key the function was given
    assert effects["A1"]["receipt"] == {"refunded": "A1"}
    (entry,) = api.record_session("r0", project)["actions"]
    states = [t["effect"]["state"] for t in entry["turns"] if t["kind"] == "tool"]
    assert states == ["succeeded", "reused", "failed"]
    shown = CliRunner().invoke(cli, ["records", "show", "r0"], catch_exceptions=False)
    ref = effects["A1"]["id"][:12]
    assert f"result of refund (effect {ref}, succeeded)" in shown.output
    assert f"result of refund (effect {ref}, reused)" in shown.output

    again = api.run("shop", project, new=True).summary  # a later run: reused, nothing runs

    assert again["actions"]["reply"]["answered"] == 1
    assert len(_calls(project)) == 2


def test_i40_effect_tool_that_times_out_is_unknown_and_waits_on_a_person(
    emulator: Any, project: Path
) -> None:
    text = 'cancel [[emulator calls: cancel {"order_id": "A7"}]]'
    _project(project, [{"id": "r0", "text": text}, {"id": "r1", "text": "hello"}])

    result = api.run("shop", project)

    assert result.exit_code == 75, result.summary  # waits on a person
    paused = result.summary
    assert paused["actions"]["reply"]["answered"] == 1  # r1, which called nothing
    assert paused["actions"]["reply"]["pending"] == 1
    (effect,) = api.effects_list("shop", project)
    assert effect["state"] == "unknown" and effect["arguments"] == {"order_id": "A7"}
    assert paused["effects_unknown"] == [effect["id"]]
    asked = emulator.stats()["requests"]["openai"]["chat"]

    api.effects_resolve(effect["id"][:12], True, project)
    done = api.run("shop", project).summary

    assert done["state"] == "succeeded", done
    (row,) = [r for r in api.export_rows("shop", "reply", project) if r["key"] == "r0"]
    assert '{"effect": "done"}' in row["output"]["text"]
    # the stored turn is not asked again: only the answer after the call
    assert emulator.stats()["requests"]["openai"]["chat"] == asked + 1


def test_i40_effect_tools_of_identical_requests_run_for_each_record(
    emulator: Any, project: Path
) -> None:
    """Two records whose requests are identical share no answer when the action has an
    effect tool: each record's loop runs, its refund once under its own key, and a later
    run reuses each record's own answer."""
    once = 'refund [[emulator calls: refund {"order_id": "A1"}]]'
    _project(project, [{"id": "r0", "text": once}, {"id": "r1", "text": once}])

    summary = api.run("shop", project).summary

    assert summary["actions"]["reply"]["answered"] == 2, summary
    calls = _calls(project)
    assert sorted(c["order"] for c in calls) == ["A1", "A1"]
    assert len({c["key"] for c in calls}) == 2  # one idempotency key per record
    effects = api.effects_list("shop", project)
    assert sorted(e["record"] for e in effects) == ["r0", "r1"]
    assert {e["state"] for e in effects} == {"succeeded"}
    rows = {r["key"]: r for r in api.export_rows("shop", "reply", project)}
    assert {k: r["status"] for k, r in rows.items()} == {"r0": "answered", "r1": "answered"}

    again = api.run("shop", project, new=True).summary

    assert again["actions"]["reply"]["answered"] == 2
    assert len(_calls(project)) == 2  # each record's own answer reused: nothing runs again
