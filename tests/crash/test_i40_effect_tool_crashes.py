"""Tools per record: a function tool marked ``effect:`` in a tool loop, killed with SIGKILL
around its effect (a real ``agac run`` process against the emulator, OpenAI's
``tool_calls``).

The effect runs at most once per idempotency key (the record, the function and its
arguments), whatever the kill: killed after its intent and before the function ran
(``effect_started``) or after the function ran and before its receipt (``effect_called``),
a non-idempotent effect is unknown — the continued run calls it no more and waits on a
person (exit 75, ``agac effects list`` and the summary name it) until ``agac effects
resolve``; an idempotent one is called again with the same key. Killed after the result
is stored (``tool_stored``), it is never called again. The model's second ask for the same
call is told the stored receipt, never run.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from crash_support import agac

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """
name: shop
input: {path: data/, id_field: id}
defaults: {model: openai/gpt-4o-mini, max_concurrency: 1, max_tokens: 128, timeout: 10s}
actions:
  - name: reply
    prompt: "Answer: {{ source.text }}"
    tools:
      - {function: tools.shop:refund, effect: EFFECT}
"""

TOOLS = '''
import json
from pathlib import Path


def refund(order_id: str, ctx) -> dict:
    """Refund an order."""
    with (Path(__file__).parent.parent / "calls.log").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"order": order_id, "key": ctx.idempotency_key}) + "\\n")
    return {"refunded": order_id}
'''

# The model refunds A1, then asks for A1 again together with A2.
TEXT = (
    'refund [[emulator calls: refund {"order_id": "A1"}]] '
    '[[emulator calls: refund {"order_id": "A1"} | refund {"order_id": "A2"}]]'
)


def _project(root: Path, effect: str) -> None:
    write_project(
        root,
        WF.replace("EFFECT", effect),
        workflow_file="shop.yml",
        agac_yml="providers:\n  openai: {transport: lean}\n",
        data={"data/a.jsonl": [{"id": "r0", "text": TEXT}]},
        files={"tools/__init__.py": "", "tools/shop.py": TOOLS},
    )


def _calls(root: Path) -> list[dict[str, str]]:
    log = root / "calls.log"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [json.loads(line) for line in lines]


def _answer(root: Path) -> str:
    (row,) = api.export_rows("shop", "reply", root)
    assert row["status"] == "answered", row
    return str(row["output"]["text"])


def _waits_on_a_person(root: Path, env: dict[str, str]) -> str:
    """The continued run calls nothing and waits on a person; the effect's id."""
    paused = agac(root, env, "run", "shop", "--json")
    assert paused.returncode == 75, (paused.stdout, paused.stderr)
    summary = json.loads(paused.stdout)
    (unknown,) = summary["effects_unknown"]
    assert summary["actions"]["reply"]["pending"] == 1, summary
    listed = json.loads(agac(root, env, "effects", "list", "shop", "--json").stdout)
    assert [(e["state"], e["action"], e["arguments"]) for e in listed] == [
        ("unknown", "reply", {"order_id": "A1"})
    ]
    return str(unknown)


@pytest.mark.parametrize(
    ("point", "settle", "orders"),
    [
        # the function ran, its receipt not recorded: a person says it happened
        ("effect_called:1", "--done", ["A1", "A2"]),
        # its intent recorded, the function not called: a person says it did not happen
        ("effect_started:1", "--not-done", ["A1", "A2"]),
    ],
)
def test_i40_sigkill_around_an_effect_tool_waits_on_a_person(
    tmp_path: Path, point: str, settle: str, orders: list[str]
) -> None:
    _project(tmp_path, "true")
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": point}, "run", "shop")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        ran = len(_calls(tmp_path))
        unknown = _waits_on_a_person(tmp_path, env)
        assert len(_calls(tmp_path)) == ran  # not called again by itself
        resolved = agac(tmp_path, env, "effects", "resolve", unknown[:12], settle)
        assert resolved.returncode == 0, resolved.stderr
        done = agac(tmp_path, env, "run", "shop", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["state"] == "succeeded"
        asked = emu.stats()["requests"]["openai"]["chat"]
    assert [c["order"] for c in _calls(tmp_path)] == orders  # each effect once in all
    assert asked == 3  # each model turn once
    answer = _answer(tmp_path)
    assert '"refunded": "A2"' in answer
    told = '{"effect": "done"}' if settle == "--done" else '{"refunded": "A1"}'
    assert answer.count(told) >= 1, answer


def test_i40_sigkill_after_an_idempotent_effect_calls_it_again_with_its_key(
    tmp_path: Path,
) -> None:
    _project(tmp_path, "{idempotent: true}")
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": "effect_called:1"}, "run", "shop")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        done = agac(tmp_path, env, "run", "shop", "--json")
        assert done.returncode == 0, done.stderr
    calls = _calls(tmp_path)
    assert [c["order"] for c in calls] == ["A1", "A1", "A2"]
    assert calls[0]["key"] == calls[1]["key"] != calls[2]["key"]  # the same key again


def test_i40_sigkill_after_an_effect_result_is_stored_never_calls_it_again(
    tmp_path: Path,
) -> None:
    _project(tmp_path, "true")
    with RunningEmulator() as emu:
        env = emu.env()
        crashed = agac(tmp_path, {**env, "AGAC_CRASH_AT": "tool_stored:1"}, "run", "shop")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        done = agac(tmp_path, env, "run", "shop", "--json")
        assert done.returncode == 0, done.stderr
    assert [c["order"] for c in _calls(tmp_path)] == ["A1", "A2"]
    answer = _answer(tmp_path)
    assert answer.count('{"refunded": "A1"}') == 2, answer  # the second ask told the receipt
