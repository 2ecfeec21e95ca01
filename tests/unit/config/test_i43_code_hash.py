"""Issue 43 item 1 (The newcomer's path): what a tool's code hash covers — the file that
defines it (helpers included), through decorators; a callable object by its class; a
function without a file by its compiled code."""

from __future__ import annotations

import functools
from pathlib import Path

from agac.config.functions import code_hash, resolve_function

_TOOL = """\
import functools


def _helper(x):
    return x + {n}


def _wrap(fn):
    @functools.wraps(fn)
    def inner(inputs, ctx):
        return fn(inputs, ctx)
    return inner


@_wrap
def tool(inputs, ctx):
    return _helper(1)


class Tool:
    def __call__(self, inputs, ctx):
        return 1


instance = Tool()
"""


def _hashes(root: Path, package: str, n: int) -> tuple[str, str]:
    (root / package).mkdir(exist_ok=True)
    (root / package / "__init__.py").write_text("", encoding="utf-8")
    (root / package / "mod.py").write_text(_TOOL.format(n=n), encoding="utf-8")
    return (
        code_hash(resolve_function(f"{package}.mod:tool", root)),
        code_hash(resolve_function(f"{package}.mod:instance", root)),
    )


def test_i43_1_the_code_hash_follows_the_defining_file(tmp_path: Path) -> None:
    one, two, three = tmp_path / "one", tmp_path / "two", tmp_path / "three"
    for root in (one, two, three):
        root.mkdir()
    first = _hashes(one, "i43tools", 1)
    same = _hashes(two, "i43tools", 1)
    edited = _hashes(three, "i43tools", 2)
    assert first == same  # the same code in another place hashes the same
    assert first[0] != first[1]
    assert edited[0] != first[0] and edited[1] != first[1]  # a helper edited: all differ


def test_i43_1_functions_without_a_file_are_hashed_by_their_code() -> None:
    namespace: dict[str, object] = {}
    exec("def tool(inputs, ctx):\n    return 1\n", namespace)  # noqa: S102
    other: dict[str, object] = {}
    exec("def tool(inputs, ctx):\n    return 2\n", other)  # noqa: S102
    assert code_hash(namespace["tool"]) != code_hash(other["tool"])  # type: ignore[arg-type]
    assert len(code_hash(len)) == 64
    assert code_hash(functools.partial(len)) == code_hash(functools.partial(len))
