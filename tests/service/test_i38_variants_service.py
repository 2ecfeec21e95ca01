"""The service's compare page for two variants of an action in one run (The quality loop:
two variants compared): ``/compare?a=RUN&variants=A,B`` shows what ``agac compare RUN
--variants`` says, its CSV holds every changed row, and the pairwise judge is asked from
the page once."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_support import Browser, Service, running_service, team_project

from agac import api

WORKFLOW = """\
name: replies
input: {path: data/, id_field: id}
defaults: {model: mock/m}
actions:
  - name: classify
    prompt: "Classify this message: {{ source.text }}"
    schema:
      type: object
      properties:
        label: {type: string, enum: [pos, neg, neutral]}
        score: {type: integer}
      required: [label, score]
      additionalProperties: false
    checks:
      - {name: not_neg, expr: "answer.label != 'neg'", on_fail: flag}
    variants:
      - {name: plain}
      - {name: feel, prompt: "Say what this message feels like: {{ source.text }}"}
"""

AGAC_YML = "identity: login\nprices:\n  mock/m: {input: 2.5, output: 10.0}\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("variants") / "team"
    rows = [{"id": f"r{i:02d}", "text": f"message {i}"} for i in range(12)]
    team_project(root, workflow=WORKFLOW, rows=rows, agac_yml=AGAC_YML)
    run = api.run("replies", root, progress=False)
    assert run.final
    return root, run.run_id


@pytest.fixture(scope="module")
def bob(project: tuple[Path, str]) -> Iterator[Browser]:
    svc: Service
    with running_service(project[0]) as svc:
        yield svc.browser("bob")


def test_i38_variants_compare_page_shows_the_two_variants(
    project: tuple[Path, str], bob: Browser
) -> None:
    root, run_id = project
    doc = api.compare_variants(run_id, root, limit=50)
    act = doc["actions"]["classify"]
    assert act["changed_count"] > 0

    page = bob.get(f"/compare?a={run_id}&variants=*")

    assert page.status_code == 200, page.text
    text = page.text
    assert "Compare two variants" in text and 'id="compare-variants"' in text
    assert "A is <strong>plain</strong>" in text and "<code>classify@feel</code>" in text
    assert f'<strong class="changed-count">{act["changed_count"]}</strong> rows differ' in text
    shown = re.findall(r"<tr><td>(r\d{2})</td>", text)
    assert shown == [row["key"] for row in act["changed"]]
    link = re.search(r'<a class="download-changed" href="([^"]+)">', text)
    assert link, text
    got = bob.get(link.group(1).replace("&amp;", "&"))
    assert got.status_code == 200 and "attachment" in got.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert [r["key"] for r in rows] == [row["key"] for row in act["changed"]]
    named = bob.get(f"/compare?a={run_id}&variants=feel,plain")
    assert "A is <strong>feel</strong>" in named.text
    wrong = bob.get(f"/compare?a={run_id}&variants=plain,huge")
    assert wrong.status_code == 422 and "has no variant" in wrong.text


def test_i38_variants_compare_page_asks_the_pairwise_judge_once(
    project: tuple[Path, str], bob: Browser
) -> None:
    root, run_id = project
    form = {"a": run_id, "variants": "plain,feel", "judge": "mock/m"}
    bob.get(f"/compare?a={run_id}&variants=*")  # the page's CSRF token

    first = bob.post("/compare", form)

    assert first.status_code == 200, first.text
    assert "Compare two variants" in first.text
    assert re.search(r"B's win rate ([0-9.]+ %)", first.text), first.text
    calls = sum(r["calls"] for r in api.cost(run_id, root)["rows"] if r["origin"] == "pairwise")
    assert calls > 0
    bob.post("/compare", form)
    again = sum(r["calls"] for r in api.cost(run_id, root)["rows"] if r["origin"] == "pairwise")
    assert again == calls
