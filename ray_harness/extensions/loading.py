"""Loading extensions: ``use()`` in code, entry points named by ``RAY_HARNESS_EXTENSIONS``.

An extension is an ``install(registry, config)`` callable, found by name in the entry-point group
``ray_harness.extensions`` or passed directly. ``install`` registers contributors with
``registry.middlewares(contributor)``. The list of entry-point names a process uses (from the variable
and from ``use(name)``) is what the runtime forwards to the actors it starts, so every process that builds
agents loads the same extensions; in-code installs stay in their process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from ray_harness.extensions.types import ExtensionData, ExtensionError

__all__ = ("ENTRY_POINT_GROUP", "ENV_VAR", "Extension", "ExtensionHandle", "ExtensionRegistry", "adopt",
           "carried_names", "forwarded_names", "installed", "use")

ENTRY_POINT_GROUP = "ray_harness.extensions"
ENV_VAR = "RAY_HARNESS_EXTENSIONS"


@dataclass
class Extension:
    """One installed extension: its ``<use>`` name and the contributors its ``install`` registered."""

    use: str
    entry_point: bool
    contributors: list[Any] = field(default_factory=list)
    forwarded: bool = False
    """Installed because the process that calls this one uses it (its variable at start, or :func:`adopt`)."""
    install: Any = None
    """The ``install`` object and the ``config`` it got: the same pair is the same extension, however it was named."""
    config: Any = None
    handle: ExtensionHandle | None = field(default=None, repr=False)


class ExtensionRegistry:
    """What ``install(registry, config)`` receives."""

    def __init__(self, extension: Extension) -> None:
        self._extension = extension

    def middlewares(self, contributor: Any) -> None:
        """Register a contributor: an object with ``contribute_middlewares(app_store, ctx)``.

        Raises:
            TypeError: ``contributor`` has no callable ``contribute_middlewares``.
        """
        if not callable(getattr(contributor, "contribute_middlewares", None)):
            raise TypeError(f"extension {self._extension.use!r}: a middleware contributor needs a "
                            f"contribute_middlewares(app_store, ctx) method, got {contributor!r}")
        self._extension.contributors.append(contributor)


class ExtensionHandle:
    """Returned by :func:`use`; ``remove()`` uninstalls the extension from this process (idempotent)."""

    def __init__(self, extension: Extension) -> None:
        self.extension = extension

    @property
    def name(self) -> str:
        """The installed extension's ``use`` name."""
        return self.extension.use

    def remove(self) -> None:
        """Uninstall the extension from this process; calling it again does nothing."""
        with _lock:
            if self.extension in _installed:
                _installed.remove(self.extension)
            if _handles.get(self.extension.use) is self:
                _handles.pop(self.extension.use)

    def __repr__(self) -> str:
        return f"ExtensionHandle({self.extension.use!r})"


_lock = threading.RLock()
_installed: list[Extension] = []
_handles: dict[str, ExtensionHandle] = {}  # entry-point installs, by name
_env_loaded = False
_forwarding = False  # this process has (had) entry-point extensions: its calls to actors carry the list
app_store = ExtensionData()
"""The application-scoped store: one per process, passed to every ``contribute_middlewares``."""


def use(name_or_install: str | Callable[..., Any], config: Any = None) -> ExtensionHandle:
    """Install an extension in this process: an entry-point name or an ``install(registry, config)``.

    Using the same one twice is a no-op that returns the same handle: the same entry-point name, or the same
    ``install`` object with an equal ``config`` (also when one use names the entry point and the other passes its
    ``install``: an extension installed in code that is then used by name becomes that entry point). Distinct
    install objects are distinct extensions, even when they share a ``module:qualname`` (closures of one factory,
    lambdas), and so is one ``install`` with another config.

    Raises:
        ExtensionError: no entry point of that name in group ``ray_harness.extensions``, or its
            ``install`` raised (the message names the extension).
    """
    global _forwarding
    with _lock:
        if not _env_loaded:
            _load_env()  # the variable's extensions come first, as in every actor this process starts
        if isinstance(name_or_install, str):
            key = name_or_install.strip()
            if not key:
                raise ExtensionError("extension name must be a non-empty entry-point name")
            known = _handles.get(key)
            if known is not None:
                return known
            install = _load_entry_point(key)
            known = _same_install(install, config)
            if known is not None and not known.extension.entry_point:
                # installed in code before: it becomes this entry point (named by it, forwarded to actors)
                known.extension.use, known.extension.entry_point = key, True
                _handles[key] = known
                _forwarding = True
                return known
            return _install(key, install, config, entry_point=True)
        if not callable(name_or_install):
            raise TypeError(f"use() takes an entry-point name or an install(registry, config) callable, "
                            f"got {name_or_install!r}")
        known = _same_install(name_or_install, config)  # also an entry point's install: not a second copy
        if known is not None:
            return known
        return _install(_qualified_name(name_or_install), name_or_install, config, entry_point=False)


def _same_install(install: Callable[..., Any], config: Any) -> ExtensionHandle | None:
    """The handle of the installed extension made by this ``install`` object with an equal ``config``, if any.

    Another object (another closure of one factory, another lambda) or another config is another extension, even
    when its ``module:qualname`` is the same.
    """
    for extension in _installed:
        if extension.install is install and _same_config(extension.config, config):
            return extension.handle
    return None


