"""``ContextOffloader``: oversized tool results stored block by block, a preview and references left in context.

Example::

    from ray_harness import Agent
    from ray_harness.vended_plugins.context_offloader import ContextOffloader, FileStorage, InMemoryStorage

    agent = Agent(plugins=[ContextOffloader(storage=InMemoryStorage())])
    agent = Agent(plugins=[ContextOffloader(storage=FileStorage("./artifacts"), max_result_tokens=5_000,
                                            preview_tokens=2_000)])

``storage=`` also takes a :mod:`ray_harness.storage` storage (``LocalFileStorage``, ...), as Strands' takes a
``strands.storage`` one: blocks then go under ``offloader/`` in it, evicted after ``evict_after_cycles`` cycles.

The agent gets the ``retrieve_offloaded_content`` tool to search (pattern), page (line_range) or fetch an
offloaded block back. The names and arguments are Strands' ``strands.vended_plugins.context_offloader``.
"""

from ray_harness.vended_plugins.context_offloader.plugin import ContextOffloader, ShouldOffload
from ray_harness.vended_plugins.context_offloader.storage import FileStorage, InMemoryStorage, S3Storage, Storage

__all__ = ("ContextOffloader", "FileStorage", "InMemoryStorage", "S3Storage", "ShouldOffload", "Storage")
