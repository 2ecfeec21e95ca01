"""Prompt caching, the workflow side (docs/workflow-reference.md, Prompt caching; decision
0084): the ``context_prefix`` rendered once per run and kept with it, the cache-friendly
layout of the first user message, and the cache hint every request carries — outside the
fingerprint, so turning caching on or off reuses stored answers."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import rows, run

from agac import api
from agac.config.project import find_project
from agac.engine.lifecycle.admission import admit_run
from agac.engine.lifecycle.options import RunOptions
from agac.providers.base import CacheHint, Request
from agac.providers.mock import MockProvider
from agac.store.repository import Store
from agac.testing import write_project

POLICY = "Refunds within 30 days. " * 200  # ~1,200 tokens
HEAD = "Judge this request by the policy above.\n"

WF = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4}
actions:
  - name: judge
    system: "You are a careful support agent."
    context_prefix: '{{ read("docs/policy.md") }}'
    prompt: "Judge this request by the policy above.\\n{{ source.text }}"
"""

PLAIN = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4}
actions:
  - name: judge
    system: "You are a careful support agent."
    prompt: "Judge this request by the policy above.\\n{{ source.text }}"
"""


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Request]:
    """Every request the mock answers; the mock caches prefixes of 1,024 tokens or more."""
    seen: list[Request] = []
    answer = MockProvider.complete

    async def complete(self: MockProvider, request: Request) -> Any:
        seen.append(request)
        return await answer(self, request)

    monkeypatch.setattr(MockProvider, "complete", complete)
    monkeypatch.setattr(
        MockProvider,
        "spec",
        dataclasses.replace(MockProvider.spec, cache_minimum=lambda model: 1024),
    )
    return seen


def _make(root: Path, workflow: str = WF, policy: str = POLICY, n: int = 3) -> None:
    write_project(root, workflow, data={"data/a.jsonl": rows(n)}, files={"docs/policy.md": policy})


def _user(request: Request) -> str:
    return request.chat[0].content


def test_i24_context_prefix_comes_first_in_the_user_message(project: Path, sent) -> None:
    _make(project)
    assert run(project).summary["state"] == "succeeded"
    assert len(sent) == 3
    for request in sent:
        assert request.system == "You are a careful support agent."
        assert _user(request).startswith(POLICY + "\n\n" + HEAD)
        assert _user(request).endswith("text number " + _user(request)[-1])


def test_i24_context_prefix_hint_values_on_every_request(project: Path, sent) -> None:
    _make(project)
    run(project)
    hints = {r.cache for r in sent}
    assert len(hints) == 1  # one hint shared by every record of the action
    hint = hints.pop()
    assert isinstance(hint, CacheHint)
    system = "You are a careful support agent."
    assert (hint.mode, hint.ttl, hint.system) == ("auto", "5m", True)
    assert hint.static_chars == len(POLICY + "\n\n" + HEAD)
    assert hint.prefix_tokens == -(-(len(system) + hint.static_chars) // 4)
    assert hint.key is not None and len(hint.key) == 32
    for request in sent:
        static, rest = hint.split(_user(request))
        assert static == POLICY + "\n\n" + HEAD and rest.startswith("text number")


def test_i24_cache_auto_sends_no_hint_under_the_minimum(project: Path, sent) -> None:
    _make(project, policy="Short policy.")
    run(project)
    assert {r.cache for r in sent} == {None}


def test_i24_cache_on_marks_a_short_prefix_and_off_marks_none(project: Path, sent) -> None:
    _make(
        project,
        WF.replace("  - name: judge\n", "  - name: judge\n    cache: on\n    cache_ttl: 1h\n"),
        policy="Short policy.",
    )
    run(project)
    hint = sent[0].cache
    assert hint is not None and (hint.mode, hint.ttl) == ("on", "1h")
    assert hint.static_chars == len("Short policy.\n\n" + HEAD)
    sent.clear()
    _make(project, WF.replace("  - name: judge\n", "  - name: judge\n    cache: off\n"))
    run(project, fresh=True)
    assert len(sent) == 3 and {r.cache for r in sent} == {None}


def test_i24_cache_settings_keep_fingerprints_and_reuse_answers(project: Path, sent) -> None:
    _make(project)
    first = run(project).summary
    assert first["actions"]["judge"]["calls"] == 3
    for extra in ("    cache: off\n", "    cache: on\n    cache_ttl: 1h\n"):
        _make(project, WF.replace("  - name: judge\n", "  - name: judge\n" + extra))
        again = run(project).summary
        assert again["actions"]["judge"]["calls"] == 0
        assert again["actions"]["judge"]["reused"] == 3
    assert len(sent) == 3


def test_i24_requests_without_context_prefix_are_as_before(project: Path, sent) -> None:
    """A workflow without context_prefix sends the prompt alone: the same canonical request
    (and fingerprint) with caching off, auto or on."""
    _make(project, PLAIN)
    run(project)
    plain = sorted(r.canonical() for r in sent)
    assert all(_user(r).startswith(HEAD + "text number") for r in sent)
    for extra in ("    cache: off\n", "    cache: on\n"):
        sent.clear()
        _make(project, PLAIN.replace("  - name: judge\n", "  - name: judge\n" + extra))
        run(project, fresh=True)
        assert sorted(r.canonical() for r in sent) == plain


def test_i24_context_prefix_is_rendered_once_and_kept_with_the_run(project: Path, sent) -> None:
    _make(project)
    proj = find_project(project)
    store = Store(os.environ["AGAC_STORE"])
    try:
        # An admitted run that never executed stands for a run interrupted mid-way.
        admitted = admit_run(proj, store, api.load_workflow("wf", proj), RunOptions())
        snapshot = next(a for a in admitted.config["actions"] if a["name"] == "judge")
        assert snapshot["context_text"] == POLICY
        (project / "docs/policy.md").write_text("A new policy.", encoding="utf-8")
        continued = run(project).summary
        assert continued["run_id"] == admitted.id
        assert {_user(r).split("\n\n")[0] for r in sent} == {POLICY.rstrip("\n")}
        sent.clear()
        fresh = run(project, new=True).summary
        assert fresh["run_id"] != admitted.id
        assert fresh["actions"]["judge"]["calls"] == 3  # a new prefix: new requests
        assert {_user(r).split("\n\n")[0] for r in sent} == {"A new policy."}
    finally:
        store.close()


def test_i24_context_prefix_change_is_not_carried_from_the_last_run(project: Path, sent) -> None:
    _make(project)
    run(project)
    (project / "docs/policy.md").write_text("Another policy.", encoding="utf-8")
    summary = run(project).summary
    assert summary["actions"]["judge"]["calls"] == 3
    assert {_user(r).split("\n\n")[0] for r in sent[3:]} == {"Another policy."}


def test_i24_render_shows_the_static_prefix_and_the_hint(project: Path, sent) -> None:
    _make(project)
    [entry] = api.render("wf", "r00000", project=project)
    cache = entry["cache"]
    assert cache["static_chars"] == len(POLICY + "\n\n" + HEAD)
    assert (cache["hint"], cache["minimum"], cache["mode"], cache["system"]) == (
        True,
        1024,
        "auto",
        True,
    )
    assert entry["request"]["messages"][1]["content"].startswith(POLICY)
