"""prompt layer of agac (docs/architecture.md): sandboxed Jinja2 rendering of prompts and guards."""

from __future__ import annotations

from agac.prompt.references import Reference, template_references
from agac.prompt.render import RenderError, compile_template, evaluate_guard, render, tojson

__all__ = [
    "Reference",
    "RenderError",
    "compile_template",
    "evaluate_guard",
    "render",
    "template_references",
    "tojson",
]
