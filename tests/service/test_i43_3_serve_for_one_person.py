"""The newcomer's path: `agac serve` for one person on loopback starts without
`identity: login` — it prints a one-time link and serves nothing without it — and the
approval hints never suggest what the project's identity setting refuses."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from service_support import Browser, free_port, team_project

from agac import api

LOCAL = "groups:\n  leads: [ann]\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGAC_")}
    env["PYTHONWARNINGS"] = "error"
    return env


def _agac(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agac.cli.main", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@contextmanager
def _serving(root: Path, *args: str) -> Iterator[tuple[str, str]]:
    """`agac serve` as a real process: (its base URL, the link it printed)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agac.cli.main", "serve", "--port", str(port), *args],
        cwd=root,
        env=_env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        printed = []
        link = ""
        for line in proc.stderr:
            printed.append(line)
            if "/login?token=" in line:
                link = line.strip()
                break
        assert link, "".join(printed)
        base = f"http://127.0.0.1:{port}"
        assert link.startswith(base + "/login?token=")
        assert "for ann only" in "".join(printed)
        _wait_listening(base)
        yield base, link
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()


def _wait_listening(base: str) -> None:
    for _ in range(600):
        try:
            httpx.get(base + "/static/agac.css", timeout=5)
            return
        except httpx.TransportError:
            time.sleep(0.05)  # a failure guard while uvicorn binds, not a timing assumption
    raise AssertionError("agac serve did not listen")


def test_i43_3_serve_for_one_person_through_a_one_time_link(tmp_path: Path) -> None:
    root = team_project(tmp_path / "solo", agac_yml=LOCAL)
    waiting = api.run("replies", root)
    assert waiting.exit_code == 75
    assert "--as NAME" in "\n".join(waiting.notes)  # a local project decides with --as
    listing = _agac("approvals", "list", cwd=root)
    assert "--as NAME" in listing.stdout, listing.stdout
    with _serving(root, "--as", "ann") as (base, link):
        with httpx.Client(base_url=base, follow_redirects=False, timeout=30) as stranger:
            assert stranger.get("/runs").status_code == 303  # to /login: nothing unauthenticated
            assert stranger.get("/approvals").headers["location"].startswith("/login")
            assert stranger.get("/login").status_code == 403
            assert stranger.get("/login?token=guessed").status_code == 403
            posted = stranger.post(
                "/login",
                data={"username": "ann", "password": "correct horse battery"},
                headers={"Origin": base},
            )
            assert posted.status_code == 403  # no passwords in one-person mode
            assert stranger.get("/api/v1/runs").status_code == 401
        with httpx.Client(base_url=base, follow_redirects=False, timeout=30) as http:
            me = Browser(http, base)
            opened = me.get(link.removeprefix(base))
            assert opened.status_code == 303 and opened.headers["location"] == "/runs"
            runs = me.get("/runs")
            assert runs.status_code == 200 and "ann" in runs.text and "replies" in runs.text
            first = api.approvals_list("replies", root)[0]
            me.get("/approvals")
            ok = me.post(f"/approvals/{first['id']}/approve", {})
            assert ok.status_code == 303, ok.text
        with httpx.Client(base_url=base, follow_redirects=False, timeout=30) as second:
            again = second.get(link.removeprefix(base))
            assert again.status_code == 403 and "works once" in again.text
    decided = api.approvals_list("replies", root, every=True)
    assert [p["decided_by"] for p in decided if p["id"] == first["id"]] == ["ann"]


def test_i43_3_serve_without_login_stays_on_this_machine(tmp_path: Path) -> None:
    root = team_project(tmp_path / "solo", agac_yml=LOCAL)
    refused = _agac(
        "serve", "--host", "0.0.0.0", "--allow-remote", "--behind-proxy", "10.0.0.1",
        "--public-host", "agac.example", cwd=root,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "identity: login" in refused.stderr and "one person" in refused.stderr


def test_i43_3_approval_hints_follow_the_identity_setting(tmp_path: Path) -> None:
    root = team_project(tmp_path / "team")  # identity: login
    waiting = api.run("replies", root)
    assert waiting.exit_code == 75
    notes = "\n".join(waiting.notes)
    assert "--as" not in notes and "AGAC_TOKEN" in notes, notes
    listing = _agac("approvals", "list", cwd=root)
    assert listing.returncode == 0, listing.stderr
    assert "--as" not in listing.stdout and "agac serve" in listing.stdout
    first = api.approvals_list("replies", root)[0]
    assert api.decide_hint(root, first["id"]).startswith(f"`agac approve {first['id']}`")
