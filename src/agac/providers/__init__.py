"""providers layer of agac (see docs/architecture.md)."""
