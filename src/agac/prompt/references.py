"""The values a template or guard reads, found statically in the Jinja AST.

Validation uses this to report ``undefined_variable`` (a template reading something
its action cannot see) and ``guard_reads_missing_field``. A reference is a path: the
root name followed by the constant attribute or item keys read from it, e.g.
``("classify", "sentiment")`` for ``{{ classify.sentiment }}`` or
``("source", "tags", 0)`` for ``{{ source.tags[0] }}``. Loop variables, ``set`` targets
and macro arguments are local and never roots; nor are Jinja's globals (``range``…).
A method call reads the object it is called on: ``source.text.upper()`` reads
``("source", "text")``.
"""

from __future__ import annotations

from functools import lru_cache

from jinja2 import meta, nodes
from jinja2.parser import Parser

from agac.prompt.render import ENV

__all__ = ["Reference", "guarded_references", "template_references"]

#: Filters and tests that make reading a missing value safe.
_GUARD_FILTERS = frozenset({"default", "d"})
_GUARD_TESTS = frozenset({"defined", "undefined"})

Reference = tuple[str | int, ...]


def template_references(source: str, *, expression: bool = False) -> set[Reference]:
    """Paths read by the template ``source`` (or the guard expression, with ``expression``).

    Raises ``jinja2.TemplateSyntaxError`` when it does not parse.
    """
    return set(_references(source, expression))


@lru_cache(maxsize=1024)
def _references(source: str, expression: bool) -> frozenset[Reference]:
    tree = _parse_expression(source) if expression else ENV.parse(source)
    roots = meta.find_undeclared_variables(tree) - set(ENV.globals)
    found: set[Reference] = set()
    _collect(tree, roots, found)
    return frozenset(found)


def guarded_references(source: str, *, expression: bool = False) -> set[Reference]:
    """Paths the template (or guard) checks before relying on them: the value of a
    ``default`` filter (``source.x | default('')``), the subject of an ``is defined`` /
    ``is undefined`` test, and ``'x' in source`` (guarding ``source.x``). A read of such
    a path, or of anything below it, cannot fail because the value is missing."""
    return set(_guarded(source, expression))


@lru_cache(maxsize=1024)
def _guarded(source: str, expression: bool) -> frozenset[Reference]:
    tree = _parse_expression(source) if expression else ENV.parse(source)
    found: set[Reference] = set()
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        assert isinstance(node, (nodes.Filter, nodes.Test))
        names = _GUARD_FILTERS if isinstance(node, nodes.Filter) else _GUARD_TESTS
        if node.name in names and node.node is not None and (chain := _chain(node.node)):
            found.add(chain)
    for compare in tree.find_all(nodes.Compare):
        key = compare.expr.value if isinstance(compare.expr, nodes.Const) else None
        for op in compare.ops:
            if op.op in ("in", "notin") and isinstance(key, str) and (chain := _chain(op.expr)):
                found.add((*chain, key))
    return frozenset(found)


def _parse_expression(source: str) -> nodes.Template:
    parser = Parser(ENV, source, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        raise parser.fail("unexpected text after the expression", parser.stream.current.lineno)
    tree = nodes.Template([nodes.Output([expr], lineno=1)], lineno=1)
    tree.set_environment(ENV)
    return tree


def _chain(node: nodes.Node) -> Reference | None:
    if isinstance(node, nodes.Name):
        return (node.name,) if node.ctx == "load" else None
    if isinstance(node, nodes.Getattr):
        base = _chain(node.node)
        return None if base is None else base + (node.attr,)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        key = node.arg.value
        if isinstance(key, (str, int)) and not isinstance(key, bool):
            base = _chain(node.node)
            return None if base is None else base + (key,)
    return None


def _collect(node: nodes.Node, roots: set[str], found: set[Reference]) -> None:
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
        # obj.method(...): the object is read; the method name is not a field.
        _visit(node.node.node, roots, found)
        for child in (*node.args, *node.kwargs, node.dyn_args, node.dyn_kwargs):
            if child is not None:
                _collect(child, roots, found)
        return
    _visit(node, roots, found)


def _visit(node: nodes.Node, roots: set[str], found: set[Reference]) -> None:
    chain = _chain(node)
    if chain is not None:
        if chain[0] in roots:
            found.add(chain)
        return
    for child in node.iter_child_nodes():
        _collect(child, roots, found)
