"""Per-render cost of a typical prompt template, plain and under the prompt cap (issue 29
item 15: the cap must not slow the hot path). Compare sources with PYTHONPATH:

    PYTHONPATH=src python bench/render_cap.py
"""

from __future__ import annotations

import timeit

from agac.prompt.render import capped, compile_template, render

TEMPLATE = compile_template(
    "Classify this review: {{ source.text }} (stars: {{ source.stars }})", "p"
)
VIEW = {"source": {"text": "The blender works well." * 5, "stars": 4}}
N = 200_000

for label, call in (
    ("render", lambda: render(TEMPLATE, VIEW)),
    ("capped render", lambda: capped(TEMPLATE, VIEW, 8_000_000)),
):
    best = min(timeit.repeat(call, number=N, repeat=5))
    print(f"{best / N * 1e6:.2f} us per {label}")
