"""Alembic migrations of the store. Run by :func:`agac.store.database.upgrade`."""
