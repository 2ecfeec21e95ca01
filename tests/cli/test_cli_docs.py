"""docs/cli.md is kept in step with ``--help``: every command has a section, and every
argument and option of a command is named in that command's section.

A section is a heading ``## `agac runs list` `` (any level); it runs until the next
heading of the same or a higher level, so a group's section holds its subcommands'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from agac.cli.main import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
HEADING = re.compile(r"^(?P<level>#+)\s+`(?P<title>agac(?: [a-z-]+)*)`\s*$")


def _commands(cmd: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd, info_name=path[-1])
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, name
            if not sub.hidden:
                yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(cli, ("agac",)))


def _sections(text: str) -> dict[str, str]:
    lines = text.splitlines()
    heads = [
        (i, len(m["level"]), m["title"])
        for i, line in enumerate(lines)
        if (m := HEADING.match(line))
    ]
    sections = {}
    for n, (start, level, title) in enumerate(heads):
        end = next((i for i, lv, _ in heads[n + 1 :] if lv <= level), len(lines))
        assert title not in sections, f"two sections for {title}"
        sections[title] = "\n".join(lines[start + 1 : end])
    return sections


SECTIONS = _sections(DOC.read_text(encoding="utf-8"))


def _names(cmd: click.Command) -> list[str]:
    names = []
    for param in cmd.params:
        if isinstance(param, click.Option):
            names += [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
        elif isinstance(param, click.Argument):
            names.append(param.human_readable_name)
    return names


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_has_a_section(path: str) -> None:
    assert path in SECTIONS, f"docs/cli.md has no section headed `{path}`"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_argument_and_option_is_documented(path: str) -> None:
    section = SECTIONS.get(path, "")
    missing = [
        n
        for n in _names(COMMANDS[path])
        if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", section)
    ]
    assert not missing, f"docs/cli.md section `{path}` does not mention {missing}"


def test_no_section_for_a_command_that_does_not_exist() -> None:
    assert sorted(set(SECTIONS) - set(COMMANDS)) == []


def test_the_walk_sees_nested_and_lazy_commands() -> None:
    assert {
        "agac runs list",
        "agac records show",
        "agac store upgrade",
        "agac emulator env",
    } <= set(COMMANDS)
