"""Benchmark of approvals (A1-A3) on the mock provider, SQLite store.

``python bench/approvals.py [N]`` (default 1,000 records) writes a fresh project under
``bench/out/approvals/``: an llm action ``draft`` and a tool ``send`` (an idempotent
effect) with ``approval:``. It measures, each as a real ``agac`` child process or a
library call in this process:

- ``baseline``: the same workflow without ``approval:``, one ``agac run`` to the end;
- ``propose``: ``agac run`` until it parks (N proposals stored and signed, exit 75);
- ``decide``: ``agac.api.approve`` of every proposal, in this process (decisions/s);
- ``act``: the next ``agac run`` acting on the N approvals (exit 0).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "approvals"

WF = """
name: ap
input: {path: data/, id_field: id}
defaults: {model: mock/m, max_concurrency: 64}
actions:
  - name: draft
    prompt: "Draft a reply to {{ source.text }}"
  - name: send
    kind: tool
    dependencies: [draft]
    function: tools.mail:send
    effect: {idempotent: true}
APPROVAL
"""

TOOLS = "def send(inputs, ctx):\n    return {'sent': inputs['source']['id']}\n"


def make(root: Path, n: int, approval: bool) -> None:
    shutil.rmtree(root, ignore_errors=True)
    (root / "data").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "agac.yml").write_text("groups:\n  leads: [ann]\n")
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "mail.py").write_text(TOOLS)
    line = "    approval: {approvers: [leads]}" if approval else ""
    (root / "ap.yml").write_text(WF.replace("APPROVAL", line))
    with (root / "data" / "a.jsonl").open("w") as out:
        for i in range(n):
            out.write(json.dumps({"id": f"r{i:06d}", "text": f"message {i}"}) + "\n")


def agac_run(root: Path) -> tuple[int, float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "agac.cli.main", "run", "ap", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, wall, cpu


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    load = os.getloadavg()[0]
    base = OUT / "baseline"
    make(base, n, approval=False)
    code, wall, cpu = agac_run(base)
    print(f"baseline  {n} records, no approval: exit {code}, wall {wall:.2f} s, cpu {cpu:.2f} s")
    root = OUT / "with_approval"
    make(root, n, approval=True)
    code, wall, cpu = agac_run(root)
    print(f"propose   {n} proposals: exit {code}, wall {wall:.2f} s, cpu {cpu:.2f} s")
    from agac import api

    os.chdir(root)
    ids = [p["id"] for p in api.approvals_list("ap", root)]
    start = time.perf_counter()
    for pid in ids:
        api.approve(pid, root, who="ann")
    took = time.perf_counter() - start
    print(f"decide    {len(ids)} approvals: {took:.2f} s = {len(ids) / took:.0f} decisions/s")
    code, wall, cpu = agac_run(root)
    print(f"act       {n} approved units: exit {code}, wall {wall:.2f} s, cpu {cpu:.2f} s")
    print(f"load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
