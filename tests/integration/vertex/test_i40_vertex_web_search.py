"""Tools per record: Google Search grounding on Vertex AI (Gemini models), live on both
transports against the emulator: the request offers ``googleSearch`` on Vertex's path,
the answer's grounding comes back as citations and its searches as billed uses."""

from __future__ import annotations

from typing import Any

import pytest
from vertex_support import request

from agac.providers.servertools import WebSearch


@pytest.mark.parametrize("transport", ["lean", "sdk"])
async def test_i40_web_search_on_vertex_gemini_grounds_the_answer(
    vertex: Any, emulator: Any, transport: str
) -> None:
    asked = request("Classify: great product [[emulator searches: 2]]", web_search=WebSearch())

    answer = await vertex(transport).complete(asked)

    assert answer.stop_reason == "end" and isinstance(answer.parsed, dict)
    assert [c.url.startswith("https://example.com/emulated/") for c in answer.citations] == [
        True,
        True,
    ]
    # Gemini 2.5 bills the grounded prompt once, whatever its queries.
    assert answer.usage.server_tools == (("web_search", 1),)
    assert emulator.stats()["searches"] == {"vertex": 1}
    (chat,) = [r for r in emulator.requests() if r["op"] == "chat" and r["provider"] == "vertex"]
    assert chat["body"]["tools"] == [{"googleSearch": {}}]
