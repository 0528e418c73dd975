"""Extraction: when (triggers) and how (extractors) conversation messages become memory entries.

The public names are exported from :mod:`ray_harness.memory`; the modules here hold them.
"""
