"""Scale-out (``agac submit``, ``agac worker``): stateless worker processes on one
PostgreSQL claim shards of open runs, advance them with the same assembly ``agac run``
uses, share rate windows and budgets through the store, and finalize runs once."""
