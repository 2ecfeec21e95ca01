"""Known secret shapes taken out of text agac stores (a tool's exception text and
traceback): secrets never enter the store, events, sessions or exports (docs/guarantees.md, The store).

Two kinds of secret are replaced with ``[redacted]``:

- the actual values of the environment variables that carry secrets: every provider's
  credential variables (``OPENAI_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, …), the variables a
  project names in ``agac.yml`` (``api_key_env``), ``AGAC_SECRET`` and ``AGAC_TOKEN``, and
  any variable whose name ends in ``_API_KEY``, ``_TOKEN``, ``_SECRET`` or ``_PASSWORD``
  (values shorter than 8 characters are left alone: replacing every ``x`` of a text
  would destroy it and protect nothing);
- shapes of keys whatever their source: ``sk-…`` (OpenAI, Anthropic), ``gsk_…`` (Groq),
  ``AIza…`` (Google), the value of an ``Authorization`` header (``Bearer …``,
  ``Basic …``), of ``x-api-key``, ``x-goog-api-key``, ``api_key``, ``access_token``, and ``?key=`` in URLs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["REDACTED", "Redactor", "secret_env_values"]

REDACTED = "[redacted]"
_MIN_SECRET = 8
_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_AUTH_TOKEN")
_ALWAYS = ("AGAC_SECRET", "AGAC_TOKEN")

_SHAPES = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}"  # OpenAI sk-…, sk-proj-…; Anthropic sk-ant-…
    r"|gsk_[A-Za-z0-9]{20,}"  # Groq
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google API keys
)
# The value after a header or parameter name that carries a credential: the name and
# its separator are kept, the value goes.
_FIELDS = re.compile(
    r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token)?\s*"
    r"|\b(?:x-api-key|x-goog-api-key|api[_-]?key|access[_-]?token)\b[\"']?\s*[:=]\s*[\"']?"
    r"|[?&]key=)"
    r"(?!(?:bearer|basic|token)\b)([^\s\"'&,;{}\[\]]{4,})"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=\-]{8,})")


def secret_env_values(
    names: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> list[str]:
    """The values of the named variables and of every secret-looking variable."""
    env = os.environ if environ is None else environ
    wanted = set(names) | set(_ALWAYS)
    values = {
        v for k, v in env.items() if v and (k in wanted or k.upper().endswith(_SECRET_SUFFIXES))
    }
    return sorted((v for v in values if len(v) >= _MIN_SECRET), key=len, reverse=True)


class Redactor:
    """Replaces the given secret values and the known key shapes in a text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        kept = sorted({v for v in values if len(v) >= _MIN_SECRET}, key=len, reverse=True)
        self._values = re.compile("|".join(map(re.escape, kept))) if kept else None

    @classmethod
    def from_environment(
        cls, names: Iterable[str] = (), environ: Mapping[str, str] | None = None
    ) -> Redactor:
        return cls(secret_env_values(names, environ))

    def __call__(self, text: str) -> str:
        if self._values is not None:
            text = self._values.sub(REDACTED, text)
        text = _SHAPES.sub(REDACTED, text)
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
        return _FIELDS.sub(lambda m: m.group(1) + REDACTED, text)
