"""What a pilot's measurements say about the whole input (docs/cli.md, agac pilot).

Each sampled record's calls, as the ledger counted them, are priced again at each tier:
``online`` (the live rate), ``batch`` (the batch rate) and ``flex`` (the rate the
provider bills its flex tier at, for a model it serves there; None when one of the
workflow's models is not served on flex). The whole input's cost is the stratified
estimate Σ N_h · mean_h over the sample's strata (one stratum without ``--stratify``),
with a 95 % interval of ±1.96 standard errors, the finite population correction included:
Var = Σ N_h² (1 − n_h/N_h) s_h² / n_h. A pilot that measured every record has no spread.

``after_pilot`` is what the full run still pays: the estimate less the sample's own cost,
since the full run reuses every pilot answer whose request is unchanged.

Time: online is the pilot's wall time scaled by the records left (the same concurrency),
its spread that of the cost (time follows tokens); flex is at least that (it may wait
for capacity); a batch completes within the provider's window (24 hours).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agac.providers.base import Usage

__all__ = ["BATCH_WINDOW_S", "TIERS", "Call", "project_tiers"]

TIERS = ("batch", "flex", "online")
BATCH_WINDOW_S = 24 * 3600.0
"""The batch APIs' completion window: a batch ends (or expires) within it."""

_Z95 = 1.959964


@dataclass(frozen=True)
class Call:
    """One call a sampled record's units made (or, reused, made when first asked)."""

    model: str
    """``provider/model``."""
    usage: Usage


Pricer = Callable[[str, Usage, str], float | None]
"""(model, usage, tier) → USD; None when the model is not sold at that tier."""


def project_tiers(
    calls: Mapping[str, Sequence[Call]],
    strata: Mapping[str, tuple[int, int]],
    stratum_of: Mapping[str, str],
    price: Pricer,
    elapsed_s: float,
) -> dict[str, Any]:
    """Per tier, the measured cost of the sample and the whole input's projected cost and
    time (``estimate``, ``low``, ``high``), and what is left after the pilot.

    ``calls``: each sampled record's calls; ``strata``: per stratum, (records in the input,
    records sampled); ``stratum_of``: each sampled record's stratum."""
    sampled = sum(n for _, n in strata.values())
    population = sum(n for n, _ in strata.values())
    out: dict[str, Any] = {}
    for tier in TIERS:
        per_record = {k: _record_cost(calls.get(k, ()), tier, price) for k in stratum_of}
        if any(v is None for v in per_record.values()):
            out[tier] = None
            continue
        costs = {k: float(v or 0.0) for k, v in per_record.items()}
        estimate, half = _stratified(costs, strata, stratum_of)
        measured = sum(costs.values())
        out[tier] = {
            "sample_usd": round(measured, 6),
            "estimate_usd": round(estimate, 6),
            "low_usd": round(max(estimate - half, measured), 6),
            "high_usd": round(estimate + half, 6),
            "after_pilot_usd": round(max(estimate - measured, 0.0), 6),
        }
    online = out["online"]
    scale = population / sampled if sampled else 0.0
    for tier in ("online", "flex"):
        if out[tier] is None:
            continue
        est = elapsed_s * scale
        ratio = (
            (
                online["low_usd"] / online["estimate_usd"],
                online["high_usd"] / online["estimate_usd"],
            )
            if online["estimate_usd"]
            else (1.0, 1.0)
        )
        out[tier]["time_s"] = {
            "estimate": round(est, 3),
            "low": round(est * ratio[0], 3),
            "high": round(est * ratio[1], 3),
            "at_least": tier == "flex",
        }
    if out["batch"] is not None:
        out["batch"]["time_s"] = {"estimate": None, "low": None, "high": BATCH_WINDOW_S}
    return out


def _record_cost(calls: Sequence[Call], tier: str, price: Pricer) -> float | None:
    total = 0.0
    for call in calls:
        usd = price(call.model, call.usage, tier)
        if usd is None:
            return None
        total += usd
    return total


def _stratified(
    costs: Mapping[str, float], strata: Mapping[str, tuple[int, int]], stratum_of: Mapping[str, str]
) -> tuple[float, float]:
    """The stratified estimate of the total and the half width of its 95 % interval."""
    by: dict[str, list[float]] = {}
    for key, usd in costs.items():
        by.setdefault(stratum_of[key], []).append(usd)
    total = variance = 0.0
    for stratum, (big_n, _) in strata.items():
        values = by.get(stratum, [])
        n = len(values)
        if n == 0:
            continue
        mean = sum(values) / n
        total += big_n * mean
        if n > 1 and big_n > n:
            s2 = sum((v - mean) ** 2 for v in values) / (n - 1)
            variance += big_n * big_n * (1 - n / big_n) * s2 / n
    return total, _Z95 * math.sqrt(variance)
