"""Provider batches (docs/guarantees.md, Batches, B0-B13): a batch action's units inside the walk (stage,
adopt, settle from items read), the batch step (submit with intents first, recover
unknown submissions, poll, read results), and what people do to batches (status,
retrieve, cancel, resolve)."""
