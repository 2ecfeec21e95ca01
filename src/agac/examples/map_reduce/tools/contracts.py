"""Tool functions of the contract_risk example: called as fn(inputs, ctx)."""

import re

_NUMBERED = re.compile(r"(?:^|\s)(\d+)\.\s+")
_ORDER = {"low": 0, "medium": 1, "high": 2}


def split_clauses(inputs, ctx):
    """Cut a contract's text at its clause numbers ("1. ...", "2. ...")."""
    text = inputs["source"]["text"]
    marks = list(_NUMBERED.finditer(text))
    clauses = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        clauses.append({"number": int(mark.group(1)), "text": text[mark.end() : end].strip()})
    return {"clauses": clauses}


def summarize_risk(inputs, ctx):
    """The join: every assessed clause (fulfilled) and every clause that failed (rejected),
    both in clause order. The overall risk is the highest clause risk; failed clauses are
    listed, never dropped."""
    clauses = inputs["split"]["clauses"]
    assessed = [(clauses[f["index"]]["number"], f["output"]) for f in inputs["fulfilled"]]
    overall = max((a["risk"] for _, a in assessed), key=_ORDER.__getitem__, default="unknown")
    by_category = {}
    for _, a in assessed:
        by_category[a["category"]] = by_category.get(a["category"], 0) + 1
    return {
        "contract": ctx.record_key,
        "overall": overall if not inputs["rejected"] else f"{overall} (incomplete)",
        "high_risk": [f"clause {n}" for n, a in assessed if a["risk"] == "high"],
        "by_category": by_category,
        "assessed": len(assessed),
        "not_assessed": [
            f"clause {clauses[r['index']]['number']} ({r['reason']})" for r in inputs["rejected"]
        ],
    }
