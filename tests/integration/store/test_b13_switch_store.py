"""B13 in the store, on SQLite and PostgreSQL: the switch to live calls is one
transaction — the action's state, each batch's intent to cancel it and the event."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agac.errors import StoreError
from agac.store.repository import Store
from agac.store.rows import BatchIntent, EventRow, StagedItem
from agac.store.values import RunSettings


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    s.create_run(
        id="r1",
        workflow="wf",
        workflow_path="wf.yml",
        retry_of=None,
        config={},
        config_hash="h",
        snapshot_id="s",
        fresh=False,
        tenant="default",
        settings=RunSettings(deadline_at=100.0, live_at={"classify": 50.0}),
    )
    staged = "staged:r1:classify:a.jsonl"
    s.stage_items(
        [StagedItem(staged, "r0a1", "wf", "classify", "k0", "a.jsonl", "f" * 64, 1, "{}")],
        tenant="default",
    )
    s.create_intents(
        staged,
        [
            (
                BatchIntent(
                    "agac_1", "wf", "classify", "a.jsonl", 0, "openai", "r1", 1, 1.0, "default"
                ),
                ["r0a1"],
            )
        ],
    )
    s.update_batch("agac_1", state="running", provider_batch_id="batch_1", meta='{"x": 1}')
    yield s
    s.close()


def test_b13_the_switch_is_recorded_in_one_transaction(store: Store) -> None:
    event = EventRow("r1", "hybrid_switched", "classify", None, '{"live": 1}', 60.0)
    store.switch_live(
        "r1",
        "classify",
        state="live",
        why="switched",
        events=[event],
        batches=[("agac_1", {"x": 1, "hybrid": "cancelling"})],
    )

    assert store.action_states("r1") == {"classify": ("live", "switched")}
    batch = store.get_batch("agac_1")
    assert batch is not None and batch.meta == {"x": 1, "hybrid": "cancelling"}
    assert [e.kind for e in store.iter_events("r1")] == ["hybrid_switched"]
    run = store.get_run("r1")
    assert run is not None and run.settings.live_at == {"classify": 50.0}  # kept (R4)


def test_b13_a_failed_switch_leaves_nothing(store: Store) -> None:
    bad = EventRow("r1", "hybrid_switched", "classify", None, "{}", 60.0)
    with pytest.raises(StoreError):  # the second event breaks a NOT NULL
        store.switch_live(
            "r1",
            "classify",
            state="live",
            why="switched",
            batches=[("agac_1", {"hybrid": "cancelling"})],
            events=[bad, bad._replace(run_id=None)],
        )

    assert store.action_states("r1") == {}
    batch = store.get_batch("agac_1")
    assert batch is not None and batch.meta == {"x": 1}
    assert list(store.iter_events("r1")) == []
