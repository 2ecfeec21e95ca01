"""The shape of the code stays as STYLE.md asks: no import cycles anywhere in src/agac
(an import under ``if TYPE_CHECKING:`` or inside a function counts too), no module over
600 lines, no function over 60 lines — except the tables that are long by nature (the
emulator's route table, the initial migration's DDL).

Lines are counted as written, not as wrapped: a line that begins inside an open bracket
(an argument list or a literal the formatter spread over several lines) does not count,
so ``ruff format`` wrapping a call changes no size. Docstrings, comments and blank lines
count."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import agac

SRC = Path(agac.__file__).parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
TABLES = {
    ("emulator/openai.py", "routes"),  # the wire protocol's route table
}
"""(module, function) pairs that are tables rather than logic."""
DDL = "store/migrations/versions/"
"""Migrations: each upgrade is the DDL of its tables."""


def _wrapped(text: str) -> set[int]:
    """The 1-based numbers of the lines of ``text`` that begin inside an open bracket."""
    depth, out = 0, set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.NL and depth > 0:
            out.add(tok.start[0] + 1)
    return out


def _size(first: int, last: int, wrapped: set[int]) -> int:
    """Lines ``first``..``last`` (1-based, inclusive) less the wrapped ones among them."""
    return last - first + 1 - sum(1 for n in wrapped if first <= n <= last)


def test_wrapped_lines_do_not_count() -> None:
    one = "def f(a, b):\n    return g(a, b, 1)\n"
    wrapped = (
        "def f(\n    a,\n    b,\n):\n    return g(\n        a,\n        b,\n        1,\n    )\n"
    )
    assert _size(1, 2, _wrapped(one)) == 2
    assert _size(1, 9, _wrapped(wrapped)) == 2
    doc = 'def f():\n    """One.\n\n    Two."""\n    return 1\n'
    assert _size(1, 5, _wrapped(doc)) == 5


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = path
    return out


def _imports(path: Path, module: str, known: dict[str, Path]) -> set[str]:
    """Every agac module ``module`` imports, wherever the import stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_in_src() -> None:
    known = _modules()
    graph = {m: _imports(p, m, known) for m, p in known.items()}
    # A package's __init__ that hands on names of its own submodules is its face, not a
    # loop: the edge from a submodule up to its package is how Python imports it.
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}
    assert _cycles(graph) == []


def test_no_module_over_600_lines() -> None:
    long = {}
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        n = _size(1, text.count("\n"), _wrapped(text))
        if n > MAX_MODULE_LINES:
            long[str(path.relative_to(SRC))] = n
    assert long == {}


def test_no_function_over_60_lines() -> None:
    long = []
    for path in SRC.rglob("*.py"):
        rel = str(path.relative_to(SRC))
        if rel.startswith(DDL):
            continue
        text = path.read_text(encoding="utf-8")
        wrapped = _wrapped(text)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = _size(node.lineno, node.end_lineno or node.lineno, wrapped)
                if lines > MAX_FUNCTION_LINES and (rel, node.name) not in TABLES:
                    long.append(f"{rel}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def _edges(known: dict[str, Path], src: str, dst: str) -> list[str]:
    """``a -> b`` for each module ``a`` of package ``src`` importing a module of ``dst``."""
    return sorted(
        f"{m} -> {d}"
        for m, p in known.items()
        if m == src or m.startswith(src + ".")
        for d in _imports(p, m, known)
        if d == dst or d.startswith(dst + ".")
    )


def test_i37_lifecycle_and_views_one_way() -> None:
    """The views read the lifecycle (the plan's input, ``run_mode: auto``'s choice), never
    the other way round: the R5 estimate admission checks is the lifecycle's own
    (engine/lifecycle/estimate.py). The run report reads neither."""
    known = _modules()
    assert _edges(known, "agac.engine.views", "agac.engine.lifecycle")  # the one way
    assert _edges(known, "agac.engine.lifecycle", "agac.engine.views") == []
    assert _edges(known, "agac.engine.report", "agac.engine.lifecycle") == []
    assert _edges(known, "agac.engine.report", "agac.engine.views") == []
