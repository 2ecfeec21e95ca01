"""The run lifecycle (docs/guarantees.md, Runs): admit or continue a run (R1), retry one (R2), own it
through its lease (S3), assemble its parts once, drive it — walks of its records and
batch steps until nothing moves — and end it in exactly one final state (finalize,
cancel, deadline, ``--new``/``--fresh``)."""
