"""A pairwise judge over two runs (``agac compare --judge MODEL``; docs/cli.md, agac compare).

For each unit both runs answered differently, the judge sees the record and the two
answers twice, in both orders: (A's, B's) and (B's, A's). An answer wins when it wins in
both orders; when the two verdicts disagree (a judge that prefers whatever comes first,
say) the pair is a tie, so position bias cancels. Identical answers are a tie without a
call. B's win rate is the mean score (win 1, tie ½, loss 0) with a 95 % interval of
±1.96 standard errors.

Each judge request is fingerprinted and its verdict stored in the answers table of run
B's tenant, so comparing again pays for nothing twice; each call is in run B's ledger on
the unit it compares, with the origin ``pairwise`` (``agac cost`` shows it).

Run B's budget covers its pairwise judge as it covers its own calls (R5): each call
reserves its worst case against what run B has spent (its ledger, earlier pairwise calls
included) and is not sent when the cap has no room; the pairs left unjudged are counted
(``not_judged``) and left out of the win rate, never scored as ties.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agac.engine.limits.budget import BudgetGuard, request_estimate, spent_by
from agac.errors import FatalError, ProviderError, WaitError
from agac.jsontext import dumps
from agac.keys import record_of
from agac.providers.base import Message, Request, fingerprint_of
from agac.store.rows import AnswerRow, Checkpoint, UsageRow

if TYPE_CHECKING:
    from agac.clock import Clock
    from agac.engine.limits.budget import Reservation
    from agac.providers.base import Provider, Response
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = [
    "PAIRWISE_ORIGIN",
    "PAIRWISE_SCHEMA",
    "Pair",
    "judge_pairs",
    "label_agreement",
    "pair_request",
    "uncalibrated_pairwise",
]

PAIRWISE_ORIGIN = "pairwise"
PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "better": {"type": "string", "enum": ["1", "2", "tie"]},
        "reason": {"type": "string"},
    },
    "required": ["better", "reason"],
    "additionalProperties": False,
}
PAIRWISE_SYSTEM = (
    "You compare two answers to the same task for the same record. Say which answer is "
    "better — 1, 2, or tie when neither is — and why, in one sentence."
)
_TRIES = 3
_CONCURRENCY = 8


@dataclass(frozen=True)
class Pair:
    """One unit both runs answered: its action, key, record and the two answers."""

    action: str
    key: str
    source: Any
    a: Any
    b: Any


def pair_request(model: str, source: Any, first: Any, second: Any, criteria: str | None) -> Request:
    """The judge's request for ``first`` and ``second`` (in that order) on ``source``."""
    provider, _, name = model.partition("/")
    text = (
        (f"{criteria.strip()}\n\n" if criteria else "")
        + f"The record:\n{json.dumps(source, ensure_ascii=False, sort_keys=True)}\n\n"
        + f"Answer 1:\n{json.dumps(first, ensure_ascii=False, sort_keys=True)}\n\n"
        + f"Answer 2:\n{json.dumps(second, ensure_ascii=False, sort_keys=True)}\n\n"
        + "Which answer is better?"
    )
    return Request(
        provider=provider,
        model=name,
        messages=(Message("system", PAIRWISE_SYSTEM), Message("user", text)),
        max_tokens=256,
        temperature=0.0,
        schema=PAIRWISE_SCHEMA,
        timeout=120.0,
    )


@dataclass(frozen=True)
class _Judging:
    model: str
    criteria: str | None
    provider: Provider
    store: Store
    run: RunRecord
    prices: PriceTable
    clock: Clock
    budget: BudgetGuard | None


def run_budget(store: Store, run: RunRecord, prices: PriceTable) -> BudgetGuard | None:
    """Run ``run``'s budget guard with what it has spent so far, or None without a cap."""
    cap = run.settings.budget
    if cap is None:
        return None
    guard = BudgetGuard(cap.usd, cap.tokens, prices)
    guard.spent_usd, guard.spent_tokens = spent_by(store, run)
    return guard


