"""How to install what a feature needs: agac is not published on a package index, so an
extra is installed from a clone of its repository (``pip install -e '.[extra]'``, run in
the clone). Every "install this" hint is written here, so none can name a package that
``pip`` would not find."""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(*extras: str) -> str:
    """``pip install -e '.[a,b]'`` in a clone of agac, for ``extras``."""
    names = ",".join(extras)
    return f"pip install -e '.[{names}]' in your clone of agac (agac is installed from a clone)"
