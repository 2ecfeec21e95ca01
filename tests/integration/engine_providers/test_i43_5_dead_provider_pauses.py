"""The newcomer's path: a dead provider (every connection refused) pauses the action
after a burst of identical transport failures — its units are skipped
``provider_unreachable`` (the next run asks them again), the run says the fix — instead
of spending every record's attempts and failing them all."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agac import api
from agac.engine.walk.calls import breaker_threshold
from agac.providers.base import TRANSPORTS
from agac.testing import write_project

RECORDS = 40
CONCURRENCY = 2

WORKFLOW = f"""\
name: dead
input: {{path: data/, id_field: id}}
defaults:
  model: openai/gpt-4o-mini
  max_concurrency: {CONCURRENCY}
  max_tokens: 16
  timeout: 10s
  retry: {{max_attempts: 3, backoff: {{initial: 1ms, max: 2ms}}}}
actions:
  - name: ask
    prompt: "Say {{{{ source.text }}}}"
  - name: after
    dependencies: [ask]
    prompt: "Again: {{{{ ask }}}}"
"""


def _refused_port() -> int:
    """A loopback port nothing listens on: every connection to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_i43_5_a_dead_provider_pauses_the_action_instead_of_failing_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    port = _refused_port()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write_project(
        tmp_path,
        WORKFLOW,
        agac_yml=f"providers:\n  openai: {{transport: {transport}}}\n",
        data={"data/a.jsonl": [{"id": f"r{i:02d}", "text": f"hi {i}"} for i in range(RECORDS)]},
    )
    result = api.run("dead", tmp_path, progress=False)
    summary = result.summary.to_dict()
    assert summary["state"] == "failed", summary
    ask = summary["actions"]["ask"]
    threshold = breaker_threshold(CONCURRENCY)
    # Only the burst was sent (and the calls already in flight when it tripped): at most a
    # unit's attempts past the threshold per slot, never every record's attempts.
    assert threshold <= ask["calls"] <= threshold + 3 * CONCURRENCY, ask
    assert ask["reasons"].get("provider_unreachable", 0) >= RECORDS - CONCURRENCY, ask
    assert ask["failed"] <= CONCURRENCY, ask  # units whose attempts ran out just before
    assert ask["answered"] == 0 and ask["pending"] == 0
    assert summary["actions"]["after"]["reasons"] == {
        "provider_unreachable": ask["reasons"]["provider_unreachable"],
        **({"upstream_failed": ask["failed"]} if ask["failed"] else {}),
    }
    (advice,) = [a for a in summary["advice"] if a["action"] == "ask"]
    assert advice["reason"] == "provider_unreachable" and advice["status"] == "skipped"
    assert not [a for a in summary["advice"] if a["action"] == "after"]  # it sent nothing
    assert summary["next"] == "agac run dead"
    assert "connection" in advice["first"]["detail"] and "base_url" in advice["fix"], advice
    status = api.status("dead", tmp_path)
    assert status["actions"]["ask"]["reasons"]["provider_unreachable"] >= RECORDS - CONCURRENCY
    # A halting skip: the next run asks those units again (and pauses again, at once).
    again = api.run("dead", tmp_path, progress=False).summary.to_dict()
    assert again["run_id"] != summary["run_id"]
    assert again["actions"]["ask"]["calls"] <= threshold + 3 * CONCURRENCY
    assert again["actions"]["ask"]["reasons"].get("provider_unreachable", 0) >= (
        RECORDS - 2 * CONCURRENCY
    )
