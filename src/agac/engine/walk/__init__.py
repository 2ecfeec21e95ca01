"""The record walk: a run's records in shards, each record through its steps (actions,
and fan-out regions whose items walk them too), one unit at a time. A unit decides its
outcome (guard, render, fingerprint, reuse, single-flight, the call with retries, a
tool) and reports it through :mod:`agac.engine.ports` — never to what drives it."""
