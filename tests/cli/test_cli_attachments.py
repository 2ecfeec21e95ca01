"""Issue 22 items 6 and 7: the bundled ``invoices`` example runs offline from ``agac
init``; ``agac validate`` checks the files its sample attaches; ``agac render`` shows each
attachment as media type, size, SHA-256 and page count — never its bytes; ``agac plan``
marks the image and page tokens as estimates."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from cli_support import agac


@pytest.fixture(scope="module")
def invoices(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("invoices")
    made = agac("init", "proj", "--example", "invoices", cwd=base)
    assert made.code == 0, made
    return base / "proj"


def test_i22_7_the_invoices_example_runs_offline_from_agac_init(invoices: Path) -> None:
    checked = agac("validate", "invoices", "--json", cwd=invoices)
    assert checked.code == 0, checked
    ran = agac("run", "invoices", "--json", cwd=invoices)
    assert ran.code == 0, ran
    summary = ran.json()
    assert summary["state"] == "succeeded"
    assert summary["actions"]["extract"]["answered"] == 5
    assert summary["actions"]["check"]["answered"] == 5
    again = agac("run", "invoices", "--json", cwd=invoices).json()
    assert again["actions"]["extract"]["calls"] == 0, "the same files are not asked again"


def test_i22_6_render_shows_each_file_never_its_bytes(invoices: Path) -> None:
    pdf = (invoices / "files" / "inv-002.pdf").read_bytes()
    shown = agac("render", "invoices", "--record", "inv-002", "--action", "extract", cwd=invoices)
    assert shown.code == 0, shown
    digest = hashlib.sha256(pdf).hexdigest()
    assert (
        f"[file] inv-002.pdf: application/pdf, {len(pdf):,} bytes, 2 pages, sha256:{digest}"
        in shown.out
    )
    assert base64.b64encode(pdf).decode()[:40] not in shown.out
    as_json = agac(
        "render", "invoices", "--record", "inv-002", "--action", "extract", "--json", cwd=invoices
    ).json()
    att = as_json[0]["request"]["messages"][-1]["attachments"][0]
    assert (att["media_type"], att["size"], att["sha256"], att["pages"]) == (
        "application/pdf",
        len(pdf),
        digest,
        2,
    )


def test_i22_6_plan_marks_attachment_tokens_as_estimates(invoices: Path) -> None:
    plan = agac("plan", "invoices", "--json", cwd=invoices)
    assert plan.code == 0, plan
    doc = plan.json()
    assert doc["actions"]["extract"]["attachment_tokens"] > 0
    assert "estimated" in doc["estimates"]


def test_i22_6_validate_names_a_missing_file_with_a_did_you_mean(tmp_path: Path) -> None:
    made = agac("init", "proj", "--example", "invoices", cwd=tmp_path)
    assert made.code == 0, made
    root = tmp_path / "proj"
    lines = (root / "data" / "invoices.jsonl").read_text().replace("inv-002.pdf", "inv-02.pdf")
    (root / "data" / "invoices.jsonl").write_text(lines)
    checked = agac("validate", "invoices", "--json", cwd=root)
    assert checked.code == 0, checked  # one record's unit will fail; the others run
    problems = checked.json()["warnings"]
    found = [p for p in problems if p["code"] == "attachment_not_found"]
    assert found, problems
    assert found[0]["file"].endswith("invoices.jsonl") and found[0]["line"] == 2
    assert "inv-002.pdf" in (found[0]["hint"] or "")


def test_i22_6_validate_refuses_a_pdf_to_a_provider_that_reads_images_only(tmp_path: Path) -> None:
    made = agac("init", "proj", "--example", "invoices", cwd=tmp_path)
    assert made.code == 0, made
    root = tmp_path / "proj"
    wf = root / "workflows" / "invoices.yml"
    wf.write_text(
        wf.read_text().replace(
            "mock/vision-small", "groq/meta-llama/llama-4-scout-17b-16e-instruct"
        )
    )
    checked = agac("validate", "invoices", "--json", cwd=root, env={"GROQ_API_KEY": "k"})
    assert checked.code == 2, checked
    problems = [p for p in checked.json()["errors"] if p["code"] == "attachment_not_supported"]
    assert problems and "groq" in problems[0]["message"] and "PDF" in problems[0]["message"]
    # located: the attachments line of the workflow
    assert problems[0]["file"].endswith("invoices.yml") and problems[0]["line"] > 0
