"""Deliberate crashes for crash tests (README.md, Contributing): ``AGAC_CRASH_AT=<point>:<n>`` kills
this process with SIGKILL the n-th time it passes ``point``. Unset, it costs one dict
lookup. Points: ``after_checkpoint`` (a group of outcomes is durable),
``before_checkpoint`` (outcomes computed, not yet written), ``before_submit`` (a batch
intent is recorded, the provider not yet asked), ``after_submit`` (the provider accepted
the batch, the store does not know yet), ``mid_ingest`` (part of a batch's results read), ``before_collected`` (every result of a
batch is stored, the batch not yet marked collected), ``after_collected`` (the batch is
marked collected, its units not yet answered in the run),
``effect_started`` (an effect's intent is durable, the function not called yet),
``effect_called`` (a tool's effect happened, its receipt is not recorded yet),
``after_admit`` (a run is admitted, nothing executed), ``before_finalize`` (every outcome
is durable, the final state not yet written), ``approval_proposed`` (a proposal is
stored, its unit waits), ``approval_decided`` (``agac approve|reject|revise`` stored its
decision), ``approval_acting`` (an approved unit recorded its use of the approval and has
not acted yet), ``hybrid_switched`` (B13: a batch action's switch to live calls is
recorded, nothing cancelled yet), ``hybrid_cancelled`` (a batch was cancelled to go live,
the store does not know yet), ``hybrid_live`` (a live call of a switched action is
durable), ``answer_kept`` (an answer to be judged is durable, its judges not asked yet),
``judge_graded`` (a judge's verdict is durable, the unit it grades not yet),
``turn_stored`` (a tool loop's model turn is durable, its calls not run yet),
``tool_called`` (a tool loop's function returned, its result not stored yet),
``tool_stored`` (a tool loop's call result is durable).
"""

from __future__ import annotations

import os
import signal

__all__ = ["maybe_crash"]

_SPEC = os.environ.get("AGAC_CRASH_AT", "")
_POINT, _, _N = _SPEC.partition(":")
_COUNTS: dict[str, int] = {}


def maybe_crash(point: str) -> None:
    if not _POINT or point != _POINT:
        return
    _COUNTS[point] = _COUNTS.get(point, 0) + 1
    if _COUNTS[point] >= int(_N or 1):
        os.kill(os.getpid(), signal.SIGKILL)
