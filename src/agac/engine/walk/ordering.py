"""The order a shard's records start in: as read, or — for a live action on a provider that
caches the prompt prefixes it has just seen (vLLM, SGLang: the spec's ``prefix_order``) —
by prompt, so that records sharing a prefix reach the server one after another while
that prefix is still in its cache.

Sorting the prompts' text puts every run of records with a common prefix next to each
other (lexicographic order groups strings by prefix at every length). The first action
that reads only the record decides; its requests were rendered ahead for the shard
(:class:`~agac.engine.ports.Prefetched`), or are rendered here (``--fresh``). A record
whose prompt cannot render keeps its place at the front: its unit reports the error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from agac.engine.actions import is_batched
from agac.engine.requests import build_request

if TYPE_CHECKING:
    from agac.engine.actions import ActionRuntime
    from agac.engine.ports import Prefetched
    from agac.engine.values import RecordUnit
    from agac.jsontext import JSONObject

__all__ = ["prompt_ordered"]

Row = TypeVar("Row", bound="tuple[RecordUnit, JSONObject | None]")


def prompt_ordered(
    rows: Sequence[Row],
    roots: Sequence[ActionRuntime],
    prefetched: Mapping[tuple[str, str], Prefetched],
) -> list[Row]:
    """``rows`` (record, payload) in the order their units should start (see the module
    docstring); as given when no root action asks for prompt order."""
    rt = next((r for r in roots if _orders(r)), None)
    if rt is None:
        return list(rows)

    def key(row: Row) -> str:
        rec, payload = row
        found = prefetched.get((rt.name, rec.key))
        if found is not None:
            request = found.request
        else:
            try:
                request = build_request(rt, rt.view.build(payload, {}))
            except Exception:  # noqa: BLE001 - its unit renders again and reports it
                return ""
        return "\x00".join(m.content for m in request.messages)

    return sorted(rows, key=key)


def _orders(rt: ActionRuntime) -> bool:
    """A live llm action on a provider whose spec asks for prompt order."""
    provider = rt.provider
    return provider is not None and provider.spec.prefix_order and not is_batched(rt)
