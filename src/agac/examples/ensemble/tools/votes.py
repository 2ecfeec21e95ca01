"""Tool functions of the spam_vote example: called as fn(inputs, ctx)."""


def majority(inputs, ctx):
    """The join: the label most versions gave (ties go to "ham": never block on a split
    vote), with the votes in version order and the versions that failed."""
    votes = [f["output"]["label"] for f in inputs["fulfilled"]]
    counts = {label: votes.count(label) for label in ("spam", "ham")}
    label = "spam" if counts["spam"] > counts["ham"] else "ham"
    return {
        "label": label,
        "votes": votes,
        "agreement": round(counts[label] / len(votes), 2) if votes else 0.0,
        "failed_versions": [r["key"] for r in inputs["rejected"]],
    }
