"""The wide results table (docs/python.md): columns from schemas, rows from units, Arrow types."""

from __future__ import annotations

import pyarrow as pa
import pytest

from agac.data.arrow import JSON_METADATA, arrow_schema, record_batch
from agac.data.columns import JSON, ListOf, Scalar, Sketch, StructOf, coerce, type_of_schema
from agac.data.results import ActionOutput, ResultTable, Unit, item_path

CLASSIFY = {
    "type": "object",
    "required": ["sentiment"],
    "properties": {
        "sentiment": {"enum": ["pos", "neg", "neutral"]},
        "meta": {
            "type": "object",
            "properties": {
                "score": {"type": "number"},
                "count": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "spans": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"start": {"type": "integer"}, "label": {"type": "string"}},
                    },
                },
                "free": {"description": "no type"},
            },
        },
    },
}
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}}


@pytest.mark.parametrize(
    ("schema", "kind"),
    [
        ({"type": "string"}, Scalar("string")),
        ({"type": ["integer", "null"]}, Scalar("int64")),
        ({"type": "number"}, Scalar("float64")),
        ({"type": "boolean"}, Scalar("bool")),
        ({"enum": ["a", "b"]}, Scalar("string")),
        ({"enum": [1, 2.5]}, Scalar("float64")),
        ({"const": True}, Scalar("bool")),
        ({"type": ["string", "integer"]}, JSON),
        ({"anyOf": [{"type": "string"}]}, JSON),
        ({"type": "object"}, JSON),
        ({"type": "array"}, ListOf(JSON)),
        ({"type": "array", "items": {"type": "integer"}}, ListOf(Scalar("int64"))),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}},
            StructOf((("a", Scalar("string")),)),
        ),
        (None, JSON),
    ],
)
def test_types_from_schemas(schema, kind) -> None:
    assert type_of_schema(schema) == kind


def test_columns_flatten_objects_with_dots_and_keep_arrays_as_lists() -> None:
    table = ResultTable(
        [
            ActionOutput("classify", CLASSIFY),
            ActionOutput("reply", TEXT),
            ActionOutput("route", None),
        ]
    )
    assert table.names == (
        "key",
        "classify.sentiment",
        "classify.meta.score",
        "classify.meta.count",
        "classify.meta.tags",
        "classify.meta.spans",
        "classify.meta.free",
        "classify#status",
        "classify#reason",
        "reply.text",
        "reply#status",
        "reply#reason",
        "route",
        "route#status",
        "route#reason",
    )
    schema = arrow_schema(table)
    assert schema.field("classify.meta.score").type == pa.float64()
    assert schema.field("classify.meta.count").type == pa.int64()
    assert schema.field("classify.meta.tags").type == pa.list_(pa.string())
    assert schema.field("classify.meta.spans").type == pa.list_(
        pa.struct([("start", pa.int64()), ("label", pa.string())])
    )
    assert schema.field("classify.meta.free").metadata == JSON_METADATA  # untyped: JSON text
    assert schema.field("route").metadata == JSON_METADATA


def test_a_row_per_record_with_status_reason_and_pending() -> None:
    table = ResultTable(
        [
            ActionOutput("classify", CLASSIFY),
            ActionOutput("reply", TEXT),
            ActionOutput("route", None),
        ]
    )
    row = table.row(
        "r1",
        {
            "classify": [
                Unit(
                    "r1",
                    "answered",
                    None,
                    {
                        "sentiment": "neg",
                        "meta": {
                            "score": 1,
                            "count": 2.0,
                            "tags": ["x"],
                            "spans": [{"start": 3, "label": "L", "more": 1}],
                            "free": {"any": [1, "two"]},
                        },
                    },
                )
            ],
            "route": [Unit("r1", "failed", "tool_error", None)],
        },
    )
    got = dict(zip(table.names, row, strict=True))
    assert got["classify.sentiment"] == "neg"
    assert got["classify.meta.score"] == 1.0 and isinstance(got["classify.meta.score"], float)
    assert got["classify.meta.count"] == 2 and isinstance(got["classify.meta.count"], int)
    assert got["classify.meta.spans"] == [{"start": 3, "label": "L"}]
    assert got["classify.meta.free"] == '{"any":[1,"two"]}'
    assert (got["classify#status"], got["classify#reason"]) == ("answered", None)
    assert (got["reply.text"], got["reply#status"], got["reply#reason"]) == (None, "pending", None)
    assert (got["route"], got["route#status"], got["route#reason"]) == (
        None,
        "failed",
        "tool_error",
    )
    native = dict(
        zip(
            table.names,
            table.row(
                "r1",
                {
                    "classify": [
                        Unit(
                            "r1", "answered", None, {"sentiment": "pos", "meta": {"free": {"a": 1}}}
                        )
                    ]
                },
                json_text=False,
            ),
            strict=True,
        )
    )
    assert native["classify.meta.free"] == {"a": 1}


