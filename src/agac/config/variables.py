"""Settings from the environment (``AGAC_*``), checked like the same settings in
``agac.yml``, and the store URL forms agac knows.

Every command reads the environment when it finds its project (:func:`check_variables`,
called by ``find_project``): a variable with a value the setting does not take is a
ConfigError (exit 2) naming the variable, with the same ranges as ``agac.yml`` —
``AGAC_MOCK_FAIL_RATE=7`` is refused like ``providers: mock: fail_rate: 7`` — never a
``ValueError`` later. ``AGAC_STORE`` must be one of :data:`STORE_FORMS` (so must
``store:`` in ``agac.yml``): anything else is ``invalid_store`` with the forms listed,
never a SQLite file created under an unexpected name or a query string ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from agac.errors import ConfigError, Problem
from agac.providers.mock import ENVIRONMENT as MOCK_ENVIRONMENT
from agac.providers.mock import MockProvider
from agac.providers.options import Option
from agac.tenants import TENANT_ENV, check_tenant

__all__ = [
    "IMPORT_TIMEOUT",
    "POINT_SCHEMES",
    "RATE_WINDOW",
    "STORE_FORMS",
    "STORE_HINT",
    "VARIABLES",
    "check_variables",
    "store_problem",
]

POINT_SCHEMES = ("dir", "s3", "gs", "az", "azure", "abfs", "abfss")
"""Schemes of storage points: object storage and directories."""

STORE_FORMS = (
    "memory",
    (
        "sqlite:///PATH (or a bare PATH ending in .db, .sqlite or .sqlite3; relative to the "
        "project root)"
    ),
    "postgresql://USER@HOST:PORT/DB",
    "s3://BUCKET/PREFIX (also gs://, az://)",
    "dir:///PATH",
)
STORE_HINT = "a store is one of: " + "; ".join(STORE_FORMS)

RATE_WINDOW = Option(
    "rate_window",
    "number",
    "the seconds of a rate limit's window (a minute); shortened only for tests against an emulator",
    default=60.0,
    exclusive_minimum=True,
)

IMPORT_TIMEOUT = Option(
    "import_timeout",
    "number",
    "the seconds a tool module's import may take before it is refused",
    default=30.0,
    exclusive_minimum=True,
)

VARIABLES: dict[str, Option] = {
    **{MOCK_ENVIRONMENT[o.name]: o for o in MockProvider.spec.options},
    "AGAC_RATE_WINDOW_SECONDS": RATE_WINDOW,
    "AGAC_IMPORT_TIMEOUT": IMPORT_TIMEOUT,
}
"""Numeric settings the environment gives, each checked as its option says."""

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def store_problem(raw: str) -> str | None:
    """Why ``raw`` is not one of :data:`STORE_FORMS` (words that follow the value in a
    message), or None when it is one."""
    text = raw.strip()
    if text == "memory":
        return None
    scheme, sep, rest = text.partition("://")
    if not sep:
        if text.lower().startswith("memory"):
            return "is not memory, which is written exactly so (lower case, nothing after it)"
        if "?" in text or "#" in text:
            return "is a SQLite file path with a query or fragment, which agac does not take"
        if not text.endswith(_SQLITE_SUFFIXES):
            return (
                "is neither a store URL nor a SQLite file path ending in .db, .sqlite or .sqlite3"
            )
        return None
    kind = scheme.lower()
    if kind == "sqlite" or kind.startswith("sqlite+"):
        if not rest.startswith("/") or rest == "/":
            return "is not a SQLite URL of the form sqlite:///PATH"
        if "?" in rest or "#" in rest:
            return (
                "has a query string, which agac does not take for a SQLite store (it "
                "opens the file read-write itself)"
            )
        return None
    if kind in ("postgresql", "postgres") or kind.startswith("postgresql+"):
        return None if rest.strip("/") else "names no PostgreSQL server"
    if kind in POINT_SCHEMES:
        return None if rest.strip("/") else f"names no {kind}:// location"
    return f"has the scheme {scheme!r}, which is not a store agac knows"


def check_variables(environ: Mapping[str, str] | None = None) -> list[Problem]:
    """A Problem (file ``environment``) for each ``AGAC_*`` setting with a value it does
    not take."""
    env = os.environ if environ is None else environ
    problems = []
    for variable, option in VARIABLES.items():
        try:
            option.from_environment(variable, env)
        except ConfigError as exc:
            problems.extend(exc.problems)
    store = env.get("AGAC_STORE", "")
    if store and (why := store_problem(store)) is not None:
        problems.append(
            Problem("invalid_store", f"AGAC_STORE={store!r} {why}", "environment", hint=STORE_HINT)
        )
    if env.get(TENANT_ENV):
        try:
            check_tenant(env[TENANT_ENV], TENANT_ENV)
        except ValueError as exc:
            problems.append(Problem("invalid_tenant", str(exc), "environment"))
    return problems
