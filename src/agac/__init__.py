"""agac: declarative LLM workflows over record sets, online or through provider batch APIs.

The library is the product; the CLI is a thin shell over these calls.
Heavy modules are imported on first use so that ``import agac`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "RetryableError",
    "ToolContext",
    "__version__",
    "load_workflow",
    "run",
    "status",
]

_LAZY = {
    "RetryableError": "agac.errors:RetryableError",
    "ToolContext": "agac.engine.context:ToolContext",
    "load_workflow": "agac.api:load_workflow",
    "run": "agac.api:run",
    "status": "agac.api:status",
}

if TYPE_CHECKING:  # pragma: no cover
    from agac.api import load_workflow, run, status
    from agac.engine.context import ToolContext
    from agac.errors import RetryableError


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'agac' has no attribute {name!r}")
    import importlib

    module_name, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
