"""T6 in a real browser: headless Chromium (Debian's package) driven by Playwright signs in,
watches a running workflow's bars move (Server-Sent Events), opens the approval queue,
approves the proposal, and sees the run continue and end. No console error — in
particular no Content-Security-Policy violation — on any page.

The browser is /usr/bin/chromium (``apt-get install -y chromium chromium-driver``; .ci/run
installs it when missing); Playwright never downloads one. Without it the test skips —
except in CI (``CI`` set), where it fails. A screenshot of the run page is saved under
the test's tmp dir (and copied to ``$AGAC_TEST_SCREENSHOT`` when set, which is how
docs/run-page.png is made).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from service_support import PASSWORD, TOOLS, running_service, team_project

from agac import api

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOT_COPY = os.environ.get("AGAC_TEST_SCREENSHOT")  # read before the env is isolated

WORKFLOW = """\
name: replies
input: {path: data/, id_field: id}
defaults: {model: mock/m}
actions:
  - name: draft
    prompt: "Draft a reply to: {{ source.text }}"
    max_concurrency: 4
    retry: {max_attempts: 1}
  - name: send
    kind: tool
    dependencies: [draft]
    when: "source.id == 'r0007'"
    function: tools.mail:send
    approval: {approvers: [leads], expires_in: 24h}
"""


def _chromium() -> str:
    if not Path(CHROMIUM).exists():
        message = (
            f"{CHROMIUM} is missing: apt-get update && apt-get install -y chromium chromium-driver"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


def _answered(page: Any) -> float:
    """The width of the ``draft`` action's answered segment (0..100), as drawn now."""
    width = page.evaluate("""() => {
        const row = [...document.querySelectorAll('#bars tbody tr')]
            .find(r => r.cells[0].textContent.trim() === 'draft');
        const seg = row && row.querySelector('rect.answered');
        return seg ? Number(seg.getAttribute('width')) : 0;
    }""")
    return float(width)


def test_t6_a_person_watches_a_run_move_approves_and_sees_it_end(tmp_path: Path) -> None:
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    root = team_project(
        tmp_path / "team",
        workflow=WORKFLOW,
        rows=[{"id": f"r{i:04d}", "text": f"message {i}"} for i in range(240)],
    )
    # slow enough to watch; a few deterministic failures (the failures panel); priced
    (root / "agac.yml").write_text(
        "identity: login\nproviders:\n  mock: {latency_ms: 60, fail_rate: 0.04}\n"
        "prices:\n  mock/m: {input: 2.5, output: 10.0}\n",
        encoding="utf-8",
    )
    (root / "tools" / "mail.py").write_text(TOOLS, encoding="utf-8")
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(api.run("replies", root)))
    with running_service(root) as service, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        errors: list[str] = []
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{service.url}/runs")
            assert page.url.startswith(f"{service.url}/login")
            page.fill("input[name=username]", "ann")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{service.url}/runs")

            runner.start()
            deadline = time.monotonic() + 30
            while not service.store.list_runs(limit=1):
                assert time.monotonic() < deadline, "the run was never admitted"
                time.sleep(0.05)
            run_id = service.store.list_runs(limit=1)[0].id
            page.goto(f"{service.url}/runs")
            page.click(f"#run-{run_id} a")
            page.wait_for_url(f"{service.url}/runs/{run_id}")
            page.wait_for_selector(".run[data-live-state=open]")

            # the bars move as progress events arrive, without reloading the page
            seen = [_answered(page)]
            while runner.is_alive() and len(set(seen)) < 4 and time.monotonic() < deadline + 30:
                page.wait_for_timeout(250)
                seen.append(_answered(page))
            moved = sorted(set(seen))
            assert len(moved) >= 3, f"the bars did not move: {seen}"
            assert seen == sorted(seen), "the bars went backwards"
            assert page.evaluate(
                "() => document.querySelector('.run').dataset.liveUpdates"
            ) not in (None, "0")
            page.screenshot(path=str(tmp_path / "run-moving.png"), full_page=True)

            runner.join(60)
            assert results and results[0].exit_code == 75, results  # waits for a person
            page.wait_for_selector("#headline .state-awaiting_approval", timeout=15_000)
            page.click("#headline a[href='/approvals']")
            page.wait_for_url(f"{service.url}/approvals")
            proposal = page.locator("article.proposal")
            assert proposal.count() == 1
            assert '"id": "r0007"' in proposal.locator("pre.arguments").inner_text()
            proposal.locator("button.approve").click()
            page.wait_for_url(f"{service.url}/approvals?done=*")
            assert "approved" in page.locator("p.notice").inner_text()

            page.goto(f"{service.url}/runs/{run_id}")
            page.wait_for_selector(".run[data-live-state=open]")
            again = threading.Thread(target=lambda: results.append(api.run("replies", root)))
            again.start()
            page.wait_for_selector("#headline .state-partial", timeout=30_000)
            again.join(30)
            summary = results[-1].summary
            assert summary["state"] == "partial" and summary["actions"]["send"]["answered"] == 1
            failed = summary["actions"]["draft"]["failed"]
            assert failed > 0 and page.locator("#failures td.num").first.inner_text() == str(failed)
            page.wait_for_selector(".run[data-live-state=ended]", timeout=10_000)
            assert 90.0 < _answered(page) < 100.0
            shot = tmp_path / "run-page.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            if SCREENSHOT_COPY:
                shutil.copyfile(shot, SCREENSHOT_COPY)
        finally:
            browser.close()
        if runner.is_alive():
            runner.join(60)
        assert errors == [], errors
