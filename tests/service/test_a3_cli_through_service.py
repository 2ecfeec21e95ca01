"""A3 with ``identity: login``: ``agac approve|reject|revise`` send the decision to the
service (AGAC_SERVER + AGAC_TOKEN); the service decides for the token's user, with the
same refusals as the browser and the API."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from service_support import Service

from agac import api
from agac.api import identity


def _agac(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    clean.update(env, PYTHONWARNINGS="error")
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a3_cli_decisions_go_through_the_service(service: Service) -> None:
    root = service.ctx.project.root
    first, second = api.approvals_list("replies", root)
    ann = {
        "AGAC_SERVER": service.url,
        "AGAC_TOKEN": identity.create_token(service.store, "ann")["token"],
    }
    bob = {
        "AGAC_SERVER": service.url,
        "AGAC_TOKEN": identity.create_token(service.store, "bob")["token"],
    }
    eve = {
        "AGAC_SERVER": service.url,
        "AGAC_TOKEN": identity.create_token(service.store, "eve")["token"],
    }
    refused = _agac("approve", first["id"], cwd=root, env=bob)
    assert refused.returncode == 2 and "bob is not an approver" in refused.stderr, refused.stderr
    hidden = _agac("approve", first["id"], cwd=root, env=eve)
    assert hidden.returncode == 2 and "no proposal" in hidden.stderr
    bad_token = _agac("approve", first["id"], cwd=root, env={**ann, "AGAC_TOKEN": "agac_nope"})
    assert bad_token.returncode == 2 and "refused AGAC_TOKEN" in bad_token.stderr
    ok = _agac("approve", first["id"], "--json", cwd=root, env=ann)
    assert ok.returncode == 0, ok.stderr
    assert '"decided_by": "ann"' in ok.stdout
    replay = _agac("approve", first["id"], cwd=root, env=ann)
    assert replay.returncode == 2 and "replayed" in replay.stderr
    revised = _agac(
        "revise", second["id"], "--set", "draft.text=Sorry", "--json", cwd=root, env=ann
    )
    assert revised.returncode == 0, revised.stderr
    new_id = __import__("json").loads(revised.stdout)["id"]
    as_flag = _agac("approve", new_id, "--as", "ann", cwd=root, env=ann)
    assert as_flag.returncode == 2 and "AGAC_USER" in as_flag.stderr
    rejected = _agac("reject", new_id, "--reason", "not now", cwd=root, env=ann)
    assert rejected.returncode == 0, rejected.stderr
    done = api.run("replies", root)
    assert done.exit_code == 1 and done.summary["actions"]["send"]["answered"] == 1
    assert done.summary["actions"]["send"]["reasons"] == {"approval_rejected": 1}
