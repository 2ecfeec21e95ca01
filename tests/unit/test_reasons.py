"""S4 nothing silent: every reason code a unit can end with is in the registry
(agac.reasons), and the registry is the reason-code table of docs/reference/reason-codes.md.

The codes the source writes are collected from its syntax tree, wherever an outcome gets
its reason: a status constant (``"failed"``/``"skipped"``) followed by the reason in a
call or tuple, a ``reason=`` keyword (events' waiting reasons aside), ``Fail(reason, …)``,
an assignment to ``reason``/``why_unit``, a ``*REASON*`` mapping, a parameter default
``reason=…``, and a constant named after its code (``INVALID_INPUT = "invalid_input"``).
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

from agac.reasons import REASONS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    p
    for p in sorted((ROOT / "src" / "agac").rglob("*.py"))
    if not {"emulator", "cli", "providers", "reasons.py"} & set(p.relative_to(ROOT / "src").parts)
]
STATUSES = {"failed", "skipped", "answered"}
RUN_STATES = {"succeeded", "partial"}  # a list of run states is not an outcome
CODE = re.compile(r"^[a-z]+(_[a-z]+)*$")
REASON_NAMES = {"reason", "why_unit"}
EVENT_CALLS = {"event", "_event", "run_event"}


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _after_status(items: list[ast.expr]) -> Iterator[str]:
    if RUN_STATES & {_str(i) for i in items}:
        return
    for first, second in itertools.pairwise(items):
        code = _str(second)
        if (
            _str(first) in ("failed", "skipped")
            and code
            and code not in STATUSES
            and CODE.match(code)
        ):  # not a run's state followed by its message
            yield code


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _codes(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield from _after_status(node.args)
            if _call_name(node) == "Fail" and (code := _str(node.args[0] if node.args else None)):
                yield code
            if _call_name(node) not in EVENT_CALLS:
                yield from (c for k in node.keywords if k.arg == "reason" and (c := _str(k.value)))
        elif isinstance(node, ast.Tuple):
            yield from _after_status(node.elts)
        elif isinstance(node, ast.Assign):
            yield from _assigned(node)
        elif isinstance(node, ast.arguments):
            params = [*node.posonlyargs, *node.args]
            defaults = dict(
                zip(
                    [a.arg for a in params][len(params) - len(node.defaults) :],
                    node.defaults,
                    strict=True,
                )
            )
            defaults.update(
                {
                    a.arg: d
                    for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)
                    if d is not None
                }
            )
            yield from (c for name, d in defaults.items() if name == "reason" and (c := _str(d)))


def _assigned(node: ast.Assign) -> Iterator[str]:
    for target in node.targets:
        if isinstance(target, ast.Name):
            value = _str(node.value)
            if target.id in REASON_NAMES and value:
                yield value
            if value and target.id.isupper() and target.id.lower() == value:
                yield value
            if "REASON" in target.id and isinstance(node.value, ast.Dict):
                yield from (c for v in node.value.values if (c := _str(v)))
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            for name, value in zip(target.elts, node.value.elts, strict=False):
                if isinstance(name, ast.Name) and name.id in REASON_NAMES and (c := _str(value)):
                    yield c


def source_codes() -> dict[str, list[str]]:
    """Each reason code the source writes, with the files that write it."""
    found: dict[str, list[str]] = {}
    for path in SOURCES:
        for code in _codes(ast.parse(path.read_text(encoding="utf-8"))):
            found.setdefault(code, []).append(path.relative_to(ROOT).as_posix())
    return found


def table_codes() -> dict[str, str]:
    """code -> bucket, from the reason-code table of docs/reference/reason-codes.md."""
    section = (ROOT / "docs" / "reference" / "reason-codes.md").read_text(encoding="utf-8")
    return {
        m["code"]: m["bucket"]
        for m in re.finditer(
            r"^\| `(?P<code>[a-z_]+)` \| (?P<bucket>failed|skipped) \|", section, re.MULTILINE
        )
    }


def test_s4_every_reason_the_source_writes_is_registered() -> None:
    found = source_codes()
    unknown = {c: files for c, files in found.items() if c not in REASONS}
    assert not unknown, f"reason codes written but not in agac.reasons.REASONS: {unknown}"


def test_s4_every_registered_reason_is_written_somewhere() -> None:
    assert sorted(set(REASONS) - set(source_codes())) == []


def test_s4_reason_table_in_the_docs_equals_the_registry() -> None:
    table = table_codes()
    assert sorted(set(REASONS) - set(table)) == [], (
        "codes missing from docs/reference/reason-codes.md"
    )
    assert sorted(set(table) - set(REASONS)) == [], (
        "codes in docs/reference/reason-codes.md agac never writes"
    )
    assert {c: r.bucket for c, r in REASONS.items()} == table


def test_the_collector_sees_the_shapes_it_claims() -> None:
    tree = ast.parse(
        "settle(rt, rec, 'failed', 'a_code')\n"
        "rows.append((cid, 'skipped', 'b_code', 'x'))\n"
        "raise Fail('c_code', 'text')\n"
        "close_run(s, r, 'failed', 'it ended', reason='d_code')\n"
        "ex.event('waiting', reason='not_a_code')\n"
        "status, why_unit = 'failed', 'e_code'\n"
        "F_CODE = 'f_code'\n"
        "_MY_REASON = {'x': 'g_code'}\n"
        "def f(reason: str = 'h_code'): pass\n"
    )
    assert sorted(set(_codes(tree))) == [f"{c}_code" for c in "abcdefgh"]


def test_r1_what_a_reason_means_for_the_run_lives_in_the_registry() -> None:
    """``halts``/``carries_over``/``ends_run`` are the registry's: the skips that only say
    the run stopped are the ones a later run asks again, and deadline and budget give the
    run its final state, ``timed_out`` first."""
    from agac.reasons import HALTING, NOT_CARRIED, RUN_ENDING

    assert HALTING == {
        "budget_exhausted",
        "cancelled",
        "deadline",
        "batch_outstanding",
        "run_ended",
        "provider_unreachable",
    }
    assert set(NOT_CARRIED) == HALTING
    assert all(REASONS[c].bucket == "skipped" and not REASONS[c].carries_over for c in HALTING)
    assert all(r.carries_over for c, r in REASONS.items() if c not in HALTING)
    assert RUN_ENDING == (
        ("deadline", "timed_out"),
        ("budget_exhausted", "exhausted"),
        ("provider_unreachable", "failed"),
    )