def test_fan_out_fields_are_lists_in_item_order() -> None:
    table = ResultTable(
        [
            ActionOutput(
                "vote",
                {"type": "object", "properties": {"label": {"type": "string"}}},
                per_item=True,
            )
        ]
    )
    units = [Unit(f"r1/{i}", "answered", None, {"label": f"l{i}"}) for i in (10, 2, 1)]
    units.append(Unit("r1/0", "failed", "schema_invalid", None))
    got = dict(zip(table.names, table.row("r1", {"vote": units}), strict=True))
    assert got["vote.label"] == [None, "l1", "l2", "l10"]
    assert got["vote#status"] == ["failed", "answered", "answered", "answered"]
    assert got["vote#reason"] == ["schema_invalid", None, None, None]
    # A record that could not fan out: its one unit stands for it.
    whole = dict(
        zip(
            table.names,
            table.row("r2", {"vote": [Unit("r2", "skipped", "upstream_failed", None)]}),
            strict=True,
        )
    )
    assert whole == {
        "key": "r2",
        "vote.label": None,
        "vote#status": ["skipped"],
        "vote#reason": ["upstream_failed"],
    }
    pending = dict(zip(table.names, table.row("r3", {}), strict=True))
    assert pending["vote#status"] is None
    schema = arrow_schema(table)
    batch = record_batch(schema, [table.row("r1", {"vote": units})])
    assert batch.column("vote.label").to_pylist() == [[None, "l1", "l2", "l10"]]


def test_item_paths_order_nested_items() -> None:
    keys = ["a:1/1/0", "a:1/0/10", "a:1/0/2", "a:1/10/0"]
    assert sorted(keys, key=item_path) == ["a:1/0/2", "a:1/0/10", "a:1/1/0", "a:1/10/0"]
    assert item_path("a:1") == () and item_path("x/y") == ()


def test_source_columns_are_typed_from_the_values() -> None:
    sketch = Sketch()
    records = [
        {"text": "a", "n": 1, "meta": {"lang": "en"}, "tags": ["x"], "mixed": 1},
        {"text": "b", "n": 2.5, "meta": None, "tags": [], "mixed": "one", "late": True},
    ]
    for record in records:
        sketch.add(record)
    table = ResultTable([], sketch.column_type())
    assert table.names == (
        "key",
        "source.text",
        "source.n",
        "source.meta.lang",
        "source.tags",
        "source.mixed",
        "source.late",
    )
    rows = [table.row(f"r{i}", {}, r) for i, r in enumerate(records)]
    assert rows[1] == ["r1", "b", 2.5, None, [], '"one"', True]
    schema = arrow_schema(table)
    assert schema.field("source.n").type == pa.float64()
    assert schema.field("source.tags").type == pa.list_(pa.string())
    assert schema.field("source.mixed").metadata == JSON_METADATA
    assert record_batch(schema, rows).num_rows == 2


def test_a_map_like_source_object_is_json_text() -> None:
    sketch = Sketch()
    sketch.add({"counts": {str(i): i for i in range(300)}})
    assert sketch.column_type() == StructOf((("counts", JSON),))


def test_a_value_that_does_not_fit_its_column_is_an_error_naming_it() -> None:
    table = ResultTable(
        [ActionOutput("a", {"type": "object", "properties": {"n": {"type": "integer"}}})]
    )
    with pytest.raises(ValueError, match=r"record 'r9', column 'a.n'.*expected int64"):
        table.row("r9", {"a": [Unit("r9", "answered", None, {"n": 1.5})]})
    assert coerce(3, Scalar("string")) == "3"
