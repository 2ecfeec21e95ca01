"""The quality loop: reviewing answers in a real browser — headless Chromium (Debian's
/usr/bin/chromium, driven by Playwright, which never downloads one) signs in, goes from a
run to its answers, filters them by failed check and by status, searches, pages, opens a
record (its request, answer, checks and cost) and comes back; then the pilot's page and
the compare page. No console error — no Content-Security-Policy violation — on any page.

Without /usr/bin/chromium the test skips, except in CI (``CI`` set) where it fails. The
screenshots are saved under the test's tmp dir, and into ``$AGAC_TEST_SCREENSHOTS`` (a
folder) when set: that is how docs/img/review-*.png are made."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from review_support import ZEBRA, reviewed_project
from service_support import PASSWORD, running_service

from agac import api

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = os.environ.get("AGAC_TEST_SCREENSHOTS")  # read before the env is isolated


def _chromium() -> str:
    if not Path(CHROMIUM).exists():
        message = (
            f"{CHROMIUM} is missing: apt-get update && apt-get install -y chromium chromium-driver"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


def _shot(page: Any, tmp_path: Path, name: str, *, whole: bool = True) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=whole)
    assert path.stat().st_size > 10_000
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(SCREENSHOTS) / path.name)


def _keys(page: Any) -> list[str]:
    return [str(k).strip() for k in page.locator("#answers td.key a").all_inner_texts()]


def test_i38_a_person_filters_the_answers_and_opens_a_record(tmp_path: Path) -> None:
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    done = reviewed_project(tmp_path / "team")
    units = list(api.export_rows(done.full, "classify", done.root))
    flagged = [u["key"] for u in units if (u.get("checks") or {}).get("not_neg") is False]
    failed = [u["key"] for u in units if u["status"] == "failed"]
    assert flagged and failed
    with running_service(done.root) as service, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        errors: list[str] = []
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            base = service.url
            page.goto(f"{base}/runs/{done.full}")
            page.fill("input[name=username]", "bob")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/runs/{done.full}")

            page.click("#answers-link")
            page.wait_for_url(f"{base}/runs/{done.full}/answers")
            assert _keys(page) == [u["key"] for u in units][:50]
            assert page.locator("a[rel=next]").count() == 1  # 60 units: two pages
            _shot(page, tmp_path, "review-answers")

            page.select_option("select[name=check]", "not_neg")
            page.click("#answer-filters button[type=submit]")
            page.wait_for_url(re.compile(r".*check=not_neg.*"))
            assert _keys(page) == flagged
            assert page.locator("#answers .verdict.fail").count() == len(flagged)
            _shot(page, tmp_path, "review-failed-check")

            page.select_option("select[name=check]", "")
            page.select_option("select[name=status]", "failed")
            page.click("#answer-filters button[type=submit]")
            page.wait_for_url(re.compile(r".*status=failed.*"))
            assert _keys(page) == failed

            page.select_option("select[name=status]", "")
            page.fill("input[name=q]", "zebra")
            page.press("input[name=q]", "Enter")
            page.wait_for_url(re.compile(r".*q=zebra.*"))
            assert _keys(page) == [ZEBRA]

            page.click(f"#answers td.key a:text-is('{ZEBRA}')")
            page.wait_for_url(f"{base}/records/{done.full}/{ZEBRA}")
            assert "a zebra crossed" in page.locator("main").inner_text()
            page.click("summary:text-is('Request')")
            assert "a zebra crossed" in page.locator("details pre").first.inner_text()
            assert page.locator(".checks .verdict").count() == 1
            _shot(page, tmp_path, "review-record")
            page.go_back()
            page.wait_for_url(re.compile(r".*q=zebra.*"))
            assert page.input_value("input[name=q]") == "zebra"

            page.goto(f"{base}/runs/{done.pilot}/pilot")
            page.wait_for_selector("#pilot-projection")
            _shot(page, tmp_path, "review-pilot")
            page.click("#review-answers")
            page.wait_for_url(f"{base}/runs/{done.pilot}/answers")
            assert len(_keys(page)) == 20

            page.goto(f"{base}/compare?a={done.full}")
            page.fill("input[name=b]", done.other)
            page.click("#compare-pick button[type=submit]")
            page.wait_for_selector("#compare-runs")
            assert page.locator(".changed-count").inner_text().strip() != "0"
            _shot(page, tmp_path, "review-compare", whole=False)
        finally:
            browser.close()
    assert errors == [], errors
