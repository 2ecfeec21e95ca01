"""The engine: the only orchestrator (docs/architecture.md), in rooms of its own.

- :mod:`~agac.engine.lifecycle` — admit, continue, retry, own, assemble, drive and end a run;
- :mod:`~agac.engine.walk` — a run's records in shards through their steps, one unit at a time;
- :mod:`~agac.engine.batch` — provider batches (B0-B13);
- :mod:`~agac.engine.approvals` — approvals and effects (A1-A3, E1-E2);
- :mod:`~agac.engine.limits` — budget, concurrency slots, rate windows, backoff;
- :mod:`~agac.engine.outcomes` — the outcome writer and the store gateway (group commit);
- :mod:`~agac.engine.workers` — scale-out workers;
- :mod:`~agac.engine.views` — summary, plan, rendered requests, sessions (read-only).

Shared by the rooms: :mod:`~agac.engine.values` (a unit's record and result, the run's
control, a pass's result), :mod:`~agac.engine.ports` (what a unit may call),
:mod:`~agac.engine.requests` (what a unit sends and accepts), :mod:`~agac.engine.actions`
(per-action runtime), :mod:`~agac.engine.context` (``ToolContext``),
:mod:`~agac.engine.crashpoints` and :mod:`~agac.engine.gcpolicy`.

Calls go one way: lifecycle → walk → unit → ports; batch, approvals and effects serve a
unit through the ports, and the batch step is driven by the run loop.
"""
