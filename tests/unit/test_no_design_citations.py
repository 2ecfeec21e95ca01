"""The repository cites only what it ships: no source, test, benchmark or build file
refers to a design document that is not in it. A rule is cited by its id
(docs/guarantees.md), a subject by the doc that explains it (docs/architecture.md and the
pages beside it). The docs themselves, README.md and every ``--help`` are checked by
tests/cli/test_guarantee_ids.py."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"\bDESIGN(?:\.md|'s|\s+§|\s+[BRSAEPTOX]\d)")


def test_no_citation_of_a_document_the_repository_does_not_ship() -> None:
    found = []
    for folder in ("src", "tests", "bench", ".ci"):
        for path in sorted((ROOT / folder).rglob("*")):
            if (
                path.suffix
                not in (".py", ".md", ".yml", ".yaml", ".toml", ".json", ".html", ".js", "")
                or not path.is_file()
                or "__pycache__" in path.parts
            ):
                continue
            for n, line in enumerate(
                path.read_text(encoding="utf-8", errors="replace").splitlines(), 1
            ):
                if CITATION.search(line) and path.name != Path(__file__).name:
                    found.append(f"{path.relative_to(ROOT)}:{n}")
    for name in ("Makefile", "pyproject.toml", "mkdocs.yml"):
        for n, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{name}:{n}")
    assert found == []
