"""Tool functions of the review_triage example: called as fn(inputs, ctx)."""


def route(inputs, ctx):
    """Pick a queue from the classification; the return value is the action's output."""
    label = inputs["classify"]
    queue = "support" if label["sentiment"] == "neg" else "archive"
    if label["topic"] == "shipping":
        queue = "logistics"
    return {"queue": queue, "review": ctx.record_key}
