"""Issue 43 item 8 (The newcomer's path): the docs never show an install command that
fails here — agac has no published package and is installed from a clone."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "tutorials"


def test_i43_8_no_doc_shows_an_install_of_an_unpublished_package() -> None:
    """agac is installed from a clone (``pip install -e '.[extra]'``): a line installing
    ``agac`` from a package index would fail."""
    root = DOCS.parents[1]
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    bad = [
        f"{page.relative_to(root)}:{n}"
        for page in pages
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"pip install (-U )?['\"]?agac\b", line)
    ]
    assert not bad, bad
