"""The quality loop: looking at answers where people look — a run's answers as a table in the
service (filtered by status, reason and failed check, searched, paged on the server), each
record one click away, downloads as CSV and parquet, a pilot's page and a compare page;
all behind the service's sign-in and tenants. Expected rows come from ``agac export``'s
rows (``api.export_rows``), another path through the library."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from review_support import ZEBRA, Reviewed, reviewed_project
from service_support import Browser, Service, running_service

from agac import api

KEY = re.compile(r'<td class="key"><a href="/records/[0-9a-z]+/([^"]+)">')


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Reviewed:
    return reviewed_project(tmp_path_factory.mktemp("review") / "team")


@pytest.fixture(scope="module")
def service(reviewed: Reviewed) -> Iterator[Service]:
    with running_service(reviewed.root) as svc:
        yield svc


@pytest.fixture(scope="module")
def bob(service: Service) -> Browser:
    return service.browser("bob")


def _units(reviewed: Reviewed, run_id: str) -> list[dict[str, Any]]:
    return list(api.export_rows(run_id, "classify", reviewed.root))


def _keys(browser: Browser, path: str) -> list[str]:
    """The keys the table lists over every page, following its "next" links."""
    keys: list[str] = []
    while path:
        page = browser.get(path)
        assert page.status_code == 200, page.text
        keys += KEY.findall(page.text)
        found = re.search(r'<a rel="next" href="([^"]+)">', page.text)
        path = found.group(1).replace("&amp;", "&") if found else ""
    return keys


def test_i38_answers_table_pages_every_unit_in_record_order(
    reviewed: Reviewed, bob: Browser, service: Service
) -> None:
    expected = [u["key"] for u in _units(reviewed, reviewed.full)]
    page = bob.get(f"/runs/{reviewed.full}/answers?per_page=25")
    assert page.status_code == 200
    assert f"{len(expected)} units of classify; page 1 of 3" in page.text
    for part in ("<th>label</th>", "<th>score</th>", "<th>Checks</th>", 'id="download-csv"'):
        assert part in page.text, part
    assert _keys(bob, f"/runs/{reviewed.full}/answers?per_page=25") == expected
    whole = bob.get(f"/runs/{reviewed.full}/answers?per_page=500").text
    reused = [
        o.unit_key
        for o in service.store.iter_action_outcomes(reviewed.full, "classify")
        if o.origin == "reused"
    ]
    assert reused and whole.count('<span class="hint">reused</span>') == len(reused)


@pytest.mark.parametrize("field", ["status", "reason", "check"])
def test_i38_answers_table_filters(reviewed: Reviewed, bob: Browser, field: str) -> None:
    units = _units(reviewed, reviewed.full)
    reason = next(u["reason"] for u in units if u["reason"])
    value, wanted = {
        "status": ("failed", lambda u: u["status"] == "failed"),
        "reason": (reason, lambda u: u["reason"] == reason),
        "check": ("not_neg", lambda u: (u.get("checks") or {}).get("not_neg") is False),
    }[field]
    expected = [u["key"] for u in units if wanted(u)]
    assert 0 < len(expected) < len(units), f"the fixture has no mix of {field}"
    got = _keys(bob, f"/runs/{reviewed.full}/answers?{field}={value}&per_page=7")
    assert got == expected


def test_i38_a_run_pages_failures_lead_to_their_answers(reviewed: Reviewed, bob: Browser) -> None:
    run = bob.get(f"/runs/{reviewed.full}").text
    links = re.findall(r'<td class="num"><a href="(/runs/[0-9a-z]+/answers\?[^"]+)">(\d+)</a>', run)
    assert links, run
    for link, count in links:
        assert len(_keys(bob, link.replace("&amp;", "&") + "&per_page=500")) == int(count)
    page = bob.get(f"/runs/{reviewed.full}/answers?per_page=200").text
    assert '<option value="200" selected>' in page and "page 1 of 1" in page


def test_i38_answers_table_searches_answers_records_and_keys(
    reviewed: Reviewed, bob: Browser
) -> None:
    run = reviewed.full
    assert _keys(bob, f"/runs/{run}/answers?q=ZEBRA") == [ZEBRA]  # the record's text
    assert _keys(bob, f"/runs/{run}/answers?q=r0017") == ["r0017"]
    neutral = [
        u["key"] for u in _units(reviewed, run) if (u["output"] or {}).get("label") == "neutral"
    ]
    assert neutral and _keys(bob, f"/runs/{run}/answers?q=neutral") == neutral
    both = _keys(bob, f"/runs/{run}/answers?q=neutral&status=failed")
    assert both == []  # a failed unit has no answer to say neutral
    none = bob.get(f"/runs/{run}/answers?q=%25%25no-such_text")
    assert "No unit matches." in none.text and "0 units" in none.text


def test_i38_answers_table_refuses_a_bad_filter_and_unknown_action(
    reviewed: Reviewed, bob: Browser
) -> None:
    run = reviewed.full
    assert bob.get(f"/runs/{run}/answers?status=lost").status_code == 422
    bad = bob.get(f"/runs/{run}/answers?action=nope")
    assert bad.status_code == 422 and "actions: classify" in bad.text
    assert bob.get(f"/runs/{run}/answers?per_page=100000").status_code == 422


def test_i38_a_record_is_one_click_from_the_table(reviewed: Reviewed, bob: Browser) -> None:
    table = bob.get(f"/runs/{reviewed.full}/answers?check=not_neg").text
    piloted = {u["key"] for u in _units(reviewed, reviewed.pilot)}
    key = next(k for k in KEY.findall(table) if k not in piloted)  # asked by this run
    record = bob.get(f"/records/{reviewed.full}/{key}")
    assert record.status_code == 200
    for part in ("Request", "Output", "not_neg failed", "mock/m", f"/runs/{reviewed.full}/answers"):
        assert part in record.text, part


def test_i38_answers_download_csv_keeps_the_filters(reviewed: Reviewed, bob: Browser) -> None:
    units = _units(reviewed, reviewed.full)
    got = bob.get(f"/runs/{reviewed.full}/answers.csv?status=answered")
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/csv")
    assert "attachment" in got.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(got.text)))
    answered = [u for u in units if u["status"] == "answered"]
    assert [r["key"] for r in rows] == [u["key"] for u in answered]
    assert list(rows[0]) == [
        "key",
        "classify.label",
        "classify.score",
        "classify#status",
        "classify#reason",
        "classify#detail",
        "classify.check.not_neg",
        "classify#cost_usd",
    ]
    by_key = {u["key"]: u for u in answered}
    piloted = {u["key"] for u in _units(reviewed, reviewed.pilot)}
    for r in rows:
        assert r["classify.label"] == by_key[r["key"]]["output"]["label"]
        assert r["classify.check.not_neg"] == str(by_key[r["key"]]["checks"]["not_neg"]).lower()
        # the pilot paid for its answers; the full run reused them at no cost
        assert (float(r["classify#cost_usd"]) > 0) == (r["key"] not in piloted)


def test_i38_answers_download_parquet_is_typed(reviewed: Reviewed, bob: Browser) -> None:
    units = _units(reviewed, reviewed.full)
    got = bob.get(f"/runs/{reviewed.full}/answers.parquet")
    assert got.status_code == 200
    table = pq.read_table(io.BytesIO(got.content))
    assert table.num_rows == len(units)
    types = {f.name: str(f.type) for f in table.schema}
    assert types["classify.score"] == "int64" and types["classify.check.not_neg"] == "bool"
    assert types["classify#cost_usd"] == "double"
    failed = [r for r in table.to_pylist() if r["classify#status"] == "failed"]
    assert failed and all(r["classify.label"] is None and r["classify#reason"] for r in failed)
    assert bob.get(f"/runs/{reviewed.full}/answers.xlsx").status_code == 404


def test_i38_pilot_page_shows_sample_checks_cost_and_projection(
    reviewed: Reviewed, bob: Browser
) -> None:
    report = bob.get(f"/runs/{reviewed.pilot}/pilot")
    assert report.status_code == 200, report.text
    text = report.text
    for part in (
        "20 of 60 records, seed 3",
        'id="pilot-checks"',
        "not_neg",
        'id="pilot-projection"',
        "Projected for all 60 records",
        f'href="/runs/{reviewed.pilot}/answers"',
    ):
        assert part in text, part
    assert "batch" in text and "online" in text and "not sold for these models" in text
    assert len(_keys(bob, f"/runs/{reviewed.pilot}/answers")) == 20
    assert 'id="pilot-link"' in bob.get(f"/runs/{reviewed.pilot}").text
    assert bob.get(f"/runs/{reviewed.full}/pilot").status_code == 422  # not a pilot


def test_i38_pilot_page_without_the_input_says_why(tmp_path: Path) -> None:
    done = reviewed_project(tmp_path / "team")
    with running_service(done.root) as svc:
        (done.root / "data" / "a.jsonl").write_text('{"id": "x", "text": "new"}\n', "utf-8")
        text = svc.browser("ann").get(f"/runs/{done.pilot}/pilot").text
    assert "the input changed since the pilot drew its sample" in text
    assert "No projection" in text and "20 of 20 records" in text


def test_i38_compare_page(reviewed: Reviewed, bob: Browser) -> None:
    doc = api.compare(reviewed.full, reviewed.other, reviewed.root, limit=50)
    act = doc["actions"]["classify"]
    page = bob.get(f"/compare?a={reviewed.full}&b={reviewed.other}")
    assert page.status_code == 200
    text = page.text
    assert f'<strong class="changed-count">{act["changed_count"]}</strong> rows differ' in text
    for field, g in act["agreement"].items():
        assert f"<td>{field}</td>" in text and f"{100 * g['rate']:.1f} %" in text
    assert "Agreement per field" in text and "label: values side by side" in text
    assert "Numbers (B − A)" in text and 'id="judge"' in text
    shown = re.findall(r"<tr><td>(r\d{4})</td>", text)
    assert shown == [row["key"] for row in act["changed"]] and shown
    assert doc["runs"]["a"]["cost_usd"] > 0
    picker = bob.get(f"/compare?a={reviewed.full}")
    assert picker.status_code == 200 and 'id="compare-pick"' in picker.text
    assert 'id="compare-runs"' not in picker.text


def test_i38_compare_page_exports_every_changed_row(reviewed: Reviewed, bob: Browser) -> None:
    out = reviewed.root / "changed.csv"
    doc = api.compare(reviewed.full, reviewed.other, reviewed.root, out=out)
    page = bob.get(f"/compare?a={reviewed.full}&b={reviewed.other}").text
    link = re.search(r'<a class="download-changed" href="([^"]+)">', page)
    assert link, page
    got = bob.get(link.group(1).replace("&amp;", "&"))
    assert got.status_code == 200 and "attachment" in got.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert len(rows) == doc["written"] == doc["actions"]["classify"]["changed_count"] > 50
    with out.open(encoding="utf-8", newline="") as fh:
        expected = list(csv.DictReader(fh))
    assert [(r["key"], r["a.status"], r["b.status"], r["fields"]) for r in rows] == [
        (r["key"], r["a.status"], r["b.status"], r["fields"]) for r in expected
    ]
    same = bob.get(f"/compare.csv?a={reviewed.full}&b={reviewed.full}")
    assert same.status_code == 422 and "the same run" in same.text


def test_i38_compare_page_asks_a_pairwise_judge_once(reviewed: Reviewed, bob: Browser) -> None:
    form = {"a": reviewed.full, "b": reviewed.other, "judge": "mock/m"}
    bob.get(f"/compare?a={reviewed.full}&b={reviewed.other}")  # the page's CSRF token
    assert bob.post("/compare", form, csrf=False).status_code == 403
    first = bob.post("/compare", form)
    assert first.status_code == 200
    rate = re.search(r"B's win rate ([0-9.]+ %)", first.text)
    assert rate, first.text
    ledger = _pairwise_calls(bob, reviewed)
    assert ledger
    again = bob.post("/compare", form)
    assert f"B's win rate {rate.group(1)}" in again.text
    # verdicts are stored: none is asked twice (a call the mock failed is asked again)
    assert _pairwise_calls(bob, reviewed) == ledger


def _pairwise_calls(bob: Browser, reviewed: Reviewed) -> list[int]:
    from agac.config.project import find_project, store_url
    from agac.store.repository import Store

    store = Store(store_url(find_project(reviewed.root)))
    try:
        calls = store.run_usage(reviewed.other)
        return [u.id for u in calls if u.origin == "pairwise" and u.status == "ok"]
    finally:
        store.close()


def test_i38_review_pages_are_behind_sign_in_and_tenants(
    reviewed: Reviewed, service: Service
) -> None:
    paths = [
        f"/runs/{reviewed.full}/answers",
        f"/runs/{reviewed.full}/answers.csv",
        f"/runs/{reviewed.full}/answers.parquet",
        f"/runs/{reviewed.pilot}/pilot",
        f"/compare?a={reviewed.full}&b={reviewed.other}",
        f"/compare.csv?a={reviewed.full}&b={reviewed.other}",
    ]
    nobody = service.browser()
    for path in paths:
        r = nobody.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path
    eve = service.browser("eve")  # another tenant: none of these runs exist for her
    for path in paths:
        r = eve.get(path)
        assert r.status_code == 404, path
        assert reviewed.full not in r.text or "no run" in r.text
    eve.get("/runs")
    judged = eve.post("/compare", {"a": reviewed.full, "b": reviewed.other, "judge": "mock/m"})
    assert judged.status_code == 404
    token = service.api("bob")
    by_token = token.get(f"/runs/{reviewed.full}/answers")  # pages take a session, not a token
    assert by_token.status_code == 303 and by_token.headers["location"].startswith("/login")


def test_i38_pilot_page_shows_each_checks_agreement_with_labels(
    reviewed: Reviewed, bob: Browser
) -> None:
    units = _units(reviewed, reviewed.pilot)
    # Every sampled record labelled good: the check agrees where it passed.
    lines = ["key,not_neg"] + [f"{u['key']},pass" for u in units]
    (reviewed.root / "labels.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    verdicts = [(u.get("checks") or {}).get("not_neg") for u in units]
    judged, passed = sum(v is not None for v in verdicts), verdicts.count(True)
    assert 0 < passed < judged  # some flagged: the agreement is below 100%

    page = bob.get(f"/runs/{reviewed.pilot}/pilot?labels=labels.csv&min_agreement=1")

    assert page.status_code == 200, page.text
    section = page.text[page.text.index('id="pilot-labels"') :]
    assert f'<td>not_neg</td><td class="num">{judged}</td>' in section
    assert f"<td>0 {judged - passed} 0 {passed}</td>" in section  # tp fp fn tn
    assert "judge_uncalibrated" in section
    assert "judge_uncalibrated" in page.text[: page.text.index('id="pilot-labels"')]  # a note
    # Without labels the form is there and nothing is measured; outside the project, refused.
    plain = bob.get(f"/runs/{reviewed.pilot}/pilot").text
    assert 'name="labels"' in plain and "judge_uncalibrated" not in plain
    assert bob.get(f"/runs/{reviewed.pilot}/pilot?labels=../x.csv").status_code == 422
    assert (
        bob.get(f"/runs/{reviewed.pilot}/pilot?labels=labels.csv&min_agreement=2").status_code
        == 422
    )
