"""Issue 23 item 6: the quickstart has a parquet variant, ``review_triage_parquet``: the same
reviews in a parquet file with a timestamp and a nested column, read only for the columns
the workflow reads, their values in their documented JSON forms."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import agac


def test_i23_6_the_quickstart_parquet_variant_runs_and_reads_only_its_columns(
    tmp_path: Path,
) -> None:
    assert agac("init", "proj", "--example", "quickstart", cwd=tmp_path).code == 0
    root = tmp_path / "proj"
    assert (root / "data" / "parquet" / "reviews.parquet").is_file()
    checked = agac("validate", "review_triage_parquet", cwd=root)
    assert checked.code == 0, checked
    done = agac("run", "review_triage_parquet", "--json", cwd=root)
    assert done.code == 0, done
    assert json.loads(done.out)["actions"]["classify"]["answered"] == 24
    exported = agac(
        "export", "review_triage_parquet", "--all-actions", "--include-source", cwd=root
    )
    rows = [json.loads(line) for line in exported.out.splitlines()]
    assert len(rows) == 24 and rows[0]["key"] == "r0001"
    source = {k for k in rows[0] if k.startswith("source.")}
    assert source == {
        "source.review_id",
        "source.text",
        "source.posted_at",
        "source.product.sku",
        "source.product.tags",
    }  # no source.stars
    assert rows[0]["source.posted_at"] == "2026-10-01T09:30:00.000"
