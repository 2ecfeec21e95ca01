"""Issue "Providers, part 3": Bedrock through ``agac run``, live and in batch, against the
emulator's runtime and control plane and moto's S3 over loopback — the ledger equal to
what Bedrock bills: live, every record one Converse call priced at the model's live rate;
in batch, the tokens of the job's output (read back from the S3 object Bedrock wrote, not
from agac's own records) at the batch price (half the live one where none is known)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bedrock_support import BUCKET, MODEL, ROLE

from agac import api
from agac.providers.pricing import PriceLibrary
from agac.testing import write_project

WORKFLOW = "bedledger"


def _project(root: Path, prefix: str, mode: str, n: int) -> None:
    settings = {"batch_bucket": prefix, "role_arn": ROLE}
    agac_yml = "providers:\n  bedrock: " + json.dumps(settings) + "\n"
    workflow = "\n".join(
        [
            f"name: {WORKFLOW}",
            "input: {path: data/, id_field: id}",
            "defaults:",
            f"  model: bedrock/{MODEL}",
            f"  run_mode: {mode}",
            "  max_tokens: 64",
            "actions:",
            "  - name: classify",
            '    prompt: "Classify: {{ source.text }}"',
        ]
    )
    data = {"data/a.jsonl": [{"id": f"a{i}", "text": f"item {i}"} for i in range(n)]}
    write_project(root, workflow + "\n", data=data, agac_yml=agac_yml)


def _billed(aws: Any, prefix: str) -> dict[str, int]:
    """Records and tokens of every ``records.jsonl.out`` under the prefix."""
    total = {"records": 0, "input": 0, "output": 0}
    folder = prefix.split(f"{BUCKET}/", 1)[1]
    listed = aws.list_objects_v2(Bucket=BUCKET, Prefix=folder)
    for obj in listed.get("Contents") or ():
        if not str(obj["Key"]).endswith("records.jsonl.out"):
            continue
        body = aws.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
        for raw in body.splitlines():
            usage = json.loads(raw)["modelOutput"]["usage"]
            total["records"] += 1
            total["input"] += int(usage["inputTokens"])
            total["output"] += int(usage["outputTokens"])
    return total


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aws: Any, emulator: Any) -> Path:
    emulator.hold_clock()
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def _price() -> Any:
    price = PriceLibrary(cache_dir=None).lookup("bedrock", MODEL)
    assert price is not None
    return price


def test_i41_bedrock_run_live_ledger_is_priced_at_the_live_rate(
    project: Path, prefix: str, emulator: Any
) -> None:
    _project(project, prefix, "online", 5)
    done = api.run(WORKFLOW, project)
    assert done.exit_code == 0, done.notes
    calls = [r for r in emulator.requests() if r["op"] == "chat"]
    assert len(calls) == 5 and all(c["path"].endswith(f"/{MODEL}/converse") for c in calls)
    [row] = [r for r in api.cost(WORKFLOW, project)["rows"] if r["provider"] == "bedrock"]
    assert row["calls"] == 5 and row["input_tokens"] > 0 and row["output_tokens"] > 0
    live = _price().live
    expected = (row["input_tokens"] * live.input + row["output_tokens"] * live.output) / 1e6
    assert row["cost_usd"] == pytest.approx(expected, abs=5e-6)


def test_i41_bedrock_run_batch_ledger_is_the_jobs_output_at_the_batch_price(
    project: Path, prefix: str, emulator: Any, aws: Any
) -> None:
    _project(project, prefix, "batch", 120)
    first = api.run(WORKFLOW, project)
    assert first.exit_code == 75, first.notes
    emulator.advance(3600)
    done = api.run(WORKFLOW, project)
    assert done.exit_code == 0, done.notes
    assert "chat" not in emulator.stats()["requests"]["bedrock"]
    bill = _billed(aws, prefix)
    assert bill["records"] == 120
    [row] = [r for r in api.cost(WORKFLOW, project)["rows"] if r["provider"] == "bedrock"]
    assert (row["calls"], row["input_tokens"], row["output_tokens"]) == (
        120,
        bill["input"],
        bill["output"],
    )
    price = _price()
    rates = price.batch
    batch_in = rates.input if rates else price.live.input / 2
    batch_out = rates.output if rates else price.live.output / 2
    expected = (bill["input"] * batch_in + bill["output"] * batch_out) / 1e6
    assert row["cost_usd"] == pytest.approx(expected, abs=120e-6)
    live = (bill["input"] * price.live.input + bill["output"] * price.live.output) / 1e6
    assert row["cost_usd"] < live * 0.6  # the batch price, never the live one
