"""The docs a reader follows lead somewhere: every relative link in README.md and docs/
names a file that exists (and, for a page of the docs site, a page mkdocs builds), and
every source path a doc cites in backticks (``src/agac/...``, ``tests/...``, ``bench/...``)
exists in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "bench" / "HISTORY.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CITED = re.compile(r"`((?:src|tests|bench|docs|requirements|\.ci)/[\w./-]+)`")
# What a benchmark writes when it runs (ignored by git), not a source path.
GENERATED = ("bench/out/",)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _prose(path: Path) -> str:
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_relative_link_names_a_file_that_exists(path: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor on the same page
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            broken.append(target)
    assert broken == [], f"{_name(path)} links to files that do not exist"


@pytest.mark.parametrize("path", DOCS, ids=_name)
def test_every_cited_source_path_exists(path: Path) -> None:
    missing = [
        cited
        for cited in CITED.findall(path.read_text(encoding="utf-8"))
        if not any(ch in cited for ch in "*<>")
        and not cited.startswith(GENERATED)
        and not (ROOT / cited.rstrip("/.")).exists()
    ]
    assert missing == [], f"{_name(path)} cites paths that do not exist"


def test_the_docs_site_links_stay_inside_docs() -> None:
    """A page of the site may not link out of docs/ by a relative path: mkdocs would not
    build the target (README.md is the one page outside, read on the forge)."""
    outside = []
    for path in DOCS:
        if ROOT / "docs" not in path.parents:
            continue  # README.md and bench/HISTORY.md are read on the forge, not in the site
        for target in LINK.findall(_prose(path)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            resolved = (path.parent / target.split("#", 1)[0]).resolve()
            if ROOT / "docs" not in resolved.parents and resolved != ROOT / "docs":
                outside.append(f"{_name(path)} -> {target}")
    assert outside == []
