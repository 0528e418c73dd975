"""cloudpickle with a plain-dict dispatch table: the same bytes, without a Python call per pickled object.

cloudpickle's ``CloudPickler.dispatch_table`` is a ``ChainMap`` of its own reducers and ``copyreg``'s. The C
pickler looks every object's type up in it, and for a ``ChainMap`` each lookup is a Python call that usually
ends in ``KeyError``: about a third of the time it takes to pickle a 40-agent Graph. One dict merged the same
way (cloudpickle's entries win, as in the ``ChainMap``) is looked up in C. It is merged per pickler, from the
live maps, so reducers registered with ``copyreg`` later still apply. Every runtime module pickles and
unpickles through :func:`dumps` / :func:`loads` here (agent specs, shipped Graphs, row results and errors,
scorers).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from ray import cloudpickle as _cloudpickle

__all__ = ("FastPickler", "dispatch_table", "dumps", "dumps_plain", "loads")

_cloudpickle_module: Any = _cloudpickle
CloudPickler: Any = _cloudpickle_module.CloudPickler
_MAPS: list[dict[type, Any]] = list(reversed(CloudPickler.dispatch_table.maps))
"""cloudpickle's ``ChainMap`` of reducers (its own, then ``copyreg``'s), the last one first: the live dicts."""


def dispatch_table() -> dict[type, Any]:
    """The reducers of cloudpickle's ``ChainMap`` as one dict (an earlier map's entry wins, as there)."""
    merged: dict[type, Any] = {}
    for reducers in _MAPS:
        merged.update(reducers)
    return merged


class FastPickler(CloudPickler):  # type: ignore[misc]
    """A ``CloudPickler`` whose dispatch table is a plain dict (see the module docstring)."""

    def __init__(self, file: Any, protocol: int = pickle.HIGHEST_PROTOCOL) -> None:
        self.dispatch_table = dispatch_table()  # read by the C pickler's __init__
        super().__init__(file, protocol=protocol)


loads: Any = pickle.loads
"""cloudpickle's ``loads`` (it is the C unpickler's)."""


def dumps(value: Any) -> bytes:
    """``cloudpickle.dumps(value)`` (highest protocol), faster."""
    buffer = io.BytesIO()
    FastPickler(buffer).dump(value)
    return buffer.getvalue()


_ATOMS = (str, int, float, bool, bytes, type(None))
_PLAIN_DEPTH = 8


def dumps_plain(value: Any) -> bytes:
    """:func:`dumps` for a value that is usually plain data (an evaluation row's record fields).

    Plain data — ``dict``/``list``/``tuple`` of ``str``, numbers, ``bool``, ``bytes`` and ``None``, by exact type —
    has no reducer of cloudpickle's: the C pickler alone writes the same bytes, without a ``CloudPickler`` (its
    dispatch table merged, a Python ``reducer_override`` call per container) per value. Anything else is
    pickled by :func:`dumps`.
    """
    if _plain(value, _PLAIN_DEPTH):
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    return dumps(value)


def _plain(value: Any, depth: int) -> bool:
    # Loops rather than all() over generators: this check must cost less than the pickler it saves.
    kind = type(value)
    if kind in _ATOMS:
        return True
    if not depth:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) not in _ATOMS or (type(item) not in _ATOMS and not _plain(item, depth - 1)):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:  # noqa: SIM110 - see above
            if type(item) not in _ATOMS and not _plain(item, depth - 1):
                return False
        return True
    return False
