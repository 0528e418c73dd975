"""The test plugin packages (``tests/plugins/rh_test_plugin``, ``rh_probe_plugin``), pip-installed once.

``installed_test_plugin`` / ``installed_probe_plugin`` install one (non-editable, so the installed copy never
points into a checkout) when it is missing or differs from the source here, then yields its entry-point name. Ray workers use the
same interpreter, so actors find the plugin by its entry point too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

PLUGINS = Path(__file__).parent / "plugins"
PLUGIN_DIR = PLUGINS / "rh_test_plugin"
ENTRY_POINT = "rh_test_plugin"


def _installed_source(distribution_name: str, package: str) -> str | None:
    try:
        distribution = metadata.distribution(distribution_name)
    except metadata.PackageNotFoundError:
        return None
    for file in distribution.files or []:
        if str(file).replace("\\", "/") == f"{package}/__init__.py":
            return Path(str(file.locate())).read_text(encoding="utf-8")
    return None


def _ensure_installed(package: str, distribution_name: str) -> str:
    directory = PLUGINS / package
    source = (directory / package / "__init__.py").read_text(encoding="utf-8")
    if _installed_source(distribution_name, package) != source:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall",
                        str(directory)], check=True, capture_output=True)
        for leftover in ("build", f"{distribution_name.replace('-', '_')}.egg-info"):  # setuptools writes these
            shutil.rmtree(directory / leftover, ignore_errors=True)
        sys.modules.pop(package, None)
    assert _installed_source(distribution_name, package) == source, f"the test plugin {package} did not install"
    return package


@pytest.fixture(scope="session")
def installed_test_plugin() -> str:
    return _ensure_installed(ENTRY_POINT, "ray-harness-test-plugin")


@pytest.fixture(scope="session")
def installed_probe_plugin() -> str:
    """``tests/plugins/rh_probe_plugin``: probes and faults at every placement (see its docstring)."""
    return _ensure_installed("rh_probe_plugin", "ray-harness-probe-plugin")
