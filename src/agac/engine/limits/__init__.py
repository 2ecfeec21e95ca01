"""Budget and limits: what a run may spend and how fast it may send — the budget guard
(R5: worst-case reservations, settled to actual usage), concurrency slots, the RPM/TPM
sliding window and retry backoff."""
