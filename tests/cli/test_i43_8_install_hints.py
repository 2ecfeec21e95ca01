"""The newcomer's path, item 8 (code half): no message tells to install an agac package
that no index has (agac is installed from a clone)."""

from __future__ import annotations

import re
from pathlib import Path

from agac.installing import install_hint

SRC = Path(__file__).resolve().parents[2] / "src" / "agac"

WORKFLOW = """\
name: hidden
input: {path: data/, id_field: id}
defaults: {model: mock/m}
actions:
  - name: ask
    prompt: "Say {{ source.text }}"
"""


def _no_project(tmp_path: Path) -> Path:
    here = tmp_path / "somewhere"
    (here / "deep" / "down").mkdir(parents=True)
    (here / "deep" / "down" / "wf.yml").write_text(WORKFLOW, encoding="utf-8")
    (here / "data").mkdir()
    (here / "data" / "a.jsonl").write_text('{"id": "a", "text": "hi"}\n', encoding="utf-8")
    assert not any((p / "agac.yml").exists() for p in (here, *here.parents))
    return here


def test_i43_8_install_hints_name_a_clone_never_a_published_package() -> None:
    assert install_hint("openai").startswith("pip install -e '.[openai]'")
    bad = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"pip install (-U )?['\"]?agac\b", line)
    ]
    assert not bad, bad
