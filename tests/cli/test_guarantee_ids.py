"""Every rule id the docs and ``--help`` cite (B6, R1, S2, …) resolves to an anchor of
docs/guarantees.md, and nothing cites a document that is not in the repository.

Scanned: docs/**/*.md, README.md and the ``--help`` of every command (generated from the
Click app). A rule id is a capital letter among B, R, S, A, E, P, T, O, X followed by one
or two digits; a link ``guarantees.md#x`` must name an anchor that exists too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_support import leaf_commands
from click.testing import CliRunner

from agac.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
GUARANTEES = ROOT / "docs" / "guarantees.md"
RULE_ID = re.compile(r"(?<![\w/.-])([BRSAEPTOX]\d{1,2})(?![\w])")
LINK = re.compile(r"guarantees\.md#([\w-]+)")
ANCHOR = re.compile(r'<a id="([\w-]+)"></a>')


def _anchors() -> list[str]:
    return ANCHOR.findall(GUARANTEES.read_text(encoding="utf-8"))


def _texts() -> dict[str, str]:
    texts = {
        p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
        for p in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    }
    runner = CliRunner()
    for path in leaf_commands(groups=True):
        result = runner.invoke(cli, [*path.split()[1:], "--help"])
        assert result.exit_code == 0, (path, result.output)
        texts[f"{path} --help"] = result.output
    return texts


TEXTS = _texts()


def test_guarantees_anchors_are_unique() -> None:
    anchors = _anchors()
    assert len(anchors) == len(set(anchors))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_cited_rule_id_resolves_in_guarantees(name: str) -> None:
    anchors = set(_anchors())
    text = TEXTS[name]
    cited = set(RULE_ID.findall(text)) | set(LINK.findall(text))
    assert sorted(cited - anchors) == [], f"{name} cites ids docs/guarantees.md does not define"


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_no_citation_of_a_document_outside_the_repository(name: str) -> None:
    text = TEXTS[name]
    assert "DESIGN" not in text and "§" not in text, (
        f"{name} cites a design document the repository does not ship"
    )


def test_the_scan_sees_help_and_ids() -> None:
    assert {"agac --help", "agac approvals --help", "agac runs list --help"} <= set(TEXTS)
    assert "A1" in TEXTS["agac approvals --help"]
    assert {"B0", "B12", "R1", "S5", "S6", "S7", "A3", "E2", "P1", "X1", "X2", "X3", "X4"} <= set(
        _anchors()
    )
