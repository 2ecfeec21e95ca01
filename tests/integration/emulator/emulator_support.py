"""Constants shared by the emulator suite (a uniquely named module: every test folder's
``conftest`` is a different module, so tests do not import from it)."""

from __future__ import annotations

#: Emulator time a batch takes; tests advance the clock instead of waiting.
BATCH_SECONDS = 600
