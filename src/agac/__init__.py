"""agac: declarative LLM workflows over record sets, online or through provider batch APIs.

The library is the product; the CLI is a thin shell over these calls.
Heavy modules are imported on first use so that ``import agac`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Results",
    "RetryableError",
    "RunResult",
    "ToolContext",
    "__version__",
    "arun",
    "cancel",
    "compare",
    "compare_variants",
    "cost",
    "export",
    "load_workflow",
    "pilot",
    "plan",
    "render",
    "results",
    "retry",
    "run",
    "status",
    "validate",
]

_LAZY = {
    "Results": "agac.api.results:Results",
    "RetryableError": "agac.errors:RetryableError",
    "RunResult": "agac.engine.lifecycle.options:RunResult",
    "ToolContext": "agac.engine.context:ToolContext",
    "arun": "agac.api:arun",
    "cancel": "agac.api:cancel",
    "compare": "agac.api:compare",
    "compare_variants": "agac.api:compare_variants",
    "cost": "agac.api:cost",
    "export": "agac.api:export_table",
    "load_workflow": "agac.api:load_workflow",
    "pilot": "agac.api:pilot",
    "plan": "agac.api:plan",
    "render": "agac.api:render",
    "results": "agac.api:results",
    "retry": "agac.api:retry",
    "run": "agac.api:run",
    "status": "agac.api:status",
    "validate": "agac.api:validate",
}

if TYPE_CHECKING:  # pragma: no cover
    from agac.api import (
        arun,
        cancel,
        compare,
        compare_variants,
        cost,
        load_workflow,
        pilot,
        plan,
        render,
        results,
        retry,
        run,
        status,
        validate,
    )
    from agac.api import export_table as export
    from agac.api.results import Results
    from agac.engine.context import ToolContext
    from agac.engine.lifecycle.options import RunResult
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
