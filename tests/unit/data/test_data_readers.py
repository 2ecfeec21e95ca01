"""read_records / iter_input: streaming readers, record keys, invalid rows (docs/getting-started.md)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import pytest

from agac.data.jsonarray import Element, elements
from agac.data.readers import InputRecord, file_fingerprint, iter_input, read_records


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path, *lines: object) -> Path:
    body = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    return write(path, body)


def read(path: Path, id_field: str | None = None) -> list[InputRecord]:
    return list(read_records(path, id_field))


# --- JSONL --------------------------------------------------------------------------


def test_jsonl_keys_are_file_name_and_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "reviews.jsonl", {"text": "a"}, {"text": "b"})
    records = read(path)
    assert [r.key for r in records] == ["reviews.jsonl:1", "reviews.jsonl:2"]
    assert [(r.n, r.line) for r in records] == [(1, 1), (2, 2)]
    assert records[0].payload == {"text": "a"}
    assert all(r.ok and r.error is None and r.file == "reviews.jsonl" for r in records)


def test_jsonl_blank_lines_are_skipped_but_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", '{"x": 1}\n\n   \n{"x": 2}\n\n')
    records = read(path)
    assert [(r.key, r.n, r.line) for r in records] == [("a.jsonl:1", 1, 1), ("a.jsonl:4", 4, 4)]


def test_jsonl_without_final_newline_and_with_crlf(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"x": 1}\r\n{"x": 2}')
    assert [r.payload for r in read(path)] == [{"x": 1}, {"x": 2}]


def test_jsonl_malformed_line_is_an_invalid_record_naming_file_and_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "a.jsonl", {"x": 1}, '{"x": 2', {"x": 3})
    first, bad, last = read(path)
    assert first.ok and last.ok and last.payload == {"x": 3}
    assert bad.key == "a.jsonl:2"
    assert bad.reason == "invalid_input"
    assert bad.payload is None
    assert bad.error is not None and bad.error.startswith("a.jsonl:2: not valid JSON")


@pytest.mark.parametrize(
    ("line", "kind"),
    [("[1, 2]", "an array"), ('"text"', "a string"), ("42", "a number"), ("null", "null")],
)
def test_jsonl_value_that_is_not_an_object_is_invalid(tmp_path: Path, line: str, kind: str) -> None:
    (record,) = read(jsonl(tmp_path / "a.jsonl", line))
    assert record.reason == "invalid_input"
    assert record.error == f"a.jsonl:1: a record must be a JSON object, not {kind}"


def test_jsonl_bytes_that_are_not_utf8_fail_only_their_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"x": "\xff"}\n{"x": "ok"}\n')
    bad, good = read(path)
    assert bad.reason == "invalid_input" and "a.jsonl:1" in (bad.error or "")
    assert good.payload == {"x": "ok"}


def test_jsonl_unicode_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes("\ufeff".encode() + '{"t": "héllo ✓ 日本"}\n{"t": "\u2028x"}\n'.encode())
    records = read(path)
    assert [r.payload for r in records] == [{"t": "héllo ✓ 日本"}, {"t": "\u2028x"}]
    assert [r.line for r in records] == [1, 2]


def test_id_field_gives_the_key_as_a_string(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "a.jsonl", {"id": "r-1"}, {"id": 7}, {"id": 2.5}, {"id": True})
    assert [r.key for r in read(path, "id")] == ["r-1", "7", "2.5", "true"]


@pytest.mark.parametrize("record", [{"other": 1}, {"id": ""}, {"id": None}, {"id": [1]}])
def test_missing_or_unusable_id_field_is_invalid_with_positional_key(
    tmp_path: Path, record: dict[str, object]
) -> None:
    path = jsonl(tmp_path / "a.jsonl", {"id": "ok"}, record)
    good, bad = read(path, "id")
    assert good.key == "ok" and good.ok
    assert bad.key == "a.jsonl:2"
    assert bad.reason == "invalid_input"
    assert bad.error is not None and "a.jsonl:2" in bad.error and "'id'" in bad.error


# --- CSV ----------------------------------------------------------------------------


def test_csv_rows_are_keyed_by_data_row(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", 'id,text\n1,hello\n2,"multi\nline"\n3,ünï\n')
    records = read(path)
    assert [r.key for r in records] == ["a.csv:1", "a.csv:2", "a.csv:3"]
    assert [r.line for r in records] == [2, 3, 5]
    assert records[1].payload == {"id": "2", "text": "multi\nline"}
    assert records[2].payload == {"id": "3", "text": "ünï"}


def test_csv_id_field(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", "review_id,text\nR1,a\nR2,b\n")
    assert [r.key for r in read(path, "review_id")] == ["R1", "R2"]


def test_csv_empty_id_is_invalid(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", "review_id,text\n,a\n")
    (record,) = read(path, "review_id")
    assert record.reason == "invalid_input" and record.key == "a.csv:1"


def test_csv_rows_with_wrong_field_count_are_invalid(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", "id,text\n1,a\n2,b,extra\n3\n4,d\n")
    records = read(path)
    assert [r.key for r in records] == ["a.csv:1", "a.csv:2", "a.csv:3", "a.csv:4"]
    assert [r.reason for r in records] == [None, "invalid_input", "invalid_input", None]
    assert records[1].error == "a.csv:3: CSV row has 3 fields, the header has 2"
    assert records[2].error == "a.csv:4: CSV row has 1 fields, the header has 2"
    assert records[3].payload == {"id": "4", "text": "d"}


def test_csv_quote_never_closed_is_reported_not_swallowed(tmp_path: Path) -> None:
    """A stray quote would make every later line one field of one record: the record is
    invalid, naming the line where the quote opens and where the file ends."""
    path = write(tmp_path / "a.csv", 'id,text\n1,ok\n2,"oops\n3,lost\n4,lost too\n')
    records = read(path, "id")
    assert [r.key for r in records] == ["1", "a.csv:2"]
    assert records[1].reason == "invalid_input"
    assert records[1].error == (
        "a.csv:3: a quoted field opens on this line and is never "
        "closed: everything to the end of the file (line 5) was read "
        'as this one row; close the quote (or double it: "")'
    )


def test_csv_quote_never_closed_on_the_last_line(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", 'id,text\n1,ok\n2,"half\n')
    assert [r.reason for r in read(path)] == [None, "invalid_input"]


def test_csv_quoted_line_breaks_that_close_are_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", 'id,text\n1,"two\nlines"\n2,"a ""quoted"" word"\n')
    assert [r.payload for r in read(path)] == [
        {"id": "1", "text": "two\nlines"},
        {"id": "2", "text": 'a "quoted" word'},
    ]


def test_csv_blank_lines_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes("\ufeffid,text\r\n\r\n1,a\r\n\r\n2,b\r\n".encode())
    records = read(path)
    assert [(r.key, r.line) for r in records] == [("a.csv:1", 3), ("a.csv:2", 5)]
    assert records[0].payload == {"id": "1", "text": "a"}


def test_csv_bytes_that_are_not_utf8_fail_only_their_row(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b"id,text\n1,\xff\n2,ok\n")
    bad, good = read(path)
    assert bad.reason == "invalid_input" and bad.error == "a.csv:2: not UTF-8 text"
    assert good.payload == {"id": "2", "text": "ok"}


def test_csv_without_header_has_no_records(tmp_path: Path) -> None:
    assert read(write(tmp_path / "a.csv", "")) == []


# --- JSON arrays --------------------------------------------------------------------


def test_json_array_elements_are_keyed_by_position(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.json",
        json.dumps([{"t": "x"}, {"t": "ü", "n": [1.5, {"m": 2e-3}], "big": 10**20}]),
    )
    records = read(path)
    assert [r.key for r in records] == ["a.json:1", "a.json:2"]
    assert records[1].payload == {"t": "ü", "n": [1.5, {"m": 2e-3}], "big": 10**20}
    json.dumps(records[1].payload)  # numbers are plain floats/ints, not Decimal


def test_json_array_non_object_element_is_invalid(tmp_path: Path) -> None:
    path = write(tmp_path / "a.json", '[{"a": 1}, 2, {"a": 3}]')
    records = read(path)
    assert [r.reason for r in records] == [None, "invalid_input", None]
    assert records[1].error == "a.json element 2: a record must be a JSON object, not a number"


def test_truncated_json_array_yields_what_parsed_then_one_invalid(tmp_path: Path) -> None:
    path = write(tmp_path / "a.json", '[{"a": 1}, {"a": 2}, {"a": ')
    records = read(path)
    assert [r.payload for r in records[:2]] == [{"a": 1}, {"a": 2}]
    (bad,) = records[2:]
    assert bad.key == "a.json:3" and bad.reason == "invalid_input"
    assert bad.error is not None
    assert bad.error.startswith("a.json: JSON array is cut off or corrupt after element 2")


def test_json_trailing_garbage_is_reported(tmp_path: Path) -> None:
    records = read(write(tmp_path / "a.json", '[{"a": 1}] junk'))
    assert [r.reason for r in records] == [None, "invalid_input"]


def test_json_that_is_not_an_array_is_one_invalid_record(tmp_path: Path) -> None:
    (record,) = read(write(tmp_path / "a.json", '{"a": 1}'))
    assert record.reason == "invalid_input"
    assert record.error == "a.json: a .json input must be a JSON array"


def test_empty_json_file_is_one_invalid_record(tmp_path: Path) -> None:
    (record,) = read(write(tmp_path / "a.json", ""))
    assert record.reason == "invalid_input"
    assert "before the first element" in (record.error or "")


def test_json_array_id_field(tmp_path: Path) -> None:
    path = write(tmp_path / "a.json", '[{"id": 10}, {"id": "b"}]')
    assert [r.key for r in read(path, "id")] == ["10", "b"]


def test_unsupported_extension_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsupported"):
        read_records(write(tmp_path / "a.txt", ""), None)


# --- several files, duplicates ------------------------------------------------------


def test_iter_input_chains_files_in_order(tmp_path: Path) -> None:
    a = jsonl(tmp_path / "a.jsonl", {"x": 1})
    b = write(tmp_path / "b.csv", "x\n2\n")
    c = write(tmp_path / "c.json", '[{"x": 3}]')
    keys = [r.key for r in iter_input([a, b, c], None)]
    assert keys == ["a.jsonl:1", "b.csv:1", "c.json:1"]


def test_duplicate_keys_across_files_fail_the_later_record(tmp_path: Path) -> None:
    a = jsonl(tmp_path / "a.jsonl", {"id": "k1"}, {"id": "k2"})
    b = write(tmp_path / "b.csv", "id,v\nk2,x\nk3,y\nk1,z\n")
    records = list(iter_input([a, b], "id"))
    assert [(r.key, r.reason) for r in records] == [
        ("k1", None),
        ("k2", None),
        ("b.csv:1", "duplicate_key"),
        ("k3", None),
        ("b.csv:3", "duplicate_key"),
    ]
    dup = records[2]
    assert dup.error == "b.csv:2: duplicate key 'k2'; an earlier record has the same key"
    assert dup.payload == {"id": "k2", "v": "x"}  # kept for the record's session


def test_duplicate_within_one_file(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "a.jsonl", {"id": 1}, {"id": 1})
    assert [r.reason for r in iter_input([path], "id")] == [None, "duplicate_key"]


def test_yielded_keys_are_unique_even_when_ids_look_positional(tmp_path: Path) -> None:
    a = jsonl(tmp_path / "a.jsonl", {"id": "b.jsonl:2"}, {"id": "x"})
    b = jsonl(tmp_path / "b.jsonl", {"id": "x"}, "not json")
    records = list(iter_input([a, b], "id"))
    keys = [r.key for r in records]
    assert len(set(keys)) == len(keys) == 4
    assert [r.reason for r in records] == [None, None, "duplicate_key", "invalid_input"]


def test_same_file_name_in_two_folders(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    a = jsonl(tmp_path / "x" / "part.jsonl", {"v": 1})
    b = jsonl(tmp_path / "y" / "part.jsonl", {"v": 2})
    records = list(iter_input([a, b], None))
    assert records[1].reason == "duplicate_key"
    assert len({r.key for r in records}) == 2


# --- fingerprint --------------------------------------------------------------------


def test_file_fingerprint_is_sha256_and_changes_with_content(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"x" * (3 << 20))
    assert file_fingerprint(path) == hashlib.sha256(b"x" * (3 << 20)).hexdigest()
    before = file_fingerprint(path)
    path.write_bytes(b"y")
    assert file_fingerprint(path) != before


# --- values no store can hold (issue 29 item 13) -------------------------------------


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            '{"id": 1, "t": "x\\ud800"}',
            "a.jsonl:1: the record holds a lone surrogate (\\ud800) at t",
        ),
        ('{"id": 1, "t": ["ok", {"u": "\\uDFFF"}]}', "a lone surrogate (\\udfff) at t[1].u"),
        ('{"id": "\\ud800"}', "a lone surrogate (\\ud800) at id"),
        ('{"id": 1, "t": NaN}', "a.jsonl:1: NaN is not JSON; write null"),
        ('{"id": 1, "t": -Infinity}', "-Infinity is not JSON"),
        ('{"id": 1, "t": 1e999}', "a.jsonl:1: 1e999 is too large for a float; write it as text"),
        ('{"id": 1, "t": -1.5E+400}', "-1.5E+400 is too large for a float"),
    ],
)
def test_i29_13_jsonl_record_no_store_can_hold_is_invalid_with_file_line(
    tmp_path: Path, line: str, said: str
) -> None:
    path = jsonl(tmp_path / "a.jsonl", line, {"id": 2})

    bad, good = read(path, "id")

    assert (bad.reason, bad.key, bad.payload) == ("invalid_input", "a.jsonl:1", None)
    assert bad.error is not None and said in bad.error, bad.error
    bad.error.encode("ascii")
    assert good.ok and good.payload == {"id": 2}


@pytest.mark.parametrize(
    "line",
    [
        '{"t": "pair \\ud83d\\ude00"}',
        '{"t": "\\\\ud800 is text"}',
        '{"t": 1e300, "u": 1e-999, "v": 1' + "0" * 400 + "}",
        '{"t": "é\\u00e9"}',
    ],
)
def test_i29_13_jsonl_strict_values_that_look_suspect_are_read(tmp_path: Path, line: str) -> None:
    (record,) = read(jsonl(tmp_path / "a.jsonl", line))
    assert record.ok, record.error


def test_i29_13_json_array_element_no_store_can_hold_is_invalid(tmp_path: Path) -> None:
    """An escaped lone surrogate and a number too large for a float each fail their
    element alone."""
    path = write(
        tmp_path / "a.json", '[{"id": 1, "t": "\\ud800"}, {"id": 2, "t": 1e999}, {"id": 3}]'
    )

    first, second, third = read(path, "id")

    assert first.reason == "invalid_input" and first.payload is None
    assert second.reason == "invalid_input" and second.error is not None
    assert (
        second.error
        == "a.json element 2 (line 1): 1e999 is too large for a float; write it as text"
    )
    assert third.ok


# --- issue 35, item 7: a JSON array read element by element ----------------------------


def test_i35_7_json_array_lone_surrogate_fails_its_element_not_rewritten(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.json",
        '[\n {"id": 1, "t": "ok"},\n {"id": 2, "t": "x\\ud800y"},\n {"id": 3, "t": "\\ud83d\\ude00"}\n]',
    )

    first, second, third = read(path, "id")

    assert first.ok and third.ok and third.payload == {"id": 3, "t": "\U0001f600"}
    assert (second.reason, second.key, second.payload) == ("invalid_input", "a.json:2", None)
    assert second.error == (
        "a.json element 2 (line 3): the record holds a lone surrogate (\\ud800) at t, "
        "which agac cannot store; write text without lone surrogates (pair it, or drop it) there"
    )


@pytest.mark.parametrize(
    ("element", "said"),
    [
        ('{"a": tru}', "not valid JSON"),
        ('{"a": 01}', "not valid JSON"),
        ('{"a": "\\x"}', "not valid JSON (Invalid \\escape"),
        ('{"a": "tab\there"}', "not valid JSON (Invalid control character"),
        ('{"a": NaN}', "NaN is not JSON"),
        ('{"a": 1}}', "not valid JSON (Extra data"),
        ("", "no value between two commas"),
        ("[1, 2]", "a record must be a JSON object, not an array"),
    ],
)
def test_i35_7_json_array_bad_element_fails_alone_and_later_ones_run(
    tmp_path: Path, element: str, said: str
) -> None:
    path = write(tmp_path / "a.json", f'[{{"id": 1}},\n  {element},\n{{"id": 3}}, {{"id": 4}}]')

    records = read(path)

    assert [r.n for r in records] == [1, 2, 3, 4]
    assert [r.reason for r in records] == [None, "invalid_input", None, None]
    assert [r.payload for r in records[2:]] == [{"id": 3}, {"id": 4}]
    error = records[1].error or ""
    assert error.startswith("a.json element 2") and said in error, error


def test_i35_7_json_array_bytes_not_utf8_fail_their_element(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'[{"t": "a"}, {"t": "\xff\xfe"}, {"t": "c"}]')

    records = read(path)

    assert [r.reason for r in records] == [None, "invalid_input", None]
    assert (records[1].error or "").startswith("a.json element 2 (line 1): not UTF-8 text")


def test_i35_7_json_array_split_the_same_whatever_the_read_size(tmp_path: Path) -> None:
    """Element boundaries inside strings, escapes and nesting survive every read size, so
    a stream read block by block splits as one read whole."""
    body = (
        b'\xef\xbb\xbf [ {"s": "a,]}\\"[{", "n": [1, {"x": [2, 3]}]},\n'
        b'"\xc3\xbc\\\\", 1.5e3 , [] , {"e": "\\ud800"} ,{"z":null}\n] \n'
    )
    whole = list(elements(io.BytesIO(body)))

    for chunk in (1, 2, 3, 5, 7):
        assert list(elements(io.BytesIO(body), chunk)) == whole
    assert [e.raw for e in whole if isinstance(e, Element)] == [
        b'{"s": "a,]}\\"[{", "n": [1, {"x": [2, 3]}]}',
        b'"\xc3\xbc\\\\"',
        b"1.5e3",
        b"[]",
        b'{"e": "\\ud800"}',
        b'{"z":null}',
    ]
    assert [e.line for e in whole if isinstance(e, Element)] == [1, 2, 2, 2, 2, 2]


def test_i35_7_json_array_compressed_bad_element_fails_alone(tmp_path: Path) -> None:
    path = tmp_path / "a.json.gz"
    path.write_bytes(gzip.compress(b'[{"a": 1}, {"a": "\\ud800"}, {"a": 3}]'))

    assert [r.reason for r in read(path)] == [None, "invalid_input", None]


def test_i35_7_json_array_text_after_the_array_is_one_counted_record(tmp_path: Path) -> None:
    records = read(write(tmp_path / "a.json", '[{"a": 1}]\n{"a": 2}'))

    assert [r.reason for r in records] == [None, "invalid_input"]
    assert records[1].n == 2
    assert (records[1].error or "").startswith("a.json:2: text after the array's closing ']'")


def test_i35_7_json_array_is_read_block_by_block(tmp_path: Path) -> None:
    """The first element comes out after one block of a large array is read, and the buffer
    never holds much more than one block and one element."""
    body = json.dumps([{"id": i, "text": "x" * 50} for i in range(20_000)]).encode()
    stream = io.BytesIO(body)

    parts = elements(stream, chunk=4096)
    first = next(parts)

    assert isinstance(first, Element) and first.raw == b'{"id": 0, "text": "' + b"x" * 50 + b'"}'
    assert stream.tell() <= 4096
    assert sum(1 for _ in parts) == 19_999 and stream.tell() == len(body)


def test_i35_7_json_array_deep_and_shallow_elements_split_alike() -> None:
    """Elements nested deeper than the one-match path takes are split token by token, to the
    same boundaries."""
    deep = b'{"a": [{"b": [{"c": [{"d": "],}"}]}]}]}'
    body = b"[" + deep + b', {"x": 1} ,' + deep + b"]"
    for chunk in (1, 7, 1 << 20):
        parts = list(elements(io.BytesIO(body), chunk))
        assert [p.raw for p in parts if isinstance(p, Element)] == [deep, b'{"x": 1}', deep]
