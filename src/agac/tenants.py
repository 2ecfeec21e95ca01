"""Tenants (T2): the name every run, and everything of a run, belongs to.

A tenant is chosen when a run is admitted — ``agac run --tenant T``, else ``AGAC_TENANT``,
else ``tenant:`` in ``agac.yml``, else ``default`` — and never changes. Names are short
and plain (letters, digits, ``.``, ``_``, ``-``; at most 64 characters, starting with a
letter or digit), so a tenant can start a key (``<tenant>:<hash>``, E1) without ambiguity.

This module is at the bottom of the layers: the config, the store, the engine and the
library all read tenant names through it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["DEFAULT_TENANT", "TENANT_ENV", "check_tenant", "is_tenant", "pick_tenant"]

DEFAULT_TENANT = "default"
"""The tenant of a run admitted without one (and of every row stored before tenants)."""

TENANT_ENV = "AGAC_TENANT"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def is_tenant(name: object) -> bool:
    """Whether ``name`` is a valid tenant name."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_tenant(name: str, where: str = "--tenant") -> str:
    """``name`` if it is a valid tenant name; else ValueError naming ``where`` and the rule."""
    if not is_tenant(name):
        raise ValueError(
            f"{where}: {name!r} is not a tenant name (letters, digits, '.', '_' "
            "and '-', at most 64 characters, starting with a letter or digit)"
        )
    return name


def pick_tenant(
    given: str | None, configured: str | None, environ: Mapping[str, str] | None = None
) -> str:
    """The tenant a command acts in: ``given`` (``--tenant``, a library argument), else
    ``AGAC_TENANT``, else ``configured`` (``tenant:`` in agac.yml), else ``default``;
    ValueError naming its source when it is not a valid name."""
    env = os.environ if environ is None else environ
    if given:
        return check_tenant(given, "--tenant")
    if env.get(TENANT_ENV):
        return check_tenant(env[TENANT_ENV], TENANT_ENV)
    if configured:
        return check_tenant(configured, "tenant: in agac.yml")
    return DEFAULT_TENANT
