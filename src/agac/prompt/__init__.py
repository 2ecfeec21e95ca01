"""prompt layer of agac (see DESIGN.md §2)."""
