"""Validation of prompt caching (docs/workflow-reference.md, Prompt caching): ``cache``,
``cache_ttl`` and ``context_prefix`` located at their lines, the files ``read()`` may
read, and the ``cache_unfriendly_prompt`` warning."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from agac.providers.mock import MockProvider

BASE = """
input: {path: data.jsonl}
actions:
"""

LONG = "Our refund policy says many things. " * 150  # ~1,350 tokens


@pytest.fixture
def caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mock caches prefixes of 1,024 tokens or more."""
    monkeypatch.setattr(
        MockProvider,
        "spec",
        dataclasses.replace(MockProvider.spec, cache_minimum=lambda model: 1024),
    )


def _action(extra: str, prompt: str = "x {{ source.text }}") -> str:
    return (
        BASE
        + f"""
  - name: a
    model: mock/m
    prompt: "{prompt}"
{extra}"""
    )


def test_i24_cache_keys_are_read(wf) -> None:
    checked = wf.check(
        _action("    cache: on\n    cache_ttl: 1h\n    context_prefix: 'Fixed text.'\n")
    )
    assert checked.problems == [], [p.render() for p in checked.problems]
    a = checked.workflow.action("a")
    assert (a.cache_mode, a.cache_ttl, a.context_prefix) == ("on", "1h", "Fixed text.")
    assert a.cache is True  # a tool's cache is another setting
    default = wf.check(_action("")).workflow.action("a")
    assert (default.cache_mode, default.cache_ttl, default.context_prefix) == ("auto", "5m", None)


@pytest.mark.parametrize(
    "spelling,mode",
    [("off", "off"), ("on", "on"), ("false", "off"), ("'off'", "off"), ("AUTO", "auto")],
)
def test_i24_cache_modes_as_yaml_writes_them(wf, spelling: str, mode: str) -> None:
    checked = wf.check(_action(f"    cache: {spelling}\n"))
    assert checked.workflow is not None and checked.workflow.action("a").cache_mode == mode


def test_i24_invalid_cache_and_ttl_are_located(wf) -> None:
    checked = wf.check(_action("    cache: sometimes\n    cache_ttl: 10m\n"))
    assert checked.workflow is None
    assert checked.one("invalid_cache").line == checked.line_of("cache: sometimes")
    assert checked.one("invalid_cache_ttl").line == checked.line_of("cache_ttl")
    assert "5m, 1h" in checked.one("invalid_cache_ttl").message


def test_i24_cache_keys_in_defaults(wf, tools: None) -> None:
    checked = wf.check("""
input: {path: data.jsonl}
defaults: {cache: "off", cache_ttl: 1h, context_prefix: "Shared."}
actions:
  - name: a
    model: mock/m
    prompt: "x {{ source.text }}"
  - name: t
    kind: tool
    function: tools:echo
""")
    assert checked.problems == [], [p.render() for p in checked.problems]
    a, t = checked.workflow.action("a"), checked.workflow.action("t")
    assert (a.cache_mode, a.cache_ttl, a.context_prefix) == ("off", "1h", "Shared.")
    assert t.cache is True and t.context_prefix is None  # a mode is for llm actions only
    bad = wf.check(
        BASE.replace("actions:", "defaults: {cache_ttl: 2h}\nactions:")
        + "  - name: a\n    model: mock/m\n    prompt: x\n"
    )
    assert bad.one("invalid_cache_ttl").line == bad.line_of("defaults")


def test_i24_cache_ttl_on_a_tool_is_not_an_llm_action(wf, tools: None) -> None:
    checked = wf.check(
        BASE + "  - name: t\n    kind: tool\n    function: tools:echo\n    cache_ttl: 1h\n"
    )
    assert checked.one("not_an_llm_action").line == checked.line_of("cache_ttl")


def test_i24_context_prefix_reads_project_files(wf) -> None:
    (wf.root / "docs").mkdir()
    (wf.root / "docs/policy.md").write_text("The policy.", encoding="utf-8")
    checked = wf.check(_action("    context_prefix: '{{ read(\"docs/policy.md\") }}'\n"))
    assert checked.problems == [], [p.render() for p in checked.problems]


