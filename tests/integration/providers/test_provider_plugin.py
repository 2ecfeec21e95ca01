"""A provider spec is the whole seam (docs/providers.md, Provider specs): a third-party
package registered under the ``agac.providers`` entry point declares its spec the same way
as the built-in adapters, and agac validates and runs a workflow on it.

The plugin is a real installed distribution: a package and its ``.dist-info`` (METADATA,
``entry_points.txt``) on a temporary path put on ``PYTHONPATH`` of a real ``agac``
process, found by ``importlib.metadata`` as pip would leave it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from agac.testing import write_project

PLUGIN = '''
"""agac-echo: answers each prompt with its own words, loud or not."""

from agac.errors import UnsupportedError
from agac.providers.adapter import ProviderBase
from agac.providers.base import Response, Usage
from agac.providers.options import Option
from agac.providers.spec import ProviderSpec


class EchoProvider(ProviderBase):
    spec = ProviderSpec(
        name="echo",
        extra="echo",
        options=(Option("prefix", "choice", "what each answer starts with",
                        choices=("echo", "said")),),
        request_options=(Option("volume", "choice", "how loud the echo is",
                                choices=("quiet", "loud")),),
    )

    async def complete(self, request):
        text = request.chat[-1].content
        if dict(request.options).get("volume") == "loud":
            text = text.upper()
        prefix = self.settings.options.get("prefix", "echo")
        return Response(text=f"{prefix}: {text}", model=request.model,
                        usage=Usage(input_tokens=len(text), output_tokens=len(text)))

    async def submit_batch(self, requests, key):
        raise UnsupportedError("echo has no batch API")

    poll_batch = batch_results = billed_work = cancel_batch = find_batch = submit_batch
'''

WORKFLOW = """
name: wf
input: {path: data/}
actions:
  - name: shout
    model: echo/parrot-1
    prompt: "{{ source.text }}"
    provider_options: {volume: loud}
  - name: whisper
    model: echo/parrot-1
    prompt: "{{ source.text }}"
"""


def _install(site: Path) -> None:
    """The ``agac-echo`` distribution, as pip installs it into ``site``."""
    (site / "agac_echo").mkdir(parents=True)
    (site / "agac_echo" / "__init__.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    info = site / "agac_echo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agac-echo\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[agac.providers]\necho = agac_echo:EchoProvider\n", encoding="utf-8"
    )
    (info / "RECORD").write_text("", encoding="utf-8")


def _agac(root: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    paths = [str(site), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_plugin_provider_declares_its_spec_and_runs_a_workflow(tmp_path: Path) -> None:
    site, root = tmp_path / "site", tmp_path / "project"
    _install(site)
    write_project(
        root,
        WORKFLOW,
        data={"data/a.jsonl": [{"text": "hello"}, {"text": "again"}]},
        agac_yml="providers:\n  echo: {prefix: said}\n",
    )

    checked = _agac(root, site, "validate", "wf", "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    ran = _agac(root, site, "run", "wf", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for action, said in (
        ("shout", ["said: HELLO", "said: AGAIN"]),
        ("whisper", ["said: hello", "said: again"]),
    ):
        exported = _agac(root, site, "export", "wf", "--action", action)
        assert exported.returncode == 0, exported.stderr
        rows = [json.loads(line) for line in exported.stdout.splitlines()]
        assert sorted(r["output"]["text"] for r in rows) == sorted(said)


def test_a_plugin_is_judged_by_its_spec_at_validate(tmp_path: Path) -> None:
    """Its ``providers:`` options and an action's ``provider_options:`` are checked against
    the spec it declares: ``invalid_provider_option`` naming the key, ``unknown_key`` with a
    "did you mean"."""
    site, root = tmp_path / "site", tmp_path / "project"
    _install(site)
    bad = WORKFLOW.replace("{volume: loud}", "{volume: deafening, volum: loud}")
    write_project(
        root,
        bad,
        data={"data/a.jsonl": [{"text": "hello"}]},
        agac_yml="providers:\n  echo: {prefix: shouted}\n",
    )
    checked = _agac(root, site, "validate", "wf", "--json")
    assert checked.returncode != 0
    [problem] = json.loads(checked.stdout)["errors"]
    assert (problem["code"], problem["path"]) == (
        "invalid_provider_option",
        "providers.echo.prefix",
    )

    (root / "agac.yml").write_text("providers:\n  echo: {prefix: said}\n", encoding="utf-8")
    checked = _agac(root, site, "validate", "wf", "--json")
    assert checked.returncode != 0
    problems = json.loads(checked.stdout)["errors"]
    assert sorted((p["code"], p["path"], p["hint"]) for p in problems) == [
        ("invalid_provider_option", "actions[0].provider_options.volume", "how loud the echo is"),
        ("unknown_key", "actions[0].provider_options.volum", "did you mean 'volume'?"),
    ]


def test_a_plugin_without_a_spec_is_refused_by_name(tmp_path: Path) -> None:
    site, root = tmp_path / "site", tmp_path / "project"
    _install(site)
    module = site / "agac_echo" / "__init__.py"
    module.write_text(
        module.read_text(encoding="utf-8").replace('name="echo"', 'name="ekko"'), encoding="utf-8"
    )
    write_project(root, WORKFLOW, data={"data/a.jsonl": [{"text": "hello"}]})
    checked = _agac(root, site, "validate", "wf", "--json")
    assert checked.returncode != 0
    problems = json.loads(checked.stdout)["errors"]
    assert {p["code"] for p in problems} == {"invalid_provider"}
    assert "declares no spec named 'echo'" in problems[0]["message"]
