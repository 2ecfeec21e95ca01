"""No module of agac imports a provider SDK's private module (issue 12 item 1).

A private module (``anthropic._data``, ``openai._models``, …) can move in any SDK
release and break a clean install; adapters use public APIs or turn the feature off.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import agac

SDK_ROOTS = ("anthropic", "openai", "groq", "ollama", "google", "httpx", "httpx2", "genai_prices")
SRC = Path(agac.__file__).parent
# A dotted name under an SDK with a private part: anthropic._data, google.genai._api_client
ROOTS = "|".join(re.escape(r) for r in SDK_ROOTS)
PRIVATE = re.compile(rf"^(?:{ROOTS})(?:\.[A-Za-z0-9_]+)*\._[A-Za-z]")


def _private_imports(path: Path, root: Path = SRC) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]  # importlib.import_module("anthropic._data…")
        found += [f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names if PRIVATE.match(n)]
    return found


def test_no_module_imports_an_sdk_private_module() -> None:
    found = [hit for path in sorted(SRC.rglob("*.py")) for hit in _private_imports(path)]
    assert found == []


def test_private_import_check_sees_the_shapes_it_guards_against(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import anthropic._data\nfrom openai._models import X\n"
        "import importlib\nm = 'anthropic._data.deprecated_models'\n"
        "from openai.types import Y\nimport anthropic\n"
    )
    hits = _private_imports(sample, tmp_path)
    assert [h.split(": ")[1] for h in hits] == [
        "anthropic._data",
        "openai._models",
        "openai._models.X",
        "anthropic._data.deprecated_models",
    ]