async def judge_pairs(
    pairs: Sequence[Pair],
    *,
    model: str,
    criteria: str | None,
    provider: Provider,
    store: Store,
    run: RunRecord,
    prices: PriceTable,
    clock: Clock,
    preferred: Mapping[str, str] | None = None,
    min_agreement: float = 0.8,
) -> dict[str, Any]:
    """The pairwise verdicts on ``pairs``, ledgered on ``run`` (run B): per action the
    wins of each run, ties, calls, cost and B's win rate with its 95 % interval. With
    ``preferred`` (record key → ``a``, ``b`` or ``tie``, from a labels file), ``labels``
    per action: how the judge's outcomes agree with them (:func:`label_agreement`)."""
    budget = run_budget(store, run, prices)
    judging = _Judging(model, criteria, provider, store, run, prices, clock, budget)
    slots = asyncio.Semaphore(_CONCURRENCY)

    async def one(pair: Pair) -> tuple[Pair, float | None, int, float]:
        async with slots:
            return await _pair(judging, pair)

    results = await asyncio.gather(*(one(p) for p in pairs))
    by: dict[str, list[tuple[float | None, int, float]]] = {}
    outcomes: dict[str, list[tuple[str, str]]] = {}
    for pair, score, calls, cost in results:
        by.setdefault(pair.action, []).append((score, calls, cost))
        label = (preferred or {}).get(record_of(pair.key))
        if score is None:
            continue
        if label is not None:
            outcomes.setdefault(pair.action, []).append((label, _OUTCOME[score]))
    cap = budget.cap_text() if budget is not None else None
    out = {action: _summary(model, rows, cap) for action, rows in by.items()}
    if preferred is not None:
        for action, summary in out.items():
            summary["labels"] = label_agreement(outcomes.get(action, []), min_agreement)
    return out


_OUTCOME = {0.0: "a", 0.5: "tie", 1.0: "b"}
"""A pair's outcome by B's score: A won in both orders, a tie, or B won in both."""


def label_agreement(pairs: Sequence[tuple[str, str]], min_agreement: float) -> dict[str, Any]:
    """How a pairwise judge's outcomes agree with the labelled ones ((expected, judged)
    per labelled pair): their count, the agreement, the confusion matrix (expected →
    judged → count) and ``uncalibrated`` below ``min_agreement`` (or with none labelled)."""
    confusion = {e: dict.fromkeys(_PREFERENCES, 0) for e in _PREFERENCES}
    for expected, judged in pairs:
        confusion[expected][judged] += 1
    n = len(pairs)
    agreement = sum(1 for e, j in pairs if e == j) / n if n else None
    return {
        "labelled": n,
        "agreement": None if agreement is None else round(agreement, 4),
        "confusion": confusion,
        "uncalibrated": agreement is None or agreement < min_agreement,
    }


_PREFERENCES = ("a", "b", "tie")


def uncalibrated_pairwise(action: str, summary: Mapping[str, Any] | None) -> list[str]:
    """The ``judge_uncalibrated`` warning of an action's pairwise judge whose agreement
    with the labels is below the threshold it was measured against."""
    labels = (summary or {}).get("labels")
    if not labels or not labels["uncalibrated"]:
        return []
    if not labels["labelled"]:
        text = (
            f"warning: no pair of {action} the pairwise judge compared is labelled "
            "(a pairwise column: a, b or tie): its verdicts are unchecked [judge_uncalibrated]"
        )
        return [text]
    text = (
        f"warning: the pairwise judge of {action} agrees with the labels on "
        f"{labels['agreement']:.0%} of {labels['labelled']} labelled pairs: read its "
        "verdicts before trusting its win rate [judge_uncalibrated]"
    )
    return [text]


async def _pair(j: _Judging, pair: Pair) -> tuple[Pair, float | None, int, float]:
    """(pair, B's score — None when the budget left it unjudged —, calls made, their cost)."""
    if pair.a == pair.b:
        return pair, 0.5, 0, 0.0
    first, calls1, cost1 = await _verdict(j, pair, pair.a, pair.b)
    if first is None:
        return pair, None, calls1, cost1
    second, calls2, cost2 = await _verdict(j, pair, pair.b, pair.a)
    if second is None:
        return pair, None, calls1 + calls2, cost1 + cost2
    if first == "2" and second == "1":
        score = 1.0  # B won in both orders
    elif first == "1" and second == "2":
        score = 0.0  # A won in both orders
    else:
        score = 0.5  # a tie, or the verdicts disagree: position bias cancelled
    return pair, score, calls1 + calls2, cost1 + cost2


