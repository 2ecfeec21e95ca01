"""Prices through the real ``agac`` process (docs/cli.md, agac cost, issue 12 item 6): a model with no
known price is never a silent $0 — a warning at the start of ``agac validate`` and ``agac
run``, ``unpriced`` in ``agac cost``, a budget on it refused (``unpriced_model``) unless
agac.yml prices it; a batch call with no batch price is ``derived`` at half the live price.
"""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

WF = """\
name: priced
input: {path: data/a.jsonl, id_field: id}
defaults: {model: MODEL}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""
ROWS = [{"id": i, "text": f"text {i}"} for i in range(3)]
UNPRICED = "openai/gpt-internal-2099"


def _project(root: Path, model: str, *, head: str = "", config: str = "") -> Path:
    write_project(
        root, head + WF.replace("MODEL", model), data={"data/a.jsonl": ROWS}, agac_yml=config
    )
    return root


def test_unpriced_model_warns_at_validate(tmp_path: Path, emulator: RunningEmulator) -> None:
    root = _project(tmp_path, UNPRICED)

    text = agac("validate", "priced", cwd=root, env=emulator.env())
    doc = agac("validate", "priced", "--json", cwd=root, env=emulator.env()).json()

    assert text.code == 0, text
    assert "unpriced_model" in text.out + text.err
    assert [w["code"] for w in doc["warnings"]] == ["unpriced_model"]
    assert doc["ok"] is True


def test_unpriced_model_warns_at_run_start_and_is_marked_in_cost(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    root = _project(tmp_path, UNPRICED)

    result = agac("run", "priced", "--json", cwd=root, env=emulator.env())

    assert result.code == 0, result
    assert result.err.startswith(f"warning: model {UNPRICED} has no known price"), result.err
    cost = agac("cost", "priced", "--json", cwd=root, env=emulator.env()).json()
    [row] = cost["rows"]
    assert (row["price"], row["cost_usd"]) == ("unpriced", 0.0)
    assert row["calls"] >= 3 and row["input_tokens"] > 0
    text = agac("cost", "priced", cwd=root, env=emulator.env())
    assert "unpriced: no known price, counted $0" in text.out


def test_budget_on_unpriced_model_is_refused(tmp_path: Path, emulator: RunningEmulator) -> None:
    root = _project(tmp_path, UNPRICED, head="budget: {usd: 5}\n")

    refused = agac("run", "priced", "--json", cwd=root, env=emulator.env())

    assert refused.code == 2, refused
    assert [e["code"] for e in refused.json()["errors"]] == ["unpriced_model"]


def test_budget_on_a_model_agac_yml_prices_runs(tmp_path: Path, emulator: RunningEmulator) -> None:
    root = _project(
        tmp_path,
        UNPRICED,
        head="budget: {usd: 5}\n",
        config=f"prices:\n  {UNPRICED}: {{input: 1.0, output: 2.0}}\n",
    )

    result = agac("run", "priced", "--json", cwd=root, env=emulator.env())

    assert result.code == 0, result
    assert "warning" not in result.err
    cost = agac("cost", "priced", "--json", cwd=root, env=emulator.env()).json()
    [row] = cost["rows"]
    assert row["price"] is None and row["cost_usd"] > 0


def test_batch_without_a_batch_price_is_derived_in_cost(
    tmp_path: Path, emulator: RunningEmulator
) -> None:
    """Groq's llama-3.3-70b has a live price in the library and no batch price."""
    root = _project(tmp_path, "groq/llama-3.3-70b-versatile", head="")
    wf = root / "workflows" / "wf.yml"
    wf.write_text(wf.read_text().replace("defaults: {", "defaults: {run_mode: batch, "))
    env = emulator.env()
    assert agac("run", "priced", cwd=root, env=env).code == 75
    emulator.advance(120)
    done = agac("run", "priced", "--json", cwd=root, env=env)
    assert done.code == 0, done

    cost = agac("cost", "priced", "--json", cwd=root, env=env).json()
    [row] = cost["rows"]
    assert (row["tier"], row["price"]) == ("batch", "derived")
    assert row["cost_usd"] > 0
    text = agac("cost", "priced", cwd=root, env=env)
    assert "derived: no batch price known, half the live price" in text.out
