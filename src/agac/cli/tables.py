"""Tables and lines the CLI prints: text made safe for one cell or line, Rich tables with
a header row — in a terminal with its styles and width, into a pipe as plain text that is
never wrapped (no escape codes, no trailing spaces) —, and times as local time."""

from __future__ import annotations

import io
import sys
import time
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["new_table", "print_table", "shown", "when"]


_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: str) -> str:
    """``text`` safe to print in one cell or line: control characters (newline, NUL, ESC,
    …), line and paragraph separators and bidirectional controls written as escapes
    (``\\n``, ``\\x00``, ``\\u202e``), so a record key cannot break a table's lines, move
    the cursor or reorder what follows it."""
    if text.isprintable() and not any(c in _BIDI for c in text):
        return text
    out = []
    for c in text:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif not c.isprintable() and c != " " or c in _BIDI:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(c)
    return "".join(out)


def new_table(*columns: str) -> Table:
    """A table with these column headers; a header ending in ``>`` is a right-aligned
    (numeric) column, shown without the ``>``. Every text cell is :func:`shown`."""
    from rich import box
    from rich.table import Table

    class _Table(Table):
        def add_row(self, *cells: Any, **options: Any) -> None:
            super().add_row(*(shown(c) if isinstance(c, str) else c for c in cells), **options)

    table = _Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column in columns:
        right = column.endswith(">")
        table.add_column(column.rstrip(">"), justify="right" if right else "left", overflow="fold")
    return table


def print_table(table: Table) -> None:
    """Print ``table`` on stdout: styled in a terminal, plain and unwrapped in a pipe."""
    from rich.console import Console

    if sys.stdout.isatty():
        Console(markup=False, highlight=False, emoji=False).print(table)
        return
    buffer = io.StringIO()
    Console(
        file=buffer,
        width=100_000,
        markup=False,
        highlight=False,
        emoji=False,
        color_system=None,
        force_terminal=False,
    ).print(table)
    for line in buffer.getvalue().splitlines():
        click.echo(line.rstrip())


def when(ts: float | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """A Unix time as local time; ``-`` for none."""
    return "-" if ts is None else time.strftime(fmt, time.localtime(ts))