def test_i24_context_prefix_missing_file_has_a_did_you_mean(wf) -> None:
    (wf.root / "docs").mkdir()
    (wf.root / "docs/policy.md").write_text("The policy.", encoding="utf-8")
    checked = wf.check(_action("    context_prefix: '{{ read(\"docs/polcy.md\") }}'\n"))
    problem = checked.one("context_file_not_found")
    assert problem.line == checked.line_of("context_prefix")
    assert problem.hint == "did you mean 'docs/policy.md'?"


@pytest.mark.parametrize(
    "ref", ["/etc/passwd", "../outside.md", "docs/../../outside.md", "link.md", "docs"]
)
def test_i24_context_prefix_refused_paths(wf, ref: str) -> None:
    (wf.root / "docs").mkdir()
    outside = wf.root.parent / "outside.md"
    outside.write_text("secret", encoding="utf-8")
    os.symlink(outside, wf.root / "link.md")
    checked = wf.check(_action(f"    context_prefix: '{{{{ read(\"{ref}\") }}}}'\n"))
    problem = checked.one("context_file_refused")
    assert problem.line == checked.line_of("context_prefix")
    assert checked.workflow is None


def test_i24_context_prefix_sees_no_record(wf) -> None:
    checked = wf.check(_action("    context_prefix: 'About {{ source.text }}'\n"))
    problem = checked.one("undefined_variable")
    assert problem.line == checked.line_of("context_prefix")
    assert "sees no record" in problem.message


def test_i24_context_prefix_syntax_error_is_located(wf) -> None:
    checked = wf.check(_action("    context_prefix: '{{ read( }}'\n"))
    assert checked.one("invalid_template").line == checked.line_of("context_prefix")


def test_i24_cache_unfriendly_prompt_warns_at_the_prompt(wf, caches: None) -> None:
    checked = wf.check(_action("", prompt="Text: {{ source.text }}\\n" + LONG))
    assert checked.workflow is not None  # a warning, not an error
    problem = checked.one("cache_unfriendly_prompt")
    assert problem.severity == "warning"
    assert problem.line == checked.line_of("prompt:")
    assert "context_prefix" in (problem.hint or "")


def test_i24_cache_unfriendly_prompt_quiet_when_friendly_off_or_uncached(
    wf, caches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    friendly = wf.check(_action("", prompt=LONG + "{{ source.text }}"))
    assert "cache_unfriendly_prompt" not in friendly.codes()
    short = wf.check(_action("", prompt="{{ source.text }} and a short tail"))
    assert "cache_unfriendly_prompt" not in short.codes()
    off = wf.check(_action("    cache: off\n", prompt="{{ source.text }}" + LONG))
    assert "cache_unfriendly_prompt" not in off.codes()
    monkeypatch.setattr(
        MockProvider, "spec", dataclasses.replace(MockProvider.spec, cache_minimum=None)
    )
    uncached = wf.check(_action("", prompt="{{ source.text }}" + LONG))
    assert "cache_unfriendly_prompt" not in uncached.codes()


def test_i24_cache_keys_keep_the_config_hash(wf) -> None:
    """The hint changes no answer (decision 0084): the config hash of a workflow that writes
    the defaults, or sets a mode, is the one it had without them."""
    plain = wf.check(_action("")).workflow
    for extra in (
        "    cache: auto\n    cache_ttl: 5m\n",
        "    cache: off\n",
        "    cache_ttl: 1h\n",
    ):
        assert wf.check(_action(extra)).workflow.config_hash == plain.config_hash
    prefixed = wf.check(_action("    context_prefix: 'Fixed.'\n")).workflow
    assert prefixed.config_hash != plain.config_hash  # the template is part of what runs


def test_i24_snapshot_keeps_the_keys(wf) -> None:
    from agac.config.model import Workflow

    workflow = wf.check(
        _action("    cache: on\n    cache_ttl: 1h\n    context_prefix: 'Fixed.'\n")
    ).workflow
    again = Workflow.from_snapshot(workflow.snapshot())
    assert again.action("a") == workflow.action("a")
    assert (
        "cache_mode"
        not in Workflow.from_snapshot(wf.check(_action("")).workflow.snapshot()).snapshot()[
            "actions"
        ][0]
    )


@pytest.fixture
def tools(wf) -> None:
    Path(wf.root / "tools.py").write_text(
        "def echo(inputs, ctx):\n    return inputs\n", encoding="utf-8"
    )