def installed() -> list[Extension]:
    """The extensions of this process in load order (loads ``RAY_HARNESS_EXTENSIONS`` the first time)."""
    if not _env_loaded:
        _load_env()
    return _installed


def forwarded_names() -> list[str]:
    """Entry-point names to forward to actors: the variable's and ``use(name)``'s, in load order."""
    with _lock:
        if not _env_loaded:
            return _env_names()
        return [extension.use for extension in _installed if extension.entry_point]


def carried_names() -> list[str] | None:
    """Return the extension names each call to an actor carries (:mod:`ray_harness.telemetry.propagation`).

    That is :func:`forwarded_names`, or None while this process never had an entry-point extension (the call
    then carries nothing).

    Carried with every call, not only at actor start, so a ``use(name)`` or ``remove()`` in the driver reaches
    hosts and ``RemoteAgent`` actors that already exist: the chains they assemble afterwards match the driver's.
    """
    if not _forwarding and (_env_loaded or not _env_names()):
        return None
    return forwarded_names()


def adopt(names: list[str]) -> None:
    """Make this process's forwarded extensions the caller's ``names``.

    Installs the missing ones, in order, and removes those the caller no longer uses. Extensions this process
    installed itself stay.

    Raises:
        ExtensionError: a name has no entry point in this process's environment, or its install raised.
    """
    global _forwarding
    with _lock:
        if not _env_loaded:
            _load_env()
        _forwarding = True  # pass the caller's list on, even an empty one: a removal must reach further actors
        current = [extension.use for extension in _installed if extension.entry_point]
        if current == names:
            return
        for extension in list(_installed):
            if extension.entry_point and extension.forwarded and extension.use not in names:
                _handles[extension.use].remove()
        for name in names:
            if name not in _handles:
                own = {id(extension) for extension in _installed}
                extension = use(name).extension
                # one this process installed in code itself (now named by its entry point) is its own, and stays
                extension.forwarded = id(extension) not in own
        # the caller's load order decides registration order among entry points (in-code installs follow)
        rank = {name: index for index, name in enumerate(names)}
        _installed.sort(key=lambda extension: rank.get(extension.use, len(rank)) if extension.entry_point
                        else len(rank))


def _env_names() -> list[str]:
    return list(dict.fromkeys(item.strip() for item in os.environ.get(ENV_VAR, "").split(",") if item.strip()))


def _load_env() -> None:
    """Install the variable's extensions, all or none.

    A name that does not load raises here, and again at every later build (until the variable is fixed): a
    process never runs with part of the list it was configured with.
    """
    global _env_loaded
    with _lock:
        if _env_loaded:
            return
        _env_loaded = True  # the use() calls below must not load the variable again
        added: list[ExtensionHandle] = []
        try:
            for name in _env_names():
                new = name not in _handles
                handle = use(name)
                # in an actor the variable is the starting process's list (forwarded); in a driver it is its own
                handle.extension.forwarded = True
                if new:
                    added.append(handle)
        except BaseException:
            for handle in added:
                handle.remove()
            _env_loaded = False
            raise


def _load_entry_point(name: str) -> Callable[..., Any]:
    found = [point for point in metadata.entry_points(group=ENTRY_POINT_GROUP) if point.name == name]
    if not found:
        available = sorted({point.name for point in metadata.entry_points(group=ENTRY_POINT_GROUP)})
        raise ExtensionError(f"unknown extension {name!r}: no entry point of that name in group "
                             f"{ENTRY_POINT_GROUP!r} (installed: {', '.join(available) or 'none'})")
    try:
        loaded = found[0].load()
    except Exception as error:
        raise ExtensionError(f"extension {name!r} could not be imported ({found[0].value}): {error}") from error
    install = getattr(loaded, "install", loaded)  # the entry point may name the module or its install()
    if not callable(install):
        raise ExtensionError(f"extension {name!r}: entry point {found[0].value} is not an install(registry, config)")
    return install  # type: ignore[no-any-return]


def _install(key: str, install: Callable[..., Any], config: Any, *, entry_point: bool) -> ExtensionHandle:
    extension = Extension(key, entry_point, install=install, config=config)
    try:
        install(ExtensionRegistry(extension), config)
    except Exception as error:
        raise ExtensionError(f"extension {key!r} failed to install: {type(error).__name__}: {error}") from error
    global _forwarding
    _installed.append(extension)
    _forwarding = _forwarding or entry_point
    handle = extension.handle = ExtensionHandle(extension)
    if entry_point:
        _handles[key] = handle
    return handle


def _same_config(known: Any, config: Any) -> bool:
    if known is config:
        return True
    try:
        return bool(known == config)
    except Exception:  # an __eq__ that raises or is ambiguous: not the same config
        return False


def _qualified_name(install: Callable[..., Any]) -> str:
    module = getattr(install, "__module__", None) or type(install).__module__
    qualname = getattr(install, "__qualname__", None) or type(install).__qualname__
    return f"{module}:{qualname}"


def reset() -> None:
    """Uninstall every extension of this process and read ``RAY_HARNESS_EXTENSIONS`` again on next use (tests)."""
    global _env_loaded, _forwarding
    with _lock:
        _installed.clear()
        _handles.clear()
        _env_loaded = _forwarding = False
