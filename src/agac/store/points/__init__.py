"""Storage points (docs/guarantees.md, Storage points): a run's state in object storage or a directory.

The working copy is a local SQLite store; the point holds its durable copy — a snapshot
and an ordered log of WAL segments — and ``head``, the one object that names them and the
owner, replaced only by compare-and-swap (O1–O5). Modules, bottom up:

- ``objects``  where the objects live: obstore (S3, GCS, Azure) or a directory
- ``wal``      SQLite's WAL format: cutting at a commit, segments with checksums
- ``head``     the head object: owner, lease, snapshot, log
- ``restore``  a working copy from a snapshot and the log (O3)
- ``replica``  owning the point, shipping the log, compaction (O2, O4, O5)
- ``store``    :class:`PointStore`, the repository API on a working copy
"""

from __future__ import annotations

__all__ = ["POINT_SCHEMES", "is_point"]

POINT_SCHEMES = ("dir", "s3", "gs", "az", "azure", "abfs", "abfss")
"""The same as ``agac.config.project.POINT_SCHEMES`` (config reads ``store:``; the store
layer does not import config); a test keeps the two equal."""


def is_point(url: str) -> bool:
    """True for a storage point URL (``dir://``, ``s3://``, ``gs://``, ``az://``)."""
    return url.partition("://")[0].lower() in POINT_SCHEMES and "://" in url
