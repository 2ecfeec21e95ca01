"""The Python API as a notebook uses it (docs/python.md): a workflow given as a dict, records
from pandas, polars and Arrow, ``agac.run`` inside a running event loop (no nest_asyncio)
and ``await agac.arun``, results back as DataFrames."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import agac
from agac import api
from agac.errors import ConfigError, UsageError

WORKFLOW: dict[str, Any] = {
    "name": "reviews",
    "input": {"id_field": "id"},
    "defaults": {"model": "mock/nb", "max_concurrency": 4},
    "actions": [
        {
            "name": "classify",
            "prompt": "Classify: {{ source.text }}",
            "schema": {
                "type": "object",
                "required": ["label", "score", "meta"],
                "properties": {
                    "label": {"enum": ["pos", "neg"]},
                    "score": {"type": "integer"},
                    "meta": {
                        "type": "object",
                        "required": ["lang"],
                        "properties": {"lang": {"type": "string"}},
                    },
                },
            },
        },
        {
            "name": "reply",
            "dependencies": ["classify"],
            "when": "classify.label == 'neg'",
            "prompt": "Reply to: {{ source.text }}",
        },
    ],
}
WHEN = dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.UTC)


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "text": ["great", "awful", "fine"],
            "stars": [5.0, float("nan"), 3.0],
            "at": [pd.Timestamp(WHEN), pd.NaT, pd.Timestamp(WHEN)],
        }
    )


@pytest.fixture
def nb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A notebook's working folder; the project is a folder that does not exist yet."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / "project"


def _check(result: Any, df: pd.DataFrame, keys: list[str]) -> None:
    assert result.state == "succeeded" and result.exit_code == 0
    assert result.actions["classify"]["answered"] == 3
    assert result.cost_usd == 0.0 and result.tenant == "default"
    assert result.to_dict()["run_id"] == result.run_id
    assert df["key"].tolist() == keys
    assert set(df["classify.label"]) <= {"pos", "neg"}
    assert df["classify#status"].tolist() == ["answered"] * 3
    assert df["classify.meta.lang"].map(type).eq(str).all()
    # reply ran only where classify said neg; elsewhere it was skipped by its guard.
    neg = df["classify.label"] == "neg"
    assert (df.loc[neg, "reply#status"] == "answered").all()
    assert (df.loc[~neg, "reply#reason"] == "guard").all()
    assert df.loc[neg, "reply.text"].str.startswith("mock answer").all()


async def test_run_inside_a_running_event_loop_from_pandas(nb: Path) -> None:
    asyncio.get_running_loop()  # a cell of a notebook runs inside the kernel's loop
    result = agac.run(WORKFLOW, nb, records=frame(), progress=False)
    assert (nb / "agac.yml").is_file() and (nb / "workflows" / "reviews.yml").is_file()
    df = agac.results(result, include_source=True, project=nb).to_pandas()
    _check(result, df, ["a", "b", "c"])
    assert df["source.text"].tolist() == ["great", "awful", "fine"]
    assert df["source.stars"].iloc[0] == 5.0 and math.isnan(df["source.stars"].iloc[1])
    at = df["source.at"]
    assert at.isna().tolist() == [False, True, False]  # NaT -> null
    assert at[0] == at[2] == "2026-03-01T09:30:00+00:00"  # timestamps: ISO-8601
    # The same values the per-action export gives.
    narrow = {r["key"]: r["output"] for r in api.export_rows("reviews", "classify", nb)}
    assert df.set_index("key")["classify.label"].to_dict() == {
        k: v["label"] for k, v in narrow.items()
    }


async def test_arun_from_polars_and_keys_records_n_without_id_field(nb: Path) -> None:
    workflow = {**WORKFLOW, "name": "reviews_pl", "input": None}
    del workflow["input"]
    records = pl.from_pandas(frame().drop(columns=["id"]))
    result = await agac.arun(workflow, nb, records=records, progress=False)
    df = agac.results("reviews_pl", project=nb).to_polars().to_pandas()
    _check(result, df, ["records:1", "records:2", "records:3"])


async def test_run_inside_a_running_event_loop_from_polars_and_from_arrow(nb: Path) -> None:
    asyncio.get_running_loop()  # as a notebook's cell: agac.run, not arun
    polars_run = agac.run(
        {**WORKFLOW, "name": "in_loop_pl"}, nb, records=pl.from_pandas(frame()), progress=False
    )
    polars_df = agac.results(polars_run, include_source=True, project=nb).to_polars()
    assert isinstance(polars_df, pl.DataFrame)
    _check(polars_run, polars_df.to_pandas(), ["a", "b", "c"])
    assert polars_df["source.text"].to_list() == ["great", "awful", "fine"]
    arrow_run = agac.run(
        {**WORKFLOW, "name": "in_loop_pa"},
        nb,
        records=pa.Table.from_pandas(frame(), preserve_index=False),
        progress=False,
    )
    table = agac.results(arrow_run, project=nb).to_arrow()
    assert isinstance(table, pa.Table) and table.num_rows == 3
    _check(arrow_run, table.to_pandas(), ["a", "b", "c"])
    # The same records through pandas, polars and Arrow give the same answers.
    assert polars_df["classify.label"].to_list() == table.column("classify.label").to_pylist()


def test_run_from_arrow_and_dicts_without_a_loop(nb: Path) -> None:
    table = pa.Table.from_pandas(frame(), preserve_index=False)
    result = agac.run(WORKFLOW, nb, records=table, progress=False)
    arrow = agac.results(result, project=nb).to_arrow()
    assert arrow.schema.field("classify.score").type == pa.int64()
    _check(result, arrow.to_pandas(), ["a", "b", "c"])
    rows = list(agac.results(result, "classify", project=nb))
    assert [r["key"] for r in rows] == ["a", "b", "c"] and "reply#status" not in rows[0]
    # The same records as dicts: the same snapshot, so the open-run check passes and the
    # finished run's answers are reused.
    again = agac.run(WORKFLOW, nb, records=frame().to_dict("records"), progress=False)
    assert again.actions["classify"]["calls"] == 0 and again.actions["classify"]["reused"] == 3


def test_a_bytes_column_is_refused_and_admits_nothing(nb: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        agac.run(WORKFLOW, nb, records=pd.DataFrame({"id": ["a"], "text": [b"x"]}), progress=False)
    assert caught.value.problems[0].code == "invalid_input"
    assert api.list_runs(project=nb) == []


def test_validate_plan_and_render_take_a_dict_and_records(nb: Path) -> None:
    workflow, problems = agac.validate(WORKFLOW, nb, records=frame())
    assert workflow is not None and workflow.input.records, problems
    _, problems = agac.validate(WORKFLOW, nb)  # without records it needs input.path
    assert "missing_key" in [p.code for p in problems]
    plan = agac.plan(WORKFLOW, nb, records=frame())
    assert plan["records"] == 3 and plan["actions"]["classify"]["requests"] == 3
    rendered = agac.render(WORKFLOW, "b", "classify", project=nb, records=frame())
    assert rendered[0]["request"]["messages"][-1]["content"] == "Classify: awful"
    assert api.list_runs(project=nb) == []  # nothing admitted, nothing sent


def test_results_name_a_run_by_result_id_dict_or_name(nb: Path) -> None:
    result = agac.run(WORKFLOW, nb, records=frame(), progress=False)
    tables = [
        agac.results(ref, "classify", project=nb).to_arrow()
        for ref in (result, result.run_id, WORKFLOW, "reviews")
    ]
    assert all(t.equals(tables[0]) for t in tables)
    assert tables[0].column_names == [
        "key",
        "classify.label",
        "classify.score",
        "classify.meta.lang",
        "classify#status",
        "classify#reason",
    ]


def test_t2_a_notebook_run_keeps_the_tenant_it_is_given(nb: Path) -> None:
    assert (
        agac.run(WORKFLOW, nb, records=frame(), tenant="default", progress=False).tenant
        == "default"
    )
    other = agac.run(
        {**WORKFLOW, "name": "other"}, nb, records=frame(), tenant="acme", progress=False
    )
    assert other.tenant == "acme"
    assert [r["workflow"] for r in api.list_runs(project=nb)] == ["reviews"]
    assert [r["workflow"] for r in api.list_runs(project=nb, tenant="acme")] == ["other"]
    with pytest.raises(UsageError, match="tenant"):
        agac.run(WORKFLOW, nb, records=frame(), tenant="no tenant", progress=False)


def test_a_missing_data_library_names_the_extra(
    nb: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    result = agac.run(WORKFLOW, nb, records=frame().to_dict("records"), progress=False)
    for module, call in (("pandas", "to_pandas"), ("polars", "to_polars"), ("pyarrow", "to_arrow")):
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
        with pytest.raises(UsageError, match=r"pip install -e '\.\[data\]' in your clone"):
            getattr(agac.results(result, project=nb), call)()
        monkeypatch.undo()
    # Dicts in and JSONL/CSV out need none of them.
    rows = list(agac.results(result, project=nb))
    assert len(rows) == 3


async def test_cancelling_arun_stops_the_run_gently_and_the_next_call_continues_it(
    nb: Path,
) -> None:
    nb.mkdir()
    (nb / "agac.yml").write_text("providers: {mock: {latency_ms: 150}}\n")
    slow = {**WORKFLOW, "defaults": {"model": "mock/nb", "max_concurrency": 2}}
    many = pd.DataFrame(
        {"id": [f"k{i}" for i in range(40)], "text": [f"text {i}" for i in range(40)]}
    )  # 40 distinct requests
    task = asyncio.create_task(agac.arun(slow, nb, records=many, progress=False))
    await _answering(nb, task)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    runs = api.list_runs(project=nb)
    assert len(runs) == 1 and runs[0]["state"] == "running"  # interrupted, not ended
    done = agac.run(slow, nb, progress=False)  # no records: the open run's own snapshot
    assert done.run_id == runs[0]["run_id"] and done.state == "succeeded"
    assert done.actions["classify"]["answered"] == 40


async def _answering(nb: Path, task: asyncio.Task[Any]) -> None:
    """Return once the run is admitted and has answered a record (however slow the machine:
    the deadline only guards a hang)."""
    deadline = asyncio.get_running_loop().time() + 240
    while True:
        await asyncio.sleep(0.05)
        assert not task.done(), task
        runs = api.list_runs(project=nb)
        if runs and api.status(runs[0]["run_id"], nb)["actions"]["classify"]["answered"] > 0:
            return
        assert asyncio.get_running_loop().time() < deadline, "the run never answered"


def test_retry_of_a_run_over_records_needs_no_records(
    nb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = {**WORKFLOW, "defaults": {"model": "mock/nb", "retry": {"max_attempts": 1}}}
    monkeypatch.setenv("AGAC_MOCK_FAIL_RATE", "1")
    failed = agac.run(flaky, nb, records=frame(), progress=False)
    assert failed.state == "failed" and failed.actions["classify"]["failed"] == 3
    monkeypatch.delenv("AGAC_MOCK_FAIL_RATE")
    retried = agac.retry(flaky, nb)
    assert retried.state == "succeeded" and retried.summary["retry_of"] == failed.run_id
    df = agac.results(retried, project=nb).to_pandas()
    assert df["classify#status"].tolist() == ["answered"] * 3
