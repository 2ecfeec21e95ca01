from __future__ import annotations

from typing import Any

from bedrock_support import request, requests


async def test_smoke(bedrock: Any, emulator: Any) -> None:
    p = bedrock()
    r = await p.complete(request())
    print(r)
    h = await p.submit_batch(requests(120), "agac_abc")
    print(h)
    print(await p.poll_batch(h))
    emulator.advance(3600)
    print(await p.poll_batch(h))
    res = [x async for x in p.batch_results(h)]
    print(len(res), res[0])
    print(await p.billed_work(h))
    print(await p.find_batch("agac_abc"))
