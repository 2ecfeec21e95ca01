"""config layer of agac (docs/architecture.md; docs/workflow-reference.md): YAML -> typed, validated model with located Problems.

Public API: :func:`find_project`, :func:`store_url`, :func:`load_workflow`,
:func:`validate_workflow`, :func:`workflow_problems_json`, :func:`parse_duration`,
and the model types :class:`Workflow`, :class:`Action` and friends.
"""

from __future__ import annotations

from agac.config.durations import parse_duration
from agac.config.model import Action, ContextSpec, InputSpec, RateLimit, RetrySpec, Workflow
from agac.config.project import (
    PriceConfig,
    Project,
    ProjectConfig,
    ProviderConfig,
    find_project,
    store_url,
)
from agac.config.workflow import (
    find_workflow,
    load_workflow,
    validate_workflow,
    workflow_problems_json,
)

__all__ = [
    "Action",
    "ContextSpec",
    "InputSpec",
    "PriceConfig",
    "Project",
    "ProjectConfig",
    "ProviderConfig",
    "RateLimit",
    "RetrySpec",
    "Workflow",
    "find_project",
    "find_workflow",
    "load_workflow",
    "parse_duration",
    "store_url",
    "validate_workflow",
    "workflow_problems_json",
]
