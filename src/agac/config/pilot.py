"""A workflow's ``pilot:`` (docs/workflow-reference.md, Pilot): ``agac run`` runs the workflow on
a sample first and, with ``approve: true``, waits for a person to approve the pilot's
results and projected cost before the full run is admitted (agac/api/pilotgate.py).

``pilot: {sample: 200, seed: 0, stratify: FIELD, approve: true, approvers: [lead],
expires_in: 24h}`` — ``approvers`` (users or groups of ``agac.yml``) and ``expires_in``
(default 24h) as for an action's ``approval:``.
"""

from __future__ import annotations

from typing import Any

from agac.config.model import PilotSpec
from agac.config.source import Findings
from agac.config.values import (
    read_bool,
    read_duration,
    read_int,
    read_mapping,
    read_str,
    read_str_list,
)

__all__ = ["PILOT_KEYS", "read_pilot"]

PILOT_KEYS = frozenset({"sample", "seed", "stratify", "approve", "approvers", "expires_in"})


def read_pilot(f: Findings, value: Any) -> PilotSpec | None:
    """The typed ``pilot:``; every bad key reported at its line."""
    path = ("pilot",)
    body = read_mapping(f, value, path)
    if body is None:
        return None
    f.unknown_keys(body, PILOT_KEYS, path, "pilot")
    if "sample" not in body:
        f.error("missing_key", "pilot has no 'sample'", path, hint="pilot: {sample: 200}")
        return None
    sample = read_int(f, body["sample"], path + ("sample",))
    seed = read_int(f, body["seed"], path + ("seed",), minimum=0) if "seed" in body else 0
    stratify = read_str(f, body["stratify"], path + ("stratify",)) if "stratify" in body else None
    approve = read_bool(f, body["approve"], path + ("approve",)) if "approve" in body else False
    approvers: tuple[str, ...] = ()
    if "approvers" in body:
        names = read_str_list(f, body["approvers"], path + ("approvers",), allow_single=True)
        approvers = tuple(dict.fromkeys(names or ()))
    if approve and not approvers:
        f.error(
            "missing_key",
            "pilot.approve needs approvers: who may approve the pilot",
            path + ("approve",),
            hint="pilot: {sample: 200, approve: true, approvers: [alice, leads]}",
        )
        return None
    expires = 24 * 3600.0
    if body.get("expires_in") is not None:
        expires = (
            read_duration(f, body["expires_in"], path + ("expires_in",), code="invalid_expires_in")
            or expires
        )
    if sample is None or seed is None:
        return None
    return PilotSpec(sample, seed, stratify, bool(approve), approvers, expires)
