"""``$ref`` in an action's JSON Schema: resolved within the schema itself, never fetched.

jsonschema on its own retrieves a ``$ref`` it cannot resolve locally over the network
(``http://``, ``file://``), at every answer it checks: a run would reach hosts other than
its provider, its verdicts would depend on them, and a ref to a file that is not JSON
ends in an error after the call was paid. agac checks every ``$ref`` once, at validation
(``schema_ref_refused`` for one that leaves the schema, ``invalid_schema`` for a local one
that names nothing), and gives every validator a registry that cannot retrieve anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["NO_RETRIEVAL", "ref_problems"]

_ROOT = "urn:agac:action-schema"


def _no_retrieval() -> Any:
    import referencing

    return referencing.Registry()  # no ``retrieve``: an unknown URI is NoSuchResource


class _Lazy:
    """The registry, built on first use (``referencing`` comes with jsonschema)."""

    value: Any = None

    def get(self) -> Any:
        if self.value is None:
            self.value = _no_retrieval()
        return self.value


NO_RETRIEVAL = _Lazy()


def _refs(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield where or "/", value
            elif key not in ("const", "enum", "default", "examples"):
                yield from _refs(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, f"{where}/{i}")


def ref_problems(schema: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(code, where, message)`` for each ``$ref`` of ``schema`` that does not resolve
    within it; ``[]`` when every one does. Resolves against the schema's own resources
    (``#/...`` pointers, anchors and embedded ``$id``s) only."""
    refs = list(_refs(schema))
    if not refs:
        return []
    from referencing import Resource
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    resource = Resource.from_contents(schema, default_specification=DRAFT202012)
    registry = NO_RETRIEVAL.get().with_resource(_ROOT, resource).crawl()
    resolver = registry.resolver(base_uri=resource.id() or _ROOT)
    problems = []
    for where, ref in refs:
        try:
            resolver.lookup(ref)
        except Unresolvable:
            local = ref.startswith("#")
            problems.append((
                "invalid_schema" if local else "schema_ref_refused", where,
                f"schema $ref {ref!r} at {where} names nothing in this schema" if local else
                f"schema $ref {ref!r} at {where} points outside this schema; agac resolves "
                "$ref only within the action's own schema (#/$defs/..., an $anchor or an $id "
                "it defines) and never fetches one"))
    return problems
