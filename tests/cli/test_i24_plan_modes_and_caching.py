"""``agac plan``: the mode each llm action would run in (for ``run_mode: auto``, the mode a
run admitted now would choose, and why) and its cost online and batch, each without and
with prompt caching of the action's static prefix."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import agac

from agac.testing import write_project

SYSTEM = "S" * 4400  # 1,100 tokens, the same for every record (OpenAI caches from 1,024)
PRICES = """\
prices:
  openai/gpt-4o-mini: {input: 1.0, output: 2.0, cached_input: 0.1, cache_write: 1.25}
  anthropic/claude-sonnet-4-5: {input: 1.0, output: 2.0, cached_input: 0.1, cache_write: 1.25}
"""


def _project(
    root: Path,
    system: str,
    *,
    records: int = 3,
    threshold: int = 2,
    extra: str = "",
    model: str = "openai/gpt-4o-mini",
) -> None:
    workflow = (
        f"name: wf\ninput: {{path: data/in.jsonl}}\n{extra}"
        f"defaults: {{model: {model}, max_tokens: 10}}\nactions:\n"
        f"  - name: classify\n    run_mode: auto\n    auto_batch_min_records: {threshold}\n"
        f'    system: "{system}"\n    prompt: "Classify: {{{{ source.text }}}}"\n'
        "  - name: reply\n    dependencies: [classify]\n    run_mode: online\n"
        '    prompt: "Reply to {{ source.text }}"\n'
    )
    write_project(
        root,
        workflow,
        agac_yml=PRICES,
        data={"data/in.jsonl": [{"text": f"item {i}"} for i in range(records)]},
    )


ENV = {"OPENAI_API_KEY": "sk-test"}


def test_i24_plan_shows_the_mode_auto_would_choose_and_why(tmp_path: Path) -> None:
    root = tmp_path / "at"
    _project(root, SYSTEM)
    doc = agac("plan", "wf", "--json", cwd=root, env=ENV).json()
    classify, reply = doc["actions"]["classify"], doc["actions"]["reply"]
    assert (classify["run_mode"], classify["mode"]) == ("auto", "batch")
    assert classify["mode_why"].startswith("at_threshold: 3 units")
    assert reply["mode"] == "online" and "mode_why" not in reply
    assert doc["cost_usd"]["as_configured"] == pytest.approx(
        classify["cost_usd"]["batch"] + reply["cost_usd"]["online"], abs=2e-6
    )
    fewer = tmp_path / "fewer"
    _project(fewer, SYSTEM, threshold=4)
    assert (
        agac("plan", "wf", "--json", cwd=fewer, env=ENV).json()["actions"]["classify"]["mode"]
        == "online"
    )
    tight = tmp_path / "tight"
    _project(tight, SYSTEM, extra="deadline: 2h\n")
    action = agac("plan", "wf", "--json", cwd=tight, env=ENV).json()["actions"]["classify"]
    assert action["mode"] == "online" and action["mode_why"].startswith("deadline")
    text = agac("plan", "wf", cwd=root, env=ENV)
    assert text.code == 0, text
    assert "auto → batch" in text.out
    assert "classify: run_mode auto would choose batch now (at_threshold" in text.out


def test_i24_plan_prices_a_static_prefix_written_once_and_read_after(tmp_path: Path) -> None:
    _project(tmp_path, SYSTEM)
    doc = agac("plan", "wf", "--json", cwd=tmp_path, env=ENV).json()
    classify = doc["actions"]["classify"]
    prefix = classify["cache_prefix_tokens"]
    assert prefix == (4400 + len("Classify: ") + 3) // 4  # the system prompt and the literal head
    cost = classify["cost_usd"]
    # 3 requests: the first writes the prefix (1.25 instead of 1.0), two read it (0.1)
    saving = prefix * (2 * (1.0 - 0.1) - (1.25 - 1.0)) / 1e6
    assert cost["online"] - cost["online_cached"] == pytest.approx(saving, abs=2e-6)
    assert cost["batch"] - cost["batch_cached"] == pytest.approx(saving / 2, abs=2e-6)
    # the reply's static prefix ("Reply to ", 3 tokens) is under OpenAI's minimum
    assert doc["actions"]["reply"]["cache_prefix_tokens"] == 0
    reply = doc["actions"]["reply"]["cost_usd"]
    assert reply["online_cached"] == reply["online"]
    assert doc["cost_usd"]["online_cached"] < doc["cost_usd"]["online"]


def test_i24_plan_prices_a_one_hour_anthropic_write_at_twice_the_input(tmp_path: Path) -> None:
    _project(tmp_path, SYSTEM, model="anthropic/claude-sonnet-4-5")
    wf = tmp_path / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace("max_tokens: 10}", "max_tokens: 10, cache_ttl: 1h}"))
    doc = agac("plan", "wf", "--json", cwd=tmp_path, env={"ANTHROPIC_API_KEY": "k"}).json()
    classify = doc["actions"]["classify"]
    prefix, cost = classify["cache_prefix_tokens"], classify["cost_usd"]
    assert classify["cache_ttl"] == "1h" and prefix > 1024
    saving = prefix * (2 * (1.0 - 0.1) - (2.0 - 1.0)) / 1e6
    assert cost["online"] - cost["online_cached"] == pytest.approx(saving, abs=2e-6)


def test_i24_plan_a_system_prompt_reading_the_record_leaves_nothing_to_cache(
    tmp_path: Path,
) -> None:
    _project(tmp_path, "You judge {{ source.text }} carefully")
    classify = agac("plan", "wf", "--json", cwd=tmp_path, env=ENV).json()["actions"]["classify"]
    assert classify["cache_prefix_tokens"] == 0
    assert classify["cost_usd"]["online_cached"] == classify["cost_usd"]["online"]
    assert classify["cost_usd"]["batch_cached"] == classify["cost_usd"]["batch"]
