"""Prompt caching on the command line: ``agac render`` says where a request's static
prefix ends and whether it carries a cache hint; ``agac validate`` warns
``cache_unfriendly_prompt`` at the prompt's line and reports a refused context file at
the ``context_prefix`` line."""

from __future__ import annotations

from pathlib import Path

from cli_support import agac

from agac.testing import write_project

POLICY = "Refunds are granted within thirty days of delivery. " * 100  # ~1,300 tokens
KEY = {"ANTHROPIC_API_KEY": "sk-ant-test"}


def _project(root: Path, action: str) -> Path:
    write_project(
        root,
        "name: wf\ninput: {path: data.jsonl, id_field: id}\nactions:\n"
        "  - name: judge\n    model: anthropic/claude-sonnet-4-5\n" + action,
        data={"data.jsonl": [{"id": "r1", "text": "Broken on arrival."}]},
        files={"docs/policy.md": POLICY},
        workflow_file="wf.yml",
    )
    return root


def test_i24_render_shows_the_static_prefix_and_the_hint(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        "    context_prefix: '{{ read(\"docs/policy.md\") }}'\n"
        "    prompt: 'Decide: {{ source.text }}'\n",
    )
    shown = agac("render", "wf", "--record", "r1", cwd=root, env=KEY)
    assert shown.code == 0, shown
    chars = len(POLICY + "\n\n" + "Decide: ")
    line = next(x for x in shown.out.splitlines() if x.startswith("-- cache:"))
    assert f"the first {chars:,} characters of the prompt" in line
    assert f"~{-(-chars // 4):,} tokens" in line and "hint: cache auto, ttl 5m" in line
    assert "minimum 1,024 tokens" in line
    as_json = agac("render", "wf", "--record", "r1", "--json", cwd=root, env=KEY).json()
    assert as_json[0]["cache"]["static_chars"] == chars and as_json[0]["cache"]["hint"]


def test_i24_render_says_no_hint_under_the_minimum(tmp_path: Path) -> None:
    root = _project(tmp_path, "    prompt: 'Decide: {{ source.text }}'\n")
    line = next(
        x
        for x in agac("render", "wf", "--record", "r1", cwd=root, env=KEY).out.splitlines()
        if x.startswith("-- cache:")
    )
    assert "no hint (cache: auto): under the minimum of 1,024" in line


def test_i24_cache_unfriendly_prompt_in_validate(tmp_path: Path) -> None:
    root = _project(tmp_path, f"    prompt: 'Decide: {{{{ source.text }}}} {POLICY}'\n")
    checked = agac("validate", "wf", cwd=root, env=KEY)
    assert checked.code == 0, checked  # a warning only
    assert "wf.yml:6: warning:" in checked.out + checked.err
    assert "[cache_unfriendly_prompt]" in checked.out + checked.err


def test_i24_context_file_refused_in_validate(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        "    context_prefix: '{{ read(\"../secret.md\") }}'\n"
        "    prompt: 'Decide: {{ source.text }}'\n",
    )
    checked = agac("validate", "wf", cwd=root, env=KEY)
    assert checked.code == 2
    assert "wf.yml:6: error:" in checked.out + checked.err
    assert "[context_file_refused]" in checked.out + checked.err
