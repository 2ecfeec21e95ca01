"""A2: the signing secret and what makes a stored proposal altered."""

from __future__ import annotations

import stat
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from agac.engine.approvals.proposals import (
    content_hash,
    decision_signature,
    load_secret,
    sign,
    tampered,
)


def test_a2_secret_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    found: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: found.append(load_secret(tmp_path))) for _ in range(8)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(set(found)) == 1 and len(found[0]) == 64
    path = tmp_path / ".agac" / "secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["secret"]  # no temporary left behind


def test_a2_agac_secret_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGAC_SECRET", "s3cret")
    assert load_secret(tmp_path) == b"s3cret"
    assert not (tmp_path / ".agac").exists()


def _row(secret: bytes, **changes: object) -> SimpleNamespace:
    row = {
        "id": "p1",
        "workflow": "wf",
        "action": "send",
        "unit_key": "r1",
        "subject": "s",
        "parent": None,
        "arguments": '{"a":1}',
        "policy_version": "1",
        "approvers": '["ann"]',
        "proposed_by": None,
        "expires_at": 100.5,
        "created_at": 10.25,
        "state": "approved",
        "decided_by": "ann",
        "decided_at": 20.125,
        "reason": None,
    }
    row["content_hash"] = content_hash(row)
    row["signature"] = sign(secret, "proposal:" + row["content_hash"])
    row["decision_signature"] = decision_signature(
        secret, row["content_hash"], "approved", "ann", 20.125, None
    )
    row.update(changes)
    return SimpleNamespace(**row)


def test_a2_altered_content_or_decision_is_detected() -> None:
    secret = b"k"
    assert tampered(secret, _row(secret)) is None
    assert "content" in (tampered(secret, _row(secret, arguments='{"a":2}')) or "")
    assert "signature" in (tampered(b"other", _row(secret)) or "")
    assert "decision" in (tampered(secret, _row(secret, decided_by="mallory")) or "")
    assert "decision" in (tampered(secret, _row(secret, state="rejected")) or "")
