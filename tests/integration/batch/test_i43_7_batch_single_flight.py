"""The newcomer's path: batch mode asks identical requests once, as online does (S5), and
``agac plan`` counts what will be sent. Records whose requests are byte-identical (one
fingerprint) put one line in the batch file; the others share its answer as ``reused``,
its failure as a failure; the ledger bills each line once."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from batch_support import WORKFLOW, batches, counts, creates, params, rows, run, store, workflow

from agac import api
from agac.emulator.testing import RunningEmulator
from agac.testing import write_project

TEXTS = ["alpha", "beta", "alpha", "gamma", "beta", "alpha"]
"""Six records, three distinct requests: alpha three times, beta twice, gamma once."""


def _make(project: Path, provider: str, texts: list[str] = TEXTS, **options: Any) -> list[str]:
    return _make_files(project, provider, {"a": texts}, **options)


def _make_files(
    project: Path, provider: str, files: dict[str, list[str]], **options: Any
) -> list[str]:
    """One input file per stem, its records' texts as given; keys ``<stem><i>`` (``r<i>``
    for the file ``a``, whose keys the single-file tests name)."""
    data = {
        f"data/{stem}.jsonl": [
            {"id": f"{'r' if stem == 'a' else stem}{i}", "text": t} for i, t in enumerate(texts)
        ]
        for stem, texts in files.items()
    }
    model = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}[provider]
    write_project(project, workflow(model, summarize=False, **options), data=data)
    return [d["id"] for rows in data.values() for d in rows]


def _labels_by_text(project: Path, texts: dict[str, str]) -> dict[str, set[str]]:
    """Each text -> the labels its records got (one each when identical requests share)."""
    got = rows(project)
    out: dict[str, set[str]] = {}
    for key, text in texts.items():
        out.setdefault(text, set()).add(got[key]["output"]["label"])
    return out


def _sent_lines(emulator: RunningEmulator) -> list[int]:
    return sorted(int(b["requests"]) for b in emulator.stats()["batches"])


@params(("openai", "anthropic"))
def test_i43_7_identical_requests_go_in_one_batch_line_and_the_others_are_reused(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    keys = _make(project, provider)
    plan = api.plan(WORKFLOW, project)
    assert (plan["actions"]["classify"]["requests"], plan["actions"]["classify"]["shared"]) == (
        3,
        3,
    )

    first = run(project)

    assert first.exit_code == 75, first.notes
    # The provider's journal: one batch of three lines, what the plan counted.
    assert creates(emulator.stats(), provider) == 1
    assert _sent_lines(emulator) == [plan["requests"]] == [3]
    (b,) = batches(project)
    assert b.request_count == 3
    with store(project) as s:
        assert len(list(s.iter_batch_items(b.key))) == 6  # every unit waits on the batch

    emulator.advance(120)
    second = run(project)

    assert second.exit_code == 0, second.notes
    got = rows(project)
    assert sorted(got) == sorted(keys)
    assert {r["status"] for r in got.values()} == {"answered"}
    # Identical requests got the identical answer.
    by_text = {
        t: {got[f"r{i}"]["output"]["label"] for i, x in enumerate(TEXTS) if x == t}
        for t in set(TEXTS)
    }
    assert all(len(labels) == 1 for labels in by_text.values()), by_text
    c = counts(second)
    assert (c["answered"], c["calls"], c["reused"]) == (6, 3, 3)
    # Each distinct request was answered once by the provider and billed once.
    stats = emulator.stats()
    assert (stats["answered"], stats["duplicate_answers"]) == (3, 0)
    ledger = api.cost(second.summary["run_id"], project)["rows"]
    assert sum(r["calls"] for r in ledger) == 3


@params(("openai",))
def test_i43_7_a_failed_line_fails_every_record_that_shared_it(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    """A line the provider failed fails each record that shared it, with its reason, as
    units sharing a live call share its failure; the other lines answer theirs."""
    _make(project, provider, retry="{max_attempts: 1, backoff: {initial: 10ms, max: 20ms}}")
    emulator.add_fault(
        {
            "provider": provider,
            "op": "batch.create",
            "match": {"custom_id": "r0a1"},
            "fault": {"http": 400, "code": "invalid_request"},
        }
    )
    assert run(project).exit_code == 75
    emulator.advance(120)
    second = run(project)

    got = rows(project)
    alpha = [f"r{i}" for i, t in enumerate(TEXTS) if t == "alpha"]
    assert {(got[k]["status"], got[k]["reason"]) for k in alpha} == {
        ("failed", "provider_error")
    }, [got[k] for k in alpha]
    others = [k for k in got if k not in alpha]
    assert {got[k]["status"] for k in others} == {"answered"}
    assert second.summary["state"] == "partial"
    assert emulator.stats()["answered"] == 2


@params(("openai", "anthropic"))
def test_i43_7_identical_requests_in_other_files_join_the_batch_that_sends_them(
    provider: str, emulator: RunningEmulator, project: Path
) -> None:
    """A step split across input files: a request identical to one a batch of this run
    already sends (another file's) joins that batch and sends nothing; a file whose every
    request is sent elsewhere has no batch of its own. Each distinct request is one line."""
    files = {"a": ["alpha", "beta", "alpha"], "b": ["alpha", "gamma", "beta"], "c": ["beta"]}
    keys = _make_files(project, provider, files)
    texts = dict(zip(keys, [t for ts in files.values() for t in ts], strict=True))
    plan = api.plan(WORKFLOW, project)["actions"]["classify"]
    assert (plan["units"], plan["requests"], plan["shared"]) == (7, 3, 4)

    assert run(project).exit_code == 75

    sent = {b.file: b.request_count for b in batches(project)}
    assert sent == {"a.jsonl": 2, "b.jsonl": 1}  # c.jsonl's beta is a's line
    assert creates(emulator.stats(), provider) == 2
    assert _sent_lines(emulator) == [1, 2]
    with store(project) as s:
        held = {
            b.file: sorted(i.unit_key for i in s.iter_batch_items(b.key)) for b in batches(project)
        }
    assert held == {"a.jsonl": ["b0", "b2", "c0", "r0", "r1", "r2"], "b.jsonl": ["b1"]}

    emulator.advance(120)
    second = run(project)

    assert second.exit_code == 0, second.notes
    assert {r["status"] for r in rows(project).values()} == {"answered"}
    assert all(len(v) == 1 for v in _labels_by_text(project, texts).values())
    c = counts(second)
    assert (c["answered"], c["calls"], c["reused"]) == (7, 3, 4)
    stats = emulator.stats()
    assert (stats["answered"], stats["duplicate_answers"]) == (3, 0)
    ledger = api.cost(second.summary["run_id"], project)["rows"]
    assert sum(r["calls"] for r in ledger) == 3


@params(("openai",))
def test_i43_7_identical_requests_across_the_parts_of_a_file_are_one_line(
    provider: str, emulator: RunningEmulator, project: Path, monkeypatch: Any
) -> None:
    """A file split by the provider's request limit: a request identical to one of an
    earlier part joins that part; the limit counts lines, not records."""
    from agac.providers.registry import provider_class

    cls = provider_class(provider)
    assert cls.spec.batch is not None
    monkeypatch.setattr(
        cls,
        "spec",
        dataclasses.replace(cls.spec, batch=dataclasses.replace(cls.spec.batch, max_requests=2)),
    )
    texts = ["alpha", "beta", "gamma", "alpha", "beta", "delta"]
    keys = _make(project, provider, texts)

    assert run(project).exit_code == 75

    parts = sorted((b.part, b.request_count) for b in batches(project))
    assert parts == [(0, 2), (1, 2)]
    assert _sent_lines(emulator) == [2, 2]
    with store(project) as s:
        held = [sorted(i.unit_key for i in s.iter_batch_items(b.key)) for b in batches(project)]
    assert sorted(held) == [["r0", "r1", "r3", "r4"], ["r2", "r5"]]

    emulator.advance(120)
    second = run(project)

    assert second.exit_code == 0, second.notes
    assert all(
        len(v) == 1 for v in _labels_by_text(project, dict(zip(keys, texts, strict=True))).values()
    )
    c = counts(second)
    assert (c["answered"], c["calls"], c["reused"]) == (6, 4, 2)
    assert (emulator.stats()["answered"], emulator.stats()["duplicate_answers"]) == (4, 0)
