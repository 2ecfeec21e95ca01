"""Issue 29, item 15: a rendered prompt is capped. A unit whose rendering is over the
action's ``max_prompt_chars`` — or whose template builds a huge value on the way — fails
``prompt_too_large`` with a message that says so, before anything is sent or stored; the
other units of the run are answered."""

from __future__ import annotations

import json
from pathlib import Path

from agac import api


def _project(tmp_path: Path, prompt: str, extra: str = "") -> Path:
    (tmp_path / "agac.yml").write_text("", encoding="utf-8")
    (tmp_path / "data.jsonl").write_text(
        "\n".join(
            json.dumps({"id": f"r{i}", "n": n}) for i, n in enumerate([3, 100_000_000, 10**10, 5])
        )
        + "\n",
        encoding="utf-8",
    )
    (tmp_path / "wf.yml").write_text(
        "name: wf\ninput: {path: data.jsonl, id_field: id}\nactions:\n"
        f"  - name: a\n    model: mock/m\n    prompt: {json.dumps(prompt)}\n{extra}",
        encoding="utf-8",
    )
    return tmp_path


def _outcomes(root: Path) -> dict[str, tuple[str, str | None, str | None]]:
    out = root / "out.jsonl"
    api.export_action("wf", "a", out, project=root)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return {r["key"]: (r["status"], r["reason"], r.get("detail")) for r in rows}


def test_i29_15_a_prompt_over_the_cap_fails_prompt_too_large_and_the_rest_run(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path, '{{ "a" * source.n }}', "    max_prompt_chars: 1000\n")
    result = api.run("wf", root)
    assert result.state == "partial"
    out = _outcomes(root)
    assert out["r0"][:2] == ("answered", None) and out["r3"][:2] == ("answered", None)
    for key in ("r1", "r2"):
        status, reason, detail = out[key]
        assert (status, reason) == ("failed", "prompt_too_large")
        assert detail and "max_prompt_chars" in detail and "1,000" in detail
    assert result.summary.to_dict()["actions"]["a"]["calls"] == 2  # nothing sent for r1, r2


def test_i29_15_the_default_cap_stops_a_hundred_megabyte_prompt(tmp_path: Path) -> None:
    root = _project(tmp_path, '{{ "a" * source.n }}')
    api.run("wf", root)
    out = _outcomes(root)
    assert out["r1"][1] == "prompt_too_large" and out["r2"][1] == "prompt_too_large"
    assert "8,000,000" in (out["r1"][2] or "")
    assert out["r0"][0] == "answered"


def test_i29_15_a_huge_power_is_refused_before_it_is_computed(tmp_path: Path) -> None:
    root = _project(tmp_path, "{{ 10 ** source.n }}")
    api.run("wf", root)
    out = _outcomes(root)
    assert out["r0"][0] == "answered"
    assert out["r2"][1] == "prompt_too_large" and "power" in (out["r2"][2] or "")
