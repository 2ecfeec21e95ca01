"""store layer of agac (see docs/architecture.md)."""
