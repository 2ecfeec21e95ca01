"""The store's part of reviewing answers (The quality loop: looking at answers where people
look), on SQLite and PostgreSQL: one action's units filtered by status, reason, a failed
check and a text search, counted and paged by the database; streamed for a download; each
unit's cost from the ledger. Check names and search text holding LIKE's own characters
(``%``, ``_``) match only themselves."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from agac.store.repository import Store
from agac.store.review import AnswerFilter
from agac.store.rows import Checkpoint, OutcomeRow, UsageRow
from agac.store.values import RunSettings

RECORDS = [
    ("k0", "a quiet morning"),
    ("k1", "A ZEBRA at noon"),
    ("k2", "100% sure"),
    ("k3", "under_score"),
    ("k4", "nothing"),
    ("k5", "more nothing"),
]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store(store_url)
    yield opened
    opened.close()


def _outcome(seq: int, key: str, status: str, **kw: object) -> OutcomeRow:
    checks = kw.get("checks")
    return OutcomeRow(
        "r1",
        str(kw.get("action", "a")),
        key,
        seq,
        status,
        kw.get("reason"),  # type: ignore[arg-type]
        kw.get("detail"),  # type: ignore[arg-type]
        "called",
        None,
        None if kw.get("output") is None else json.dumps(kw["output"]),
        1,
        time.time(),
        None if checks is None else json.dumps(checks, separators=(",", ":")),
    )


def _usage(key: str, cost: float, action: str = "a") -> UsageRow:
    return UsageRow(
        "r1",
        action,
        key,
        1,
        "llm",
        "openai",
        "m",
        "live",
        1,
        0,
        0,
        1,
        cost,
        1.0,
        "ok",
        None,
        None,
        time.time(),
        None,
    )


def _seed(store: Store) -> None:
    rows = (
        {
            "seq": i,
            "key": k,
            "file": "f",
            "n": i + 1,
            "line": i + 1,
            "payload": json.dumps({"text": t}),
            "reason": None,
            "error": None,
        }
        for i, (k, t) in enumerate(RECORDS)
    )
    store.write_snapshot("snap", [{"file": "f", "start": 0, "count": len(RECORDS)}], rows)
    store.create_run(
        id="r1",
        workflow="wf",
        workflow_path="workflows/wf.yml",
        retry_of=None,
        config={},
        config_hash="h",
        snapshot_id="snap",
        fresh=False,
        settings=RunSettings(),
        tenant="default",
    )
    store.checkpoint(
        Checkpoint(
            outcomes=[
                _outcome(
                    0, "k0", "answered", output={"label": "Pos"}, checks={"50%_ok": True, "b": True}
                ),
                _outcome(
                    1,
                    "k1",
                    "answered",
                    output={"label": "neg"},
                    checks={"50%_ok": False, "b": True},
                ),
                _outcome(2, "k2", "failed", reason="provider_error", detail="HTTP 500 upstream"),
                _outcome(
                    3,
                    "k3",
                    "answered",
                    output={"label": "pos"},
                    checks={"50%xok": False, "b": False},
                ),
                _outcome(4, "k4", "skipped", reason="upstream_failed"),
                _outcome(5, "k5", "answered", output={"label": "neutral"}, checks={"b": False}),
                _outcome(0, "k0", "answered", action="other", output={"label": "pos"}),
            ],
            usage=(
                _usage("k0", 0.25),
                _usage("k0", 0.5),
                _usage("k1", 0.125),
                _usage("k0", 9.0, "other"),
            ),
        )
    )


def _keys(store: Store, where: AnswerFilter, **page: int) -> tuple[list[str], int]:
    units, total = store.answers_page("r1", "snap", "a", where, **page)
    return [u.unit_key for u in units], total


def test_i38_answers_page_filters_and_pages_in_sql(store: Store) -> None:
    _seed(store)
    assert _keys(store, AnswerFilter()) == (["k0", "k1", "k2", "k3", "k4", "k5"], 6)
    assert _keys(store, AnswerFilter(), offset=2, limit=3) == (["k2", "k3", "k4"], 6)
    assert _keys(store, AnswerFilter(status="answered")) == (["k0", "k1", "k3", "k5"], 4)
    assert _keys(store, AnswerFilter(reason="provider_error")) == (["k2"], 1)
    assert _keys(store, AnswerFilter(check="b")) == (["k3", "k5"], 2)
    # LIKE's own characters in a check's name match only themselves
    assert _keys(store, AnswerFilter(check="50%_ok")) == (["k1"], 1)
    assert _keys(store, AnswerFilter(check="50%xok")) == (["k3"], 1)
    assert _keys(store, AnswerFilter(check="b", status="answered")) == (["k3", "k5"], 2)


def test_i38_answers_search_answer_message_key_and_record(store: Store) -> None:
    _seed(store)
    assert _keys(store, AnswerFilter(search="POS")) == (["k0", "k3"], 2)  # the answer, any case
    assert _keys(store, AnswerFilter(search="upstream")) == (["k2"], 1)  # the message
    assert _keys(store, AnswerFilter(search="k4")) == (["k4"], 1)  # the key
    assert _keys(store, AnswerFilter(search="zebra")) == (["k1"], 1)  # the record
    assert _keys(store, AnswerFilter(search="100%")) == (["k2"], 1)
    assert _keys(store, AnswerFilter(search="r_s")) == (["k3"], 1)
    assert _keys(store, AnswerFilter(search="a_q")) == ([], 0)  # "_" is not "any one character"
    assert _keys(store, AnswerFilter(search="nothing", status="skipped")) == (["k4"], 1)


def test_i38_answers_stream_and_their_costs(store: Store) -> None:
    _seed(store)
    streamed = [
        u.unit_key for u in store.iter_answers("r1", "snap", "a", AnswerFilter(status="answered"))
    ]
    assert streamed == ["k0", "k1", "k3", "k5"]
    assert store.unit_costs("r1", "a", ["k0", "k1", "k2"]) == {"k0": 0.75, "k1": 0.125}
    assert store.unit_costs("r1", "a", []) == {}
    assert store.reason_counts("r1", "a") == [
        ("answered", None, 4),
        ("failed", "provider_error", 1),
        ("skipped", "upstream_failed", 1),
    ]
