"""The ``ray-harness`` command line.

Commands: ``demo``, ``run``, ``eval``, ``submit``, ``jobs``, ``dashboard``, ``status``, ``cancel``, ``serve``;
each in a module of this package named for it (:mod:`._evaluate` holds ``demo`` and ``eval``, :mod:`._jobs`
``submit`` and ``jobs``), put together by :mod:`._app`. ``python -m ray_harness.cli`` runs it too.

User mistakes (a bad target, a missing file, a bad option) and no cluster to connect to print one ``error:``
line and exit 2; a failed evaluation (a row failed in its target or a scorer), an evaluation stopped by
``ray-harness cancel``, a failed job, or a ``cancel`` that cancelled nothing exits 1.
"""

from __future__ import annotations

from ray_harness.cli._app import main

__all__ = ["main"]
