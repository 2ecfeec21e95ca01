"""Make the example's documents: a few small PDF invoices and PNG receipts, from nothing
but agac's own sample-file helpers (no network, no image library).

    python tools/make_files.py      # from the project folder; writes files/ and data/
"""

from __future__ import annotations

import json
from pathlib import Path

from agac.samplefiles import pdf_bytes, png_bytes

INVOICES = [
    ("inv-001", "pdf", "Invoice INV-001 Acme Tools 2026-10-03 total 1,240.00 EUR", 1),
    ("inv-002", "pdf", "Invoice INV-002 Borealis Paper 2026-10-11 total 86.50 EUR", 2),
    ("inv-003", "pdf", "Invoice INV-003 Cobalt Freight 2026-10-19 total 3,310.75 USD", 1),
    ("rcpt-004", "png", "", 0),
    ("rcpt-005", "png", "", 0),
]


def main(root: Path = Path(".")) -> None:
    files, data = root / "files", root / "data"
    files.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    rows = []
    for n, (key, kind, text, pages) in enumerate(INVOICES):
        name = f"{key}.{kind}"
        body = pdf_bytes(pages, text) if kind == "pdf" else png_bytes(48, 64, seed=n)
        (files / name).write_bytes(body)
        rows.append({"id": key, "file": f"files/{name}"})
    with (data / "invoices.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
