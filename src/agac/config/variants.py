"""``variants:`` on an llm action (docs/workflow-reference.md, Variants): two or more
versions of one action — another model, another prompt, other request options — run over
the same records in the same run, to be compared (``agac compare RUN --variants``).

Each variant becomes an action of its own, expanded here before anything else looks at
the action: the ``primary:`` variant (the first when unset) keeps the action's name, so
what depends on the action, and every export, reads its answers; each other variant is
the action ``NAME@VARIANT`` with the same dependencies, schema and checks and the
variant's keys in place of the action's. Their requests are ordinary units with their own
fingerprints, so reuse, budgets, the ledger and batch apply to each as to any action,
and nothing depends on a variant but the primary.

A value a variant sets is reported at the variant's own line (a model agac does not know,
a template that does not compile).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from agac.config.actions import RawAction
from agac.config.source import Findings, Path, did_you_mean

__all__ = ["VARIANT_KEYS", "VARIANT_SEPARATOR", "expand_variants", "variant_action"]

VARIANT_SEPARATOR = "@"
"""Between an action's name and a variant's in the name of the variant's own action."""

VARIANT_KEYS = frozenset(
    {
        "name",
        "model",
        "prompt",
        "system",
        "temperature",
        "max_tokens",
        "max_prompt_chars",
        "timeout",
        "run_mode",
        "provider_options",
        "context_prefix",
        "cache",
        "cache_ttl",
    }
)
"""What a variant may set: its name, and what goes into its requests."""

_NOT_WITH_VARIANTS = ("fan_out", "join", "tools")


def variant_action(action: str, variant: str) -> str:
    """The name of the action that runs ``variant`` of ``action`` (not the primary)."""
    return f"{action}{VARIANT_SEPARATOR}{variant}"


def expand_variants(f: Findings, raw: RawAction, line_of: Any) -> list[RawAction]:
    """``raw`` itself when it has no ``variants:``, else one action per variant (the
    primary first, under the action's name); ``line_of(path)`` gives a path's line.
    Every mistake is reported; an action with a bad ``variants:`` stays as written,
    without it, so the rest of the file is still checked."""
    if "variants" not in raw.own:
        if "primary" in raw.own:
            f.error(
                "invalid_variants",
                f"action {raw.name!r} names a primary variant but has no variants",
                raw.path + ("primary",),
                hint="variants: [{name: a, model: …}, {name: b, model: …}]",
            )
            raw.own.pop("primary")
        return [raw]
    entries = _entries(f, raw)
    wanted = raw.own.get("primary")
    base = {k: v for k, v in raw.own.items() if k not in ("variants", "primary")}
    raw.own = base
    if entries is None or not _allowed(f, raw):
        return [raw]
    primary = _primary(f, raw, wanted, [name for name, _, _ in entries])
    if primary is None:
        return [raw]
    entries.sort(key=lambda e: e[0] != primary)
    out = []
    for name, body, path in entries:
        own = copy.deepcopy(base)
        own.update({k: v for k, v in body.items() if k != "name"})
        out.append(
            replace(
                raw,
                name=raw.name if name == primary else variant_action(raw.name, name),
                line=raw.line if name == primary else line_of(path),
                own=own,
                values={},
                origins={},
                own_origins={k: path + (k,) for k in body if k != "name"},
                variant=name,
                variant_of=raw.name,
            )
        )
    return out


def _entries(f: Findings, raw: RawAction) -> list[tuple[str, dict[str, Any], Path]] | None:
    """(name, body, path) of each variant; None after any mistake (each reported)."""
    where = raw.path + ("variants",)
    items = raw.own["variants"]
    if not isinstance(items, list) or len(items) < 2:
        f.error(
            "invalid_variants",
            f"variants of action {raw.name!r} must be a list of two or more variants",
            where,
            hint="variants: [{name: small, model: openai/gpt-4o-mini}, "
            "{name: large, model: openai/gpt-4o}]",
        )
        return None
    out: list[tuple[str, dict[str, Any], Path]] = []
    seen: dict[str, int] = {}
    ok = True
    for i, body in enumerate(items):
        path = where + (i,)
        if not isinstance(body, dict):
            f.error("invalid_variants", f"variant #{i + 1} is not a mapping", path)
            ok = False
            continue
        f.unknown_keys(body, VARIANT_KEYS, path, "variant")
        ok = ok and not set(body) - VARIANT_KEYS
        name = body.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            f.error(
                "invalid_variants",
                f"variant #{i + 1} of action {raw.name!r} needs a name: an identifier "
                f"(letters, digits, _), got {name!r}",
                path + ("name",) if "name" in body else path,
            )
            ok = False
            continue
        if name in seen:
            f.error(
                "invalid_variants",
                f"variant name {name!r} of action {raw.name!r} is used twice "
                f"(variants #{seen[name] + 1} and #{i + 1})",
                path + ("name",),
                hint="give each variant a name of its own",
            )
            ok = False
            continue
        seen[name] = i
        out.append((name, body, path))
    return out if ok and _distinct(f, raw, out) else None


def _distinct(f: Findings, raw: RawAction, entries: list[tuple[str, dict[str, Any], Path]]) -> bool:
    """Two variants that set the same values would ask the same requests."""
    firsts: dict[str, str] = {}
    for name, body, path in entries:
        key = repr(sorted((k, repr(v)) for k, v in body.items() if k != "name"))
        if key in firsts:
            f.error(
                "invalid_variants",
                f"variants {firsts[key]!r} and {name!r} of action {raw.name!r} set the "
                "same values: they would ask the same requests",
                path,
                hint="make the variants differ in model, prompt or a request option",
            )
            return False
        firsts[key] = name
    return True


def _allowed(f: Findings, raw: RawAction) -> bool:
    if raw.kind != "llm":
        f.error(
            "invalid_variants",
            f"variants are for llm actions, but {raw.name!r} is a {raw.kind} action",
            raw.path + ("variants",),
        )
        return False
    for key in _NOT_WITH_VARIANTS:
        if key in raw.own:
            f.error(
                "invalid_variants",
                f"action {raw.name!r} has variants and {key!r}; variants are for an "
                f"action without {key!r}",
                raw.path + ("variants",),
                hint=f"compare two runs instead (agac compare RUN_A RUN_B), or drop {key!r}",
            )
            return False
    return True


def _primary(f: Findings, raw: RawAction, value: Any, names: list[str]) -> str | None:
    """The primary variant's name: ``primary:``, else the first."""
    if value is None:
        return names[0]
    if value in names:
        return str(value)
    f.error(
        "invalid_variants",
        f"primary {value!r} of action {raw.name!r} is not one of its variants ({', '.join(names)})",
        raw.path + ("primary",),
        hint=did_you_mean(str(value), names) or f"primary: {names[0]}",
    )
    return None
