"""docs/decisions/ holds one decision a file, numbered, and its index lists every one.

Each file is ``NNNN-slug.md`` with the heading ``# NNNN. Title`` and the sections Context,
Decision and Consequences in that order; the numbers run 0001, 0002, … without gaps, and
docs/decisions/index.md links each file once under its own title (issue 26)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DECISIONS = Path(__file__).resolve().parents[2] / "docs" / "decisions"
FILES = sorted(p for p in DECISIONS.glob("*.md") if p.name != "index.md")
ROW = re.compile(r"^\| (\d{4}) \| \[([^\]]+)\]\(([^)]+)\) \| (.+) \|$", re.MULTILINE)


def test_i26_every_decision_file_is_numbered_without_gaps() -> None:
    assert FILES, "no decisions"
    bad = [p.name for p in FILES if not re.fullmatch(r"\d{4}-[a-z0-9]+(-[a-z0-9]+)*\.md", p.name)]
    assert bad == []
    numbers = [int(p.name[:4]) for p in FILES]
    assert numbers == list(range(1, len(FILES) + 1))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_i26_a_decision_has_its_number_context_decision_and_consequences(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith(f"# {path.name[:4]}. "), "the heading names the file's number"
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections == ["Context", "Decision", "Consequences"]
    for body in re.split(r"^## .+$", text, flags=re.MULTILINE)[1:]:
        assert body.strip(), f"{path.name} has an empty section"


def test_i26_the_index_lists_every_decision_under_its_title() -> None:
    rows = ROW.findall((DECISIONS / "index.md").read_text(encoding="utf-8"))
    assert [target for _n, _t, target, _s in rows] == [p.name for p in FILES]
    for number, title, target, _summary in rows:
        heading = (DECISIONS / target).read_text(encoding="utf-8").split("\n", 1)[0]
        assert target.startswith(number) and heading == f"# {number}. {title}"
