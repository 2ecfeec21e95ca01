"""vLLM live: a shard's records are sent in prompt order, so those sharing a prompt prefix
reach the server together (its prefix cache still holds the prefix); on a provider that
does not ask for it, records go in the order they were read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import e2e_support
import pytest

from agac import api
from agac.testing import write_project

#: Interleaved: two long shared openings, alternating, as they were read.
TEXTS = [
    "Shipping: the parcel came late and the box was torn.",
    "Quality: the blender is loud.",
    "Shipping: the parcel came on time.",
    "Quality: the blender is great.",
    "Shipping: the courier left it in the rain.",
    "Quality: the lid cracked.",
]


def _project(root: Path, model: str) -> None:
    workflow = "\n".join(
        [
            "name: ordered",
            "input: {path: data/, id_field: id}",
            "defaults:",
            f"  model: {model}",
            "  max_concurrency: 1",
            "  max_tokens: 64",
            "  timeout: 10s",
            "actions:",
            "  - name: ask",
            '    prompt: "{{ source.text }} What went wrong?"',
        ]
    )
    data = [{"id": f"r{i}", "text": t} for i, t in enumerate(TEXTS)]
    chosen = e2e_support.TRANSPORT
    yml = f"providers:\n  vllm: {{transport: {chosen}}}\n  openai: {{transport: {chosen}}}\n"
    write_project(root, workflow + "\n", agac_yml=yml, data={"data/q.jsonl": data})


def _sent(emulator: Any, provider: str) -> list[str]:
    """The user prompts the emulator received from ``provider``, in arrival order."""
    return [
        r["body"]["messages"][-1]["content"].split(" What went wrong?")[0]
        for r in emulator.requests()
        if r["op"] == "chat" and r["provider"] == provider
    ]


@pytest.mark.parametrize("fresh", [False, True])
def test_vllm_sends_records_sharing_a_prefix_together(
    emulator: Any, project: Path, fresh: bool
) -> None:
    _project(project, "vllm/Qwen/Qwen2.5-7B-Instruct")
    if fresh:  # a first run to answer them, then --fresh renders every prompt here again
        assert api.run("ordered", project).exit_code == 0
        emulator.reset_stats()
    result = api.run("ordered", project, fresh=fresh)
    assert result.exit_code == 0
    sent = _sent(emulator, "vllm")
    assert sent == sorted(TEXTS)
    assert [t.split(":")[0] for t in sent] == ["Quality"] * 3 + ["Shipping"] * 3


def test_other_providers_keep_the_read_order(emulator: Any, project: Path) -> None:
    _project(project, "openai/gpt-4o-mini")
    assert api.run("ordered", project).exit_code == 0
    assert _sent(emulator, "openai") == TEXTS
