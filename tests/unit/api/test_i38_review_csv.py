"""The quality loop: a download of a run's answers streams its CSV in pieces — the header,
then at most N rows a piece — that join to exactly the CSV written whole (quoted newlines
and neutralized formulas included)."""

from __future__ import annotations

import io

from agac.api.review import csv_chunks
from agac.data.export import write_wide_csv

NAMES = ["key", "a.text", "a#status"]
ROWS = [
    ["k0", "plain", "answered"],
    ["k1", "two\nlines, and a comma", "answered"],
    ["k2", '=HYPERLINK("x")', "answered"],
    ["k3", None, "failed"],
    ["k4", {"nested": [1, 2]}, "answered"],
]


def test_i38_csv_pieces_join_to_the_whole_csv() -> None:
    whole = io.StringIO()
    write_wide_csv(NAMES, ROWS, whole)
    pieces = list(csv_chunks(NAMES, iter(ROWS), per=2))
    assert len(pieces) == 1 + 3  # the header, then 2 + 2 + 1 rows
    assert b"".join(pieces).decode("utf-8") == whole.getvalue()
    assert "'=HYPERLINK" in whole.getvalue()


def test_i38_csv_of_no_rows_is_its_header() -> None:
    assert b"".join(csv_chunks(NAMES, iter(()))).decode("utf-8").splitlines() == [
        "key,a.text,a#status"
    ]
