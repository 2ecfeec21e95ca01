"""The JSON Schema of workflow files, shipped for editors (``agac schema``).

``workflow.schema.json`` (next to this module) describes every key a workflow file may
hold, with its type, its allowed values and a one-line description, so an editor with a
YAML language server completes keys and flags typos while the file is written. It checks
shape only: templates, the action graph, models and credentials are ``agac validate``'s
job. A test keeps it in step with the loader (every key the loader accepts is in the
schema and nothing else is) and validates every shipped and documented example with it.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

__all__ = ["SCHEMA_FILE", "workflow_schema", "workflow_schema_text"]

SCHEMA_FILE = "workflow.schema.json"


def workflow_schema_text() -> str:
    """The schema as shipped: JSON text (draft-07, which YAML language servers read)."""
    return files("agac.config").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def workflow_schema() -> dict[str, Any]:
    """The schema as a dict."""
    value: dict[str, Any] = json.loads(workflow_schema_text())
    return value
