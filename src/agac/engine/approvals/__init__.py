"""Approvals and effects (A1-A3, E1-E2): the gate a unit of an approval action passes
before it acts, proposals and their signatures, people's decisions, and tool effects run
at most once per idempotency key with their intent, receipt and resolution."""
