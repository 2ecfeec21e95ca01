"""Function tools of an llm action (``tools:``): what the model is told about each one
(:mod:`agac.tools.signature`: its name, what it is for, the JSON Schema of its arguments)
and how one call of it runs (:mod:`agac.tools.invoke`: isolated from agac's stdout, timed
out, its errors told to the model rather than ending agac).

The loop that asks the model, runs the calls and continues is the engine's
(``engine/walk/toolloop.py``); this package knows nothing of runs or the store.
"""
