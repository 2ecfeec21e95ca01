"""The wide results table: one row per record, the answers of every action side by side
(docs/python.md; ``agac.results``, ``agac export --all-actions``, parquet).

Columns, in order:

- ``key`` — the record key;
- ``source.<field>`` when asked — the record's fields (nested objects flattened with dots),
  typed from the values (:class:`~agac.data.columns.Sketch`);
- per action, in the workflow's order: its fields — ``<action>.<field>``, nested objects
  flattened with dots (``classify.meta.score``), arrays kept as lists, typed from the
  action's schema; an action without a schema of its fields is one column ``<action>``
  holding JSON text; an llm answer without a schema is ``<action>.text`` — then
  ``<action>#status`` (answered, failed, skipped, or pending while the run has not
  settled the unit) and ``<action>#reason`` (the reason code of a failure or skip); an
  action with web search then has ``<action>#citations`` (the sources its answer cites,
  a JSON list of ``{url, title, cited_text}``).
- An action that runs once per fan-out item gives the same columns as lists, one element
  per item in item order (``r/0``, ``r/1``, … ``r/10``; nested items depth-first). When the
  record could not fan out (an invalid record, a failed upstream, a list that is missing),
  its one unit stands for the record: fields null, status and reason lists of one element.
  Before its items are known they are all null.

Fields an action's schema does not declare are not columns (the per-action export keeps
the whole answer). Nothing here reads the store: the caller hands each record's units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agac.data.columns import (
    JSON,
    STRING,
    ColumnType,
    ListOf,
    StructOf,
    coerce,
    flatten_object,
    type_of_schema,
)
from agac.jsontext import Flaw, NotJSON

__all__ = ["ActionOutput", "Column", "ResultTable", "Unit", "item_path"]

NOT_SETTLED = "pending"
"""The status column of a unit the run has not settled yet (no outcome row)."""

Role = Literal["key", "source", "field", "status", "reason", "citations"]


@dataclass(frozen=True)
class ActionOutput:
    """What the table needs to know of one action: its name, the JSON Schema of its
    output (None: untyped, kept as JSON text) and whether it runs once per fan-out item."""

    name: str
    schema: Mapping[str, Any] | None
    per_item: bool = False
    citations: bool = False
    """The action offers web search: its answers' citations are a column."""


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    role: Role
    action: str | None = None
    path: tuple[str, ...] = ()
    """Where the value sits inside the action's output (or the source record)."""


@dataclass(frozen=True, slots=True)
class Unit:
    """One settled unit of an action for a record (or one of its items)."""

    key: str
    status: str
    reason: str | None
    output: Any
    citations: Any = None
    """The sources the answer cites (web search), None when it cites none."""


def item_path(key: str) -> tuple[int, ...]:
    """The item indexes at the end of a unit key (``r/3/10`` -> (3, 10); ``r`` -> ())."""
    tail: list[int] = []
    for part in reversed(key.split("/")[1:]):
        if not part.isdigit():
            break
        tail.append(int(part))
    return tuple(reversed(tail))


class ResultTable:
    """The columns for ``actions`` (and the source record, typed ``source``, when given),
    and the row of each record."""

    def __init__(self, actions: Sequence[ActionOutput], source: ColumnType | None = None) -> None:
        self.actions = tuple(actions)
        columns = [Column("key", STRING, "key")]
        if source is not None and isinstance(source, StructOf):
            columns += [
                Column(name, kind, "source", None, path)
                for name, path, kind in flatten_object("source", source)
            ]
        for action in self.actions:
            columns += _action_columns(action)
        self.columns: tuple[Column, ...] = tuple(columns)
        self.names: tuple[str, ...] = tuple(c.name for c in columns)
        self._plan = [(a, [c for c in columns if c.action == a.name]) for a in self.actions]
        self._source = [c for c in columns if c.role == "source"]

    def row(
        self,
        key: str,
        units: Mapping[str, Sequence[Unit]],
        payload: Any = None,
        *,
        json_text: bool = True,
    ) -> list[Any]:
        """The record's values in column order. ``units`` maps an action to its units for
        this record (items in any order); ``payload`` is the source record. ``json_text``
        False keeps ``json`` columns as JSON values instead of text (for JSONL)."""
        values: list[Any] = [key]
        source = payload if isinstance(payload, Mapping) else None
        for column in self._source:
            values.append(_cell(_dig(source, column.path), column.type, json_text, key, column))
        for action, columns in self._plan:
            found = units.get(action.name, ())
            if action.per_item:
                values += _item_cells(key, found, columns, json_text)
            else:
                values += _record_cells(key, found[0] if found else None, columns, json_text)
        return values


def _action_columns(action: ActionOutput) -> list[Column]:
    kind = JSON if action.schema is None else type_of_schema(action.schema)
    fields = flatten_object(action.name, kind)
    status: ColumnType = STRING
    columns = []
    for name, path, leaf in fields:
        columns.append(
            Column(name, ListOf(leaf) if action.per_item else leaf, "field", action.name, path)
        )
    if action.per_item:
        status = ListOf(STRING)
    columns.append(Column(f"{action.name}#status", status, "status", action.name))
    columns.append(Column(f"{action.name}#reason", status, "reason", action.name))
    if action.citations:
        cited = ListOf(JSON) if action.per_item else JSON
        columns.append(Column(f"{action.name}#citations", cited, "citations", action.name))
    return columns


def _record_cells(
    key: str,
    unit: Unit | None,
    columns: list[Column],
    json_text: bool,
) -> list[Any]:
    out: list[Any] = []
    for column in columns:
        if column.role == "status":
            out.append(NOT_SETTLED if unit is None else unit.status)
        elif column.role == "reason":
            out.append(None if unit is None else unit.reason)
        elif column.role == "citations":
            value = None if unit is None else unit.citations
            out.append(_cell(value, column.type, json_text, key, column))
        else:
            value = _dig(unit.output, column.path) if unit is not None else None
            out.append(_cell(value, column.type, json_text, key, column))
    return out


def _item_cells(
    key: str,
    units: Sequence[Unit],
    columns: list[Column],
    json_text: bool,
) -> list[Any]:
    if not units:
        return [None] * len(columns)
    items = sorted(units, key=lambda u: item_path(u.key))
    whole = len(items) == 1 and not item_path(items[0].key)  # the record could not fan out
    out: list[Any] = []
    for column in columns:
        if column.role == "status":
            out.append([u.status for u in items])
        elif column.role == "reason":
            out.append([u.reason for u in items])
        elif column.role == "citations":
            out.append([_cell(u.citations, JSON, json_text, u.key, column) for u in items])
        elif whole:
            out.append(None)
        else:
            assert isinstance(column.type, ListOf)
            out.append(
                [
                    _cell(_dig(u.output, column.path), column.type.item, json_text, u.key, column)
                    for u in items
                ]
            )
    return out


def _dig(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(value, dict):  # JSON objects are dicts (cheaper than Mapping)
            return None
        value = value.get(part)
    return value


def _cell(value: Any, kind: ColumnType, json_text: bool, key: str, column: Column) -> Any:
    if value is None:
        return None
    try:
        return coerce(value, kind, json_as_text=json_text)
    except NotJSON as exc:
        where = f"{column.name}.{exc.flaw.path}" if exc.flaw.path else column.name
        raise NotJSON(Flaw(where, exc.flaw.what), record=key) from exc
    except TypeError as exc:
        raise ValueError(
            f"record {key!r}, column {column.name!r}: {exc}; the value does not "
            "fit the type the action's schema gives the column"
        ) from exc
