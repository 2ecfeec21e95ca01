"""The store's boundary (S2): a driver error on any read or write surfaces as StoreError,
never as a SQLAlchemy or psycopg exception; dialect differences live in database.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlalchemy as sa

import agac.store
from agac.errors import StoreError
from agac.store.repository import Store

STORE = Path(agac.store.__file__).parent
PLUMBING = {"core.py", "database.py"}
"""The modules that own the connection and the dialect: the rest ask them."""


def _repository_modules() -> list[Path]:
    return sorted(p for p in STORE.glob("*.py") if p.name not in PLUMBING)


def test_s2_no_query_bypasses_the_guard() -> None:
    """Only core.py opens connections (``_read``/``_write`` wrap the guard); the work
    channel's dedicated LISTEN connection is the one exception."""
    found = []
    for path in _repository_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("connect", "begin")
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "engine"
            ):
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], f"queries outside the guard: {found}"


def test_dialect_names_appear_only_in_database_hooks() -> None:
    found = []
    for path in _repository_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr == "dialect") or (
                isinstance(node, ast.Constant) and node.value in ("postgresql", "sqlite")
            ):
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], f"dialect branches outside database.py: {found}"


T = {"tenant": "t1"}
EVERY = {"tenants": None}
MINE = {"tenants": ("t1",)}
READS = [
    ("get_run", ("r1",), MINE),
    ("open_run", ("wf",), T),
    ("list_runs", (), MINE),
    ("latest_run", ("wf",), T),
    ("action_states", ("r1",), {}),
    ("snapshot_info", ("s",), {}),
    ("outcomes_between", ("r1", 0, 9), {}),
    ("count_outcomes_between", ("r1", 0, 9), {}),
    ("outcome_counts", ("r1",), {}),
    ("usage_totals", (["r1"],), {}),
    ("iter_events", ("r1",), {}),
    ("get_answers", (["fp"],), T),
    ("get_answer", ("fp",), T),
    ("get_tool_results", (["h"],), T),
    ("fanout_totals", ("r1",), {}),
    ("get_batch", ("b",), MINE),
    ("list_batches", (), EVERY),
    ("unit_items", ("wf", "a", ["k"]), T),
    ("batch_counts", ("r1", "wf"), T),
    ("group_counts", ("wf", "a", "staged:r1:a:"), T),
    ("get_effect", ("e",), {}),
    ("find_effect", ("e",), MINE),
    ("list_effects", (), MINE),
    ("get_proposal", ("p",), {}),
    ("find_proposals", ("p",), MINE),
    ("unit_proposals", ("wf", "a", "k"), T),
    ("list_proposals", (), EVERY),
    ("count_proposals", ("r1", ("pending",)), {}),
    ("runs_of_unit", ("k", None), MINE),
    ("has_shards", ("r1",), {}),
    ("shard_owners", ("r1",), {}),
    ("get_lease", ("run:r1",), {}),
    ("list_workers", (), MINE),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), READS, ids=[m for m, _, _ in READS])
def test_s2_a_driver_error_on_a_read_is_a_store_error(
    store_url: str, method: str, args: tuple, kwargs: dict
) -> None:
    store = Store(store_url)
    try:
        with store.engine.begin() as conn:  # break the store under the repository
            for table in reversed(sa.MetaData().sorted_tables):
                conn.execute(sa.text(f"DROP TABLE {table.name}"))
            for name in sa.inspect(conn).get_table_names():
                if name != "alembic_version":
                    conn.execute(sa.text(f"DROP TABLE {name}"))
        with pytest.raises(StoreError) as info:
            result = getattr(store, method)(*args, **kwargs)
            if hasattr(result, "__next__"):
                next(result)
        assert "cannot" in str(info.value)
    finally:
        store.close()
