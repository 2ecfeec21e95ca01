"""``agac run`` and the commands that read a run, on the quickstart example (docs/cli.md, agac status; docs/cli.md, agac events)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from cli_support import Quickstart

SUMMARY_KEYS = {"run_id", "workflow", "state", "retry_of", "cost_usd", "next", "actions"}
ACTION_KEYS = {
    "records",
    "answered",
    "failed",
    "skipped",
    "pending",
    "calls",
    "reused",
    "tool_calls",
    "batches_out",
    "reasons",
}
SESSION_KEYS = {
    "key",
    "workflow",
    "run_id",
    "status",
    "record",
    "actions",
    "tokens",
    "cost_usd",
    "errors",
}
ESC = "\x1b"


def _first_record(qs: Quickstart) -> dict[str, object]:
    path = min((qs.root / "data").rglob("*.jsonl"))
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])  # type: ignore[no-any-return]


def test_run_json_prints_exactly_the_summary_object(quickstart: Quickstart) -> None:
    doc = quickstart.summary  # json.loads of the whole stdout
    assert SUMMARY_KEYS <= doc.keys()
    assert doc["workflow"] == "review_triage"
    assert doc["state"] == "succeeded"
    assert doc["retry_of"] is None
    assert doc["cost_usd"] == 0.0
    assert doc["next"] == "agac export review_triage --action route --format jsonl"
    assert list(doc["actions"]) == ["classify", "reply", "route"]
    for name, a in doc["actions"].items():
        assert ACTION_KEYS <= a.keys(), name
        assert a["records"] == 24
        assert a["answered"] + a["failed"] + a["skipped"] + a["pending"] == a["records"]  # S4
        assert a["pending"] == 0 and a["batches_out"] == 0
    assert doc["actions"]["classify"]["calls"] + doc["actions"]["classify"]["reused"] == 24
    assert doc["actions"]["reply"]["reasons"] == {"guard": doc["actions"]["reply"]["skipped"]}
    assert doc["actions"]["route"]["calls"] == 0
    assert doc["actions"]["route"]["tool_calls"] == 24


def test_run_json_keeps_stderr_free_of_terminal_codes(quickstart: Quickstart) -> None:
    assert ESC not in quickstart.first_run.err
    assert ESC not in quickstart.first_run.out


def test_run_again_reuses_every_answer_and_names_next_command(quickstart: Quickstart) -> None:
    result = quickstart.agac("run", "workflows/review_triage.yml")
    assert result.code == 0, result
    assert ESC not in result.err and ESC not in result.out
    lines = result.out.strip().splitlines()
    assert lines[0].startswith("run ") and lines[0].endswith("of review_triage: succeeded")
    assert lines[-1] == (
        "reused 63 answers, 0 calls, cost $0.0000: "
        "agac export review_triage --action route --format jsonl"
    )


def test_run_limit_admits_only_n_records(quickstart: Quickstart) -> None:
    result = quickstart.agac("run", "review_triage", "--limit", "3", "--json")
    assert result.code == 0, result
    assert {a["records"] for a in result.json()["actions"].values()} == {3}


def test_status_json_is_the_run_summary(quickstart: Quickstart) -> None:
    run_id = quickstart.summary["run_id"]
    by_id = quickstart.agac("status", run_id, "--json")
    assert by_id.code == 0, by_id
    doc = by_id.json()
    # Status also says which store it read (issue 29 item 17); the rest is the summary.
    assert doc.pop("store")["url"].endswith("agac.db")
    assert doc == quickstart.summary
    by_prefix = quickstart.agac("status", run_id[:12], "--json")
    assert by_prefix.json()["run_id"] == run_id
    latest = quickstart.agac("status", "--json").json()
    assert SUMMARY_KEYS <= latest.keys() and latest["workflow"] == "review_triage"
    assert quickstart.agac("status", "review_triage", "--json").json()["run_id"] == latest["run_id"]


def test_status_prints_summary_lines(quickstart: Quickstart) -> None:
    run_id = quickstart.summary["run_id"]
    result = quickstart.agac("status", run_id)
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0] == f"run {run_id} of review_triage: succeeded"
    assert lines[1].split() == [
        "action",
        "answered",
        "failed",
        "skipped",
        "pending",
        "calls",
        "tool",
        "calls",
        "reused",
        "cost",
        "reasons",
    ]
    assert [line.split()[0] for line in lines[3:6]] == ["classify", "reply", "route"]
    assert lines[-1].endswith(": agac export review_triage --action route --format jsonl")


def test_status_follow_replays_events_of_a_final_run(quickstart: Quickstart) -> None:
    run_id = quickstart.summary["run_id"]
    result = quickstart.agac("status", run_id, "--follow")
    assert result.code == 0, result
    assert "run_admitted" in result.out and "run_ended" in result.out
    assert f"run {run_id} of review_triage: succeeded" in result.out


def test_status_of_unknown_run_exits_2(quickstart: Quickstart) -> None:
    result = quickstart.agac("status", "no-such-run")
    assert result.code == 2, result
    assert "agac run" in result.err


def test_runs_list_newest_first(quickstart: Quickstart) -> None:
    rows = quickstart.agac("runs", "list", "--json").json()
    assert rows and all(r["workflow"] == "review_triage" for r in rows)
    assert {"run_id", "workflow", "state", "retry_of", "created_at", "ended_at"} <= rows[0].keys()
    assert [r["created_at"] for r in rows] == sorted((r["created_at"] for r in rows), reverse=True)
    assert quickstart.summary["run_id"] in {r["run_id"] for r in rows}
    text = quickstart.agac("runs", "list", "review_triage", "--limit", "1")
    assert text.code == 0, text
    header, _rule, row = text.out.splitlines()
    assert header.split() == [
        "run",
        "tenant",
        "workflow",
        "state",
        "started",
        "ended",
        "retry",
        "of",
    ]
    assert row.startswith(rows[0]["run_id"])


def test_events_in_order(quickstart: Quickstart) -> None:
    run_id = quickstart.summary["run_id"]
    rows = quickstart.agac("events", run_id, "--json").json()
    kinds = [e["kind"] for e in rows]
    assert kinds[0] == "run_admitted" and kinds[-1] == "run_ended"
    assert [e["id"] for e in rows] == sorted(e["id"] for e in rows)
    assert all(e["run_id"] == run_id for e in rows)
    text = quickstart.agac("events", run_id)
    assert text.code == 0, text
    assert len(text.out.splitlines()) == len(rows) + 2  # a header and its rule
    assert "run_ended" in text.out.splitlines()[-1]


def test_render_shows_the_rendered_prompt(quickstart: Quickstart) -> None:
    record = _first_record(quickstart)
    key = str(record["review_id"])
    result = quickstart.agac("render", "review_triage", "--record", key)
    assert result.code == 0, result
    assert "== classify (llm)" in result.out
    assert "You label product reviews." in result.out
    assert f"Classify this review: {record['text']}" in result.out
    assert "== route (tool)" in result.out
    one = quickstart.agac(
        "render", "review_triage", "--record", key, "--action", "classify", "--json"
    )
    rows = one.json()
    assert [r["action"] for r in rows] == ["classify"]
    messages = rows[0]["request"]["messages"]
    assert messages[-1] == {"role": "user", "content": f"Classify this review: {record['text']}"}


def test_render_unknown_record_exits_2(quickstart: Quickstart) -> None:
    result = quickstart.agac("render", "review_triage", "--record", "no-such-key")
    assert result.code == 2, result
    assert "no-such-key" in result.err


def test_records_show_is_the_session(quickstart: Quickstart) -> None:
    record = _first_record(quickstart)
    key = str(record["review_id"])
    run_id = quickstart.summary["run_id"]
    doc = quickstart.agac("records", "show", key, "--run", run_id, "--json").json()
    assert SESSION_KEYS <= doc.keys()
    assert (doc["key"], doc["workflow"], doc["run_id"]) == (key, "review_triage", run_id)
    assert doc["status"] == "answered"
    assert doc["record"]["line"] == 1
    assert [a["action"] for a in doc["actions"]] == ["classify", "reply", "route"]
    for a in doc["actions"]:
        assert {"action", "status", "reason", "output", "attempts", "cost_usd"} <= a.keys()
    assert set(doc["tokens"]) >= {"input", "output"}
    assert doc["errors"] == []
    text = quickstart.agac("records", "show", key, "--workflow", "review_triage", "--run", run_id)
    assert text.code == 0, text
    assert text.out.startswith(f"record {key} of review_triage (run {run_id}): answered")
    assert "classify: answered" in text.out


def test_records_show_unknown_key_exits_2(quickstart: Quickstart) -> None:
    result = quickstart.agac("records", "show", "no-such-key")
    assert result.code == 2, result


def test_export_jsonl_to_stdout(quickstart: Quickstart) -> None:
    run_id = quickstart.summary["run_id"]
    result = quickstart.agac("export", "review_triage", "--action", "route", "--run", run_id)
    assert result.code == 0, result
    rows = [json.loads(line) for line in result.out.splitlines()]
    assert len(rows) == 24
    assert all(list(r)[:4] == ["key", "status", "reason", "output"] for r in rows)
    assert all(r["status"] == "answered" and r["output"]["queue"] for r in rows)


def test_export_csv_to_stdout_and_out_file(quickstart: Quickstart, tmp_path: Path) -> None:
    run_id = quickstart.summary["run_id"]
    stdout = quickstart.agac(
        "export", "review_triage", "--action", "reply", "--format", "csv", "--run", run_id
    )
    assert stdout.code == 0, stdout
    table = list(csv.DictReader(io.StringIO(stdout.out)))
    assert len(table) == 24
    assert {"key", "status", "reason", "output"} <= set(table[0])
    skipped = [r for r in table if r["status"] == "skipped"]
    assert skipped and all(r["reason"] == "guard" and r["output"] == "" for r in skipped)

    target = tmp_path / "out" / "reply.csv"
    written = quickstart.agac(
        "export",
        "review_triage",
        "--action",
        "reply",
        "--format",
        "csv",
        "--run",
        run_id,
        "--out",
        str(target),
        "--json",
    )
    assert written.code == 0, written
    assert written.json() == {"out": str(target), "rows": 24, "format": "csv"}
    assert target.read_text(encoding="utf-8") == stdout.out


def test_export_unknown_action_exits_2(quickstart: Quickstart) -> None:
    result = quickstart.agac("export", "review_triage", "--action", "nope")
    assert result.code == 2, result
    assert "classify" in result.err


def test_cost_per_action_and_model(quickstart: Quickstart) -> None:
    run_id = quickstart.summary["run_id"]
    doc = quickstart.agac("cost", run_id, "--json").json()
    assert {"run_id", "workflow", "cost_usd", "batch_saved_usd", "rows"} <= doc.keys()
    assert doc["run_id"] == run_id and doc["cost_usd"] == 0.0
    llm = {(r["action"], r["provider"], r["model"]) for r in doc["rows"] if r["kind"] == "llm"}
    assert ("classify", "mock", "triage-small") in llm
    calls = sum(r["calls"] for r in doc["rows"] if r["action"] == "classify")
    assert calls == quickstart.summary["actions"]["classify"]["calls"]
    text = quickstart.agac("cost", run_id)
    assert text.code == 0, text
    assert text.out.startswith(f"run {run_id} of review_triage: $0.000000")
    assert "mock/triage-small" in text.out


def test_store_upgrade(quickstart: Quickstart) -> None:
    result = quickstart.agac("store", "upgrade", "--json")
    assert result.code == 0, result
    doc = result.json()
    assert doc["store"].startswith("sqlite:///") and doc["revision"]