async def _verdict(
    j: _Judging, pair: Pair, first: Any, second: Any
) -> tuple[str | None, int, float]:
    """The judge's ``better`` for this order (stored, or asked; None when run B's budget
    has no room for the call), calls made and cost."""
    request = pair_request(j.model, pair.source, first, second, j.criteria)
    text = request.canonical()
    fp = fingerprint_of(text)
    stored = j.store.get_answers([fp], tenant=j.run.tenant).get(fp)
    if stored is not None:
        return str(json.loads(stored).get("better", "tie")), 0, 0.0
    calls, cost = 0, 0.0
    for attempt in range(1, _TRIES + 1):
        held = _reserve(j, request)
        if held is False:
            return None, calls, cost
        started = j.clock.monotonic()
        try:
            response = await j.provider.complete(request)
        except ProviderError as exc:
            calls += 1
            _settle(j, held, None)
            _write(j, pair, request, None, f"{type(exc).__name__}: {exc}", started, fp, None)
            if isinstance(exc, FatalError) or attempt == _TRIES:
                return "tie", calls, cost  # no verdict: counted as a tie, the call ledgered
            await asyncio.sleep(exc.retry_after or 1.0 if isinstance(exc, WaitError) else 0.5)
            continue
        calls += 1
        _settle(j, held, response)
        better = _better(response)
        answer = None
        if better is not None:
            answer = AnswerRow(
                fp,
                request.provider,
                request.model,
                text,
                dumps({"text": response.text, "model": response.model}),
                dumps({"better": better}),
                j.clock.time(),
            )
        error = None if better is not None else f"not a verdict: {response.text[:200]!r}"
        cost += _write(j, pair, request, response, error, started, fp, answer)
        if better is not None:
            return better, calls, cost
    return "tie", calls, cost


def _reserve(j: _Judging, request: Request) -> Reservation | None | Literal[False]:
    """The call's worst case held from run B's budget: None without a budget, False when
    it has no room (the call is not sent)."""
    if j.budget is None:
        return None
    i, o = request_estimate(sum(len(m.content) for m in request.messages), request.max_tokens)
    held = j.budget.worst_case(j.model, i, o, "live")
    return held if j.budget.reserve(held) else False


def _settle(j: _Judging, held: Reservation | None, response: Response | None) -> None:
    if held is not None and j.budget is not None:
        usage = response.total_usage if response is not None else None
        j.budget.settle_usage(held, j.model, usage, "live")


def _better(response: Response) -> str | None:
    value = response.parsed
    if value is None:
        try:
            value = json.loads(response.text)
        except ValueError:
            return None
    better = value.get("better") if isinstance(value, dict) else None
    return better if better in ("1", "2", "tie") else None


def _write(
    j: _Judging,
    pair: Pair,
    request: Request,
    response: Response | None,
    error: str | None,
    started: float,
    fp: str,
    answer: AnswerRow | None,
) -> float:
    """The call in run B's ledger (origin ``pairwise``) with its verdict; its cost."""
    usage = response.usage if response is not None else None
    cost = j.prices.cost(j.model, usage, "live") if usage is not None else 0.0
    row = UsageRow(
        j.run.id,
        pair.action,
        pair.key,
        0,
        "llm",
        request.provider,
        request.model,
        "live",
        usage.input_tokens if usage else 0,
        usage.cached_tokens if usage else 0,
        usage.cache_write_tokens if usage else 0,
        usage.output_tokens if usage else 0,
        cost,
        (j.clock.monotonic() - started) * 1000,
        "ok" if error is None else "error",
        error,
        fp,
        j.clock.time(),
        PAIRWISE_ORIGIN,
        usage.reasoning_tokens if usage else 0,
        None,
        response.request_id if response is not None else None,
    )
    j.store.checkpoint(
        Checkpoint(tenant=j.run.tenant, answers=(answer,) if answer else (), usage=(row,))
    )
    return cost


def _summary(
    model: str, rows: list[tuple[float | None, int, float]], cap: str | None
) -> dict[str, Any]:
    scores = [s for s, _, _ in rows if s is not None]
    n = len(scores)
    mean = sum(scores) / n if n else 0.5
    var = sum((s - mean) ** 2 for s in scores) / (n - 1) if n > 1 else 0.0
    half = 1.959964 * math.sqrt(var / n) if n else 0.5
    out: dict[str, Any] = {
        "model": model,
        "compared": n,
        "a_wins": sum(1 for s in scores if s == 0.0),
        "b_wins": sum(1 for s in scores if s == 1.0),
        "ties": sum(1 for s in scores if s == 0.5),
        "b_win_rate": round(mean, 4),
        "ci95": [round(max(mean - half, 0.0), 4), round(min(mean + half, 1.0), 4)],
        "calls": sum(c for _, c, _ in rows),
        "cost_usd": round(sum(c for _, _, c in rows), 6),
    }
    unjudged = len(rows) - n
    if unjudged:
        out["not_judged"] = unjudged
        out["budget"] = (
            f"{unjudged} pair{'s' if unjudged != 1 else ''} not judged: run B's budget "
            f"({cap}) has no room for the pairwise judge's calls [budget_exhausted]"
        )
    return out
