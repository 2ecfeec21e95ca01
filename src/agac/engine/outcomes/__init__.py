"""Writing a run's progress: the outcome writer (outcomes, answers, usage, events, staged
items, fan-out counts, live progress) and the store gateway under it — one store thread,
group commits, a durability acknowledgement before a paid unit lets its slot go (S1)."""
