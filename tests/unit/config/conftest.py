"""Helpers for config tests: write a workflow into a temporary project and validate it."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from agac.config import find_project, validate_workflow
from agac.config.model import Workflow
from agac.errors import Problem


@dataclass
class Checked:
    text: str
    workflow: Workflow | None
    problems: list[Problem]

    def codes(self) -> list[str]:
        return [p.code for p in self.problems]

    def one(self, code: str) -> Problem:
        found = [p for p in self.problems if p.code == code]
        assert len(found) == 1, (code, [p.render() for p in self.problems])
        return found[0]

    def line_of(self, needle: str, nth: int = 1) -> int:
        """1-based line of the nth line containing ``needle``."""
        hits = [i for i, line in enumerate(self.text.splitlines(), 1) if needle in line]
        return hits[nth - 1]


class WorkflowFactory:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, text: str, name: str = "wf.yml") -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def check(self, text: str, name: str = "wf.yml", **kwargs: object) -> Checked:
        path = self.write(text, name)
        workflow, problems = validate_workflow(path, find_project(self.root), **kwargs)
        return Checked(path.read_text(encoding="utf-8"), workflow, problems)


@pytest.fixture
def wf(in_tmp_project: Path) -> WorkflowFactory:
    return WorkflowFactory(in_tmp_project)
