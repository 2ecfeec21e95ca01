"""T4: everything user-supplied is escaped — record text, answers (outputs), error
messages, reasons, revisions and record keys holding ``<script>`` and ``"onerror=`` render
inert in every page and every live fragment that shows them."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import httpx
import pytest
from service_support import Service, running_service, team_project

from agac import api

SCRIPT = "<script>alert(1)</script>"
ATTR = '"onerror="alert(2)'
IMG = "<img src=x onerror=alert(3)>"
EVIL = f"{SCRIPT}{ATTR}{IMG}"
KEY = 'k<img src=x onerror=alert(4)>"onerror="'

WORKFLOW = """\
name: xss
input: {path: data/, id_field: id}
actions:
  - name: echo
    kind: tool
    function: tools.x:echo
  - name: boom
    kind: tool
    dependencies: [echo]
    function: tools.x:boom
  - name: send
    kind: tool
    dependencies: [echo]
    function: tools.x:send
    approval: {approvers: [leads], expires_in: 24h}
"""

TOOLS = """\
def echo(inputs, ctx):
    return {"said": inputs["source"]["text"], "key": ctx.record_key}

def boom(inputs, ctx):
    raise ValueError("cannot: " + inputs["echo"]["said"])

def send(inputs, ctx):
    return {"sent": inputs["echo"]["said"]}
"""


def _raw_markup(html: str) -> list[str]:
    """Pieces of the attack that would be live markup (unescaped) in ``html``."""
    return [
        p for p in ("<script>alert", "<img src=x", '"onerror=', "onerror=alert(3)>") if p in html
    ]


def _assert_inert(html: str, where: str, *, shows: bool = True) -> None:
    assert _raw_markup(html) == [], f"{where}: unescaped {_raw_markup(html)}"
    if shows:
        assert "&lt;script&gt;alert(1)" in html or "&lt;img src=x onerror=alert" in html, (
            f"{where} does not show the text at all (the test would prove nothing)"
        )


@pytest.fixture
def xss(tmp_path: Path) -> Path:
    root = team_project(
        tmp_path / "xss",
        workflow=WORKFLOW,
        rows=[{"id": "r1", "text": EVIL}, {"id": KEY, "text": EVIL}],
    )
    (root / "tools" / "x.py").write_text(TOOLS, encoding="utf-8")
    (root / "workflows" / "replies.yml").unlink()
    (root / "workflows" / "xss.yml").write_text(WORKFLOW, encoding="utf-8")
    assert api.run("xss", root).exit_code == 75
    return root


def _swaps(service: Service, browser_client: httpx.Client, path: str) -> list[str]:
    """The data of the first swap events of a live stream."""
    out: list[str] = []
    with browser_client.stream("GET", path) as r:
        assert r.status_code == 200
        data: list[str] = []
        for line in r.iter_lines():
            if line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                out.append("\n".join(data))
                data = []
                if len(out) >= 1:
                    break
    return out


def test_t4_user_supplied_text_is_escaped_in_every_page_and_fragment(xss: Path) -> None:
    with running_service(xss) as service:
        ann = service.browser("ann")
        run_id = service.store.list_runs(limit=1)[0].id
        proposals = api.approvals_list("xss", xss)
        assert len(proposals) == 2
        # a revision and a rejection reason carry the attack too
        revise = ann.post(
            f"/approvals/{proposals[0]['id']}/revise", {"changes": f"echo.said=again {EVIL}"}
        )
        assert revise.status_code == 303, revise.text
        reject = ann.post(f"/approvals/{proposals[1]['id']}/reject", {"reason": EVIL})
        assert reject.status_code == 303, reject.text

        pages = {
            "runs": ann.get("/runs").text,
            "run": ann.get(f"/runs/{run_id}").text,
            "record r1": ann.get(f"/records/{run_id}/r1").text,
            "record key": ann.get(f"/records/{run_id}/" + urllib.parse.quote(KEY, safe="")).text,
            "approvals": ann.get("/approvals").text,
            "approvals all": ann.get("/approvals?all=1").text,
            "cost": ann.get("/cost").text,
            "error page": ann.get("/runs/" + urllib.parse.quote(EVIL, safe="")).text,
        }
        for where, html in pages.items():
            _assert_inert(html, where, shows=where not in ("runs", "cost", "error page"))
        # the failure's message and the odd key are on the run page, escaped
        assert (
            "cannot: &lt;script&gt;alert(1)&lt;/script&gt;&#34;onerror=&#34;alert(2)"
            in pages["run"]
        )
        assert "k&lt;img src=x onerror=alert(4)&gt;&#34;onerror=&#34;" in pages["run"]
        assert "diff-add" in pages["approvals"]  # the revision's diff is shown, escaped

        live = _swaps(service, ann.http, f"/runs/{run_id}/live?after=0")
        assert live and "failures" in live[0]
        for n, fragment in enumerate(live):
            _assert_inert(fragment, f"live fragment {n}")
        assert "<script" not in "".join(re.findall(r"<[^>]+>", "".join(live)))


def test_t4_a_reason_or_name_never_breaks_out_of_an_attribute(service: Service) -> None:
    ann = service.browser("ann")
    html = ann.get("/runs?workflow=" + urllib.parse.quote(ATTR) + "&state=").text
    assert '"onerror=' not in html
    assert ann.get("/runs?state=" + urllib.parse.quote(EVIL)).status_code == 422
    assert _raw_markup(ann.get("/runs?state=" + urllib.parse.quote(EVIL)).text) == []
