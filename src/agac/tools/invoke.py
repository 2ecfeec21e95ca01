"""Function tools loaded for a run, and one call of one of them.

:func:`load_tools` imports each function of an action's ``tools:`` from the project root
(as tool actions' functions are: :func:`agac.config.functions.resolve_function`), works
out what the model is told about it (:mod:`agac.tools.signature`, or the ``schema:``
given) and the hash of its code (:func:`agac.config.functions.code_hash`).

:func:`call_function` runs one call the model asked for: its arguments are checked
against the schema first; a sync function runs in a thread, an async one in the loop;
what it prints goes to stderr; it is given ``timeout`` seconds. Whatever goes wrong in the
user's code (a bad argument, an exception, the timeout) becomes a :class:`ToolOutcome`
with an ``error`` — told to the model, which may try another call — never an exception
that ends agac (only what ``fails_only_its_unit`` lets through, such as a KeyboardInterrupt,
propagates).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.config.functions import code_hash, resolve_function
from agac.providers.base import ToolDef
from agac.tools.signature import CONTEXT_PARAMETER, signature_of
from agac.usercode import describe, fails_only_its_unit, user_stdout

if TYPE_CHECKING:
    from agac.config.model import FunctionTool

__all__ = ["LoadedTool", "ToolOutcome", "argument_error", "call_function", "load_tools"]


@dataclass(frozen=True)
class LoadedTool:
    """One function tool as a run holds it: its entry, the function, what the model is
    told (``definition``), whether it takes ``ctx`` and the hash of its code."""

    spec: FunctionTool
    function: Callable[..., Any]
    definition: ToolDef
    takes_context: bool
    code: str


@dataclass(frozen=True)
class ToolOutcome:
    """What one call gave: ``output`` (JSON text, sent to the model) or ``error`` (a
    sentence, sent to the model as the call's result)."""

    output: str | None
    error: str | None = None
    timed_out: bool = False
    """The function did not return in time: it may still be running (a sync one in its
    thread), so whatever it does may yet happen."""

    @property
    def content(self) -> str:
        """The text the model is sent as the call's result."""
        if self.output is not None:
            return self.output
        return json.dumps({"error": self.error}, ensure_ascii=False)


def load_tools(tools: Sequence[FunctionTool], root: Path) -> tuple[LoadedTool, ...]:
    """Each entry imported and described. Raises FunctionNotFound (import) or
    SignatureError (arguments that cannot be described and no ``schema:``)."""
    loaded = []
    for spec in tools:
        fn = resolve_function(spec.function, root)
        found = signature_of(fn, f"tool {spec.name!r} ({spec.function})")
        definition = ToolDef(
            spec.name,
            spec.description if spec.description is not None else found.description,
            spec.schema if spec.schema is not None else found.parameters,
        )
        loaded.append(LoadedTool(spec, fn, definition, found.takes_context, code_hash(fn)))
    return tuple(loaded)


def argument_error(tool: LoadedTool, arguments: str) -> ToolOutcome | None:
    """Why the JSON ``arguments`` the model wrote cannot be passed to ``tool`` (not JSON,
    not an object, not what its schema says), or None: the function can be called."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError as exc:
        return ToolOutcome(None, f"the arguments are not JSON: {exc}")
    if not isinstance(args, dict):
        return ToolOutcome(None, "the arguments must be a JSON object")
    wrong = _schema_error(tool.definition.parameters, args)
    if wrong is not None:
        return ToolOutcome(None, f"the arguments do not match the tool's schema: {wrong}")
    return None


async def call_function(tool: LoadedTool, arguments: str, context: object) -> ToolOutcome:
    """Run one call with the JSON ``arguments`` the model wrote; ``context`` is passed as
    ``ctx`` to a function that takes it."""
    wrong = argument_error(tool, arguments)
    if wrong is not None:
        return wrong
    args = json.loads(arguments or "{}")
    if tool.takes_context:
        args = {**args, CONTEXT_PARAMETER: context}
    seconds = tool.spec.timeout
    try:
        value = await asyncio.wait_for(_run(tool.function, args), timeout=seconds)
    except TimeoutError:
        return ToolOutcome(
            None, f"the tool did not return within {seconds:g} seconds", timed_out=True
        )
    except BaseException as exc:  # user code: it fails its call, never agac
        if not fails_only_its_unit(exc):
            raise
        return ToolOutcome(None, describe(exc))
    try:
        return ToolOutcome(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        return ToolOutcome(None, f"the tool returned a value that is not JSON: {exc}")


async def _run(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    with user_stdout():
        if inspect.iscoroutinefunction(fn):
            return await fn(**args)
        result = await asyncio.to_thread(fn, **args)
        if inspect.isawaitable(result):
            result = await result
        return result


def _schema_error(schema: dict[str, Any], value: dict[str, Any]) -> str | None:
    from jsonschema import Draft202012Validator  # ~0.1 s: only runs with tools pay for it

    for error in Draft202012Validator(schema).iter_errors(value):
        where = "/".join(str(p) for p in error.path) or "(root)"
        return f"{where}: {error.message}"
    return None
