"""``agac plan``: the records a plan of a workflow reads — its current input, or the
records given. The estimate made over them is the one admission checks against the
run's budget (R5, engine/lifecycle/estimate.py): the views read the lifecycle, never the
other way round."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from agac.engine.lifecycle.snapshots import input_source

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.data.sources import RecordSource
    from agac.jsontext import JSONObject

__all__ = ["plan_records"]


def plan_records(
    project: Project,
    workflow: Workflow,
    source: RecordSource | None = None,
) -> Iterator[tuple[str, JSONObject | None]]:
    """(key, payload or None when invalid) of the workflow's current input (or ``source``),
    streamed."""
    for rec in input_source(workflow, project, source).records(workflow.input.id_field):
        yield rec.key, rec.payload if rec.reason is None else None
