"""Issue 35 item 9: an open run whose ``context_prefix`` file was deleted is continued with
the text it was admitted with; only ``--new`` needs the file (and says it is missing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_helpers import rows, run

from agac import api
from agac.config.project import find_project
from agac.engine.lifecycle.admission import admit_run
from agac.engine.lifecycle.options import RunOptions
from agac.errors import ConfigError
from agac.store.repository import Store
from agac.testing import write_project

POLICY = "Refunds within 30 days."

WF = """
name: wf
input: {path: data/, id_field: id}
defaults: {model: mock/m1, max_concurrency: 4}
actions:
  - name: judge
    context_prefix: '{{ read("docs/policy.md") }}'
    prompt: "Judge this request by the policy above.\\n{{ source.text }}"
"""


def test_i35_9_an_open_run_continues_after_its_context_file_is_deleted(project: Path) -> None:
    write_project(project, WF, data={"data/a.jsonl": rows(3)}, files={"docs/policy.md": POLICY})
    proj = find_project(project)
    store = Store(os.environ["AGAC_STORE"])
    try:
        # An admitted run that never executed stands for a run interrupted mid-way.
        admitted = admit_run(proj, store, api.load_workflow("wf", proj), RunOptions())
        (project / "docs/policy.md").unlink()
        continued = run(project).summary
        assert continued["run_id"] == admitted.id
        assert continued["state"] == "succeeded"
        assert continued["actions"]["judge"]["calls"] == 3
        with pytest.raises(ConfigError) as refused:
            run(project, new=True)
        assert [p.code for p in refused.value.problems] == ["context_file_not_found"]
        assert "docs/policy.md" in str(refused.value)
    finally:
        store.close()
