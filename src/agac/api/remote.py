"""Decisions sent to the service (A3 with ``identity: login``).

On a project with ``identity: login``, ``agac approve|reject|revise`` (and the library's
``approve``, ``reject``, ``revise``) do not write the store: they send the decision to
``agac serve`` at ``AGAC_SERVER`` with ``Authorization: Bearer $AGAC_TOKEN``, where it is
decided for the token's user exactly as in the browser. ``--as`` and ``AGAC_USER`` are
refused (naming both): the service, not the command line, says who decides.

The service's refusals come back as the errors a local decision raises, with the same
codes: 403 ``NotAnApprover``, 404 ``NotFound``, 409 ``DecisionRefused``, 401 and 422
``UsageError`` (all exit 2). A service that cannot be reached is an ``AgacError`` (exit 1).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from agac.errors import AgacError, DecisionRefused, NotAnApprover, NotFound, UsageError

__all__ = ["send_decision"]

TIMEOUT = 30.0


def send_decision(
    ref: str,
    verb: str,
    body: Mapping[str, Any],
    who: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """POST ``/api/v1/approvals/{ref}/{verb}`` to ``AGAC_SERVER`` with ``AGAC_TOKEN``; the
    proposal the service returns (for ``revise``, the new one)."""
    env = os.environ if environ is None else environ
    if who or env.get("AGAC_USER"):
        raise UsageError(
            "this project has identity: login: --as and AGAC_USER are refused (the "
            "service says who decides, from AGAC_TOKEN); drop --as and unset AGAC_USER"
        )
    server = (env.get("AGAC_SERVER") or "").rstrip("/")
    token = env.get("AGAC_TOKEN") or ""
    if not server or not token:
        missing = " and ".join(
            n for n, v in (("AGAC_SERVER", server), ("AGAC_TOKEN", token)) if not v
        )
        raise UsageError(
            f"this project has identity: login: decisions go to `agac serve`; set "
            f"{missing} (AGAC_SERVER=http://127.0.0.1:8800, AGAC_TOKEN from an "
            "administrator's `agac tokens create NAME`)"
        )
    if not server.startswith(("http://", "https://")):
        raise UsageError(f"AGAC_SERVER={server!r} is not an http:// or https:// URL")
    url = f"{server}/api/v1/approvals/{urllib.parse.quote(ref, safe='')}/{verb}"
    request = urllib.request.Request(
        url,
        data=json.dumps(dict(body)).encode("utf-8"),
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(
            request, timeout=TIMEOUT
        ) as response:  # http(s) only: checked above
            return dict(json.loads(response.read().decode("utf-8")))
    except urllib.error.HTTPError as exc:
        raise _refusal(exc.code, exc.read()) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise AgacError(
            f"cannot reach the service at {server}: {getattr(exc, 'reason', exc)}; is "
            "`agac serve` running there? (nothing was decided)"
        ) from exc


def _refusal(status: int, raw: bytes) -> AgacError:
    try:
        error = json.loads(raw.decode("utf-8")).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    message = str(error.get("message") or f"the service answered {status}")
    code = str(error.get("code") or "")
    if status == 401:
        return UsageError(
            f"the service refused AGAC_TOKEN ({message}): it is unknown, revoked or "
            "expired, or its user is disabled; ask an administrator for a new one"
        )
    if status == 403:
        return NotAnApprover(message)
    if status == 404:
        return NotFound(message)
    if status == 409:
        return DecisionRefused(message, code or "approval_conflict")
    if status == 422:
        return UsageError(message)
    return AgacError(f"the service answered {status}: {message}")
