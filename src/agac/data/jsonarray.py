"""A JSON array split into the raw text of its elements, streaming.

A parser that yields decoded values cannot keep one bad element from ending the array
(a lexical error stops it) and may have altered what it read before agac sees it (one
rewrites an escaped lone surrogate to ``?``). This scanner only finds where each element
starts and ends — strings, escapes and nesting respected — so every element is decoded on
its own, strictly, from its own bytes (:mod:`agac.data.readers`): a bad one fails alone
and the next one is read.

What the scanner cannot split is reported as :class:`Broken` and ends the array: no
``[`` at the start, the stream ending inside an element (cut off, or a string or bracket
never closed), or something after the closing ``]``. Memory is bounded by the largest
element plus one read block.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Literal

__all__ = ["Broken", "Element", "elements"]

_CHUNK = 1 << 20
_SPACE = re.compile(rb"[ \t\r\n]*+")
# A whole string, or (when its closing quote is not in the buffer yet) a lone quote, or
# one structural byte. Multi-byte UTF-8 never holds an ASCII byte, so bytes are safe.
_TOKEN = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|"|[\[\]{},]', re.DOTALL)
# The fast path: a whole element in one match — a string, a bare scalar, or brackets
# nested at most three deep — followed by its delimiter (which the match does not take).
# Anything else (deeper nesting, an element cut by the end of the buffer, a stray
# bracket) does not match and is scanned token by token.
_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_NESTED = rb"[\[{](?:[^\"\[\]{}]++|" + _STRING + rb")*+[\]}]"
for _ in range(2):
    _NESTED = rb"[\[{](?:[^\"\[\]{}]++|" + _STRING + rb"|" + _NESTED + rb")*+[\]}]"
_WHOLE = re.compile(
    rb"(?:" + _NESTED + rb"|" + _STRING + rb'|[^"\[\]{},\s]++)[ \t\r\n]*+(?=[,\]])', re.DOTALL
)
_QUOTE, _OPEN_ARRAY, _CLOSE_ARRAY = ord('"'), ord("["), ord("]")
_OPEN_OBJECT, _CLOSE_OBJECT, _COMMA = ord("{"), ord("}"), ord(",")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Element:
    """Element ``n`` (1-based) of the array, starting on line ``line``: its bytes,
    surrounding whitespace removed (empty for a missing value, as in ``[1,,2]``)."""

    n: int
    line: int
    raw: bytes


@dataclass(frozen=True, slots=True)
class Broken:
    """Where splitting stopped: at element ``n`` (line ``line``), for ``why``."""

    n: int
    line: int
    why: Literal["empty", "not_array", "cut_off", "trailing"]


class _Buffer:
    """The unread part of the stream: ``data[mark:]`` is kept across reads, ``pos`` is
    where scanning goes on, and lines are counted up to ``counted``."""

    def __init__(self, stream: IO[bytes], chunk: int) -> None:
        self.stream = stream
        self.chunk = chunk
        self.data = bytearray()
        self.eof = False
        self.mark = 0
        self.pos = 0
        self.line = 1
        self.counted = 0

    def more(self) -> bool:
        """Forget ``data[:mark]`` and read on (at least as much as is kept, so a long
        element is scanned a bounded number of times); False at the end of the stream."""
        if self.eof:
            return False
        self.line_at(self.mark)
        del self.data[: self.mark]
        self.pos -= self.mark
        self.counted -= self.mark
        self.mark = 0
        block = self.stream.read(max(self.chunk, len(self.data)))
        if not block:
            self.eof = True
            return False
        self.data += block
        return True

    def line_at(self, offset: int) -> int:
        """The line of ``data[offset]`` (offsets asked for never go back)."""
        self.line += self.data.count(b"\n", self.counted, offset)
        self.counted = offset
        return self.line

    def skip_space(self) -> bool:
        """Move ``pos`` to the next non-whitespace byte; False when the stream ends first."""
        while True:
            match = _SPACE.match(self.data, self.pos)
            assert match is not None  # the pattern matches the empty string
            self.pos = match.end()
            if self.pos < len(self.data):
                return True
            if not self.more():
                return False

    def element_end(self) -> bool:
        """Move ``pos`` to the ``,`` or ``]`` that ends the element starting at ``pos``;
        False when the stream ends first."""
        whole = _WHOLE.match(self.data, self.pos)
        if whole is not None:
            self.pos = whole.end()
            return True
        depth = 0
        data, pos, search = self.data, self.pos, _TOKEN.search
        while True:
            match = search(data, pos)
            if match is None or (
                match.end() - match.start() == 1 and data[match.start()] == _QUOTE
            ):
                # No delimiter yet, or a string whose closing quote is not read yet.
                self.pos = len(data) if match is None else match.start()
                if not self.more():
                    return False
                data, pos = self.data, self.pos
                continue
            at = match.start()
            byte = data[at]
            pos = match.end()
            if byte == _QUOTE:
                continue
            if byte in (_OPEN_OBJECT, _OPEN_ARRAY):
                depth += 1
            elif byte == _COMMA:
                if not depth:
                    self.pos = at
                    return True
            elif depth:
                depth -= 1
            elif byte == _CLOSE_ARRAY:  # the array's own ']'
                self.pos = at
                return True
            # else: a '}' outside any nesting, left for the element's decoder to refuse


def elements(stream: IO[bytes], chunk: int = _CHUNK) -> Iterator[Element | Broken]:
    """Yield every element of the JSON array in ``stream`` in order, then at most one
    :class:`Broken` where splitting stopped. Errors reading ``stream`` propagate."""
    buf = _Buffer(stream, chunk)
    while len(buf.data) < len(_BOM) and buf.more():
        pass
    if buf.data.startswith(_BOM):
        buf.pos = len(_BOM)
    if not buf.skip_space():
        yield Broken(1, buf.line_at(buf.pos), "empty")
        return
    if buf.data[buf.pos] != _OPEN_ARRAY:
        yield Broken(1, buf.line_at(buf.pos), "not_array")
        return
    buf.pos += 1
    n = 0
    while True:
        buf.mark = buf.pos
        if not buf.skip_space():
            yield Broken(n + 1, buf.line_at(buf.pos), "cut_off")
            return
        if n == 0 and buf.data[buf.pos] == _CLOSE_ARRAY:  # []
            buf.pos += 1
            break
        n += 1
        buf.mark = buf.pos
        line = buf.line_at(buf.pos)
        if not buf.element_end():
            yield Broken(n, line, "cut_off")
            return
        yield Element(n, line, bytes(buf.data[buf.mark : buf.pos]).rstrip(b" \t\r\n"))
        buf.pos += 1
        if buf.data[buf.pos - 1] == _CLOSE_ARRAY:
            break
    buf.mark = buf.pos
    if buf.skip_space():
        yield Broken(n + 1, buf.line_at(buf.pos), "trailing")
