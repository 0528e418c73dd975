"""Bytes under string keys, for every part of an agent that keeps something (Strands' ``strands.storage``).

Example::

    from ray_harness.storage import InMemoryStorage, LocalFileStorage

    storage = LocalFileStorage("./.ray_harness/")
    await storage.write("sessions/abc/snapshot.json", data)
    notes = storage.namespace("notes")  # keys under notes/

Backends: :class:`InMemoryStorage` (this process), :class:`LocalFileStorage` (a directory, on this host or
through a sandbox), :class:`S3Storage` (a bucket; needs ``boto3``); implement :class:`Storage` for your own.
Search strategies are in :mod:`ray_harness.storage.search`; failures raise
:class:`~ray_harness.types.exceptions.StorageError`.
"""

from ray_harness.storage.in_memory_storage import InMemoryStorage
from ray_harness.storage.local_file_storage import LocalFileStorage
from ray_harness.storage.s3_storage import S3Storage
from ray_harness.storage.storage import Storage

__all__ = ("InMemoryStorage", "LocalFileStorage", "S3Storage", "Storage")
