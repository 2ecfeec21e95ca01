"""Read-only views of workflows and runs, computed from the store: the §7.1 summary, the
plan of a run before it is sent (R5 estimates), rendered requests and record sessions."""
