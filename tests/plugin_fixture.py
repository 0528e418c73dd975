"""The test plugin package (``tests/plugins/rh_test_plugin``), pip-installed into this interpreter once.

``installed_test_plugin`` installs it (non-editable, so the installed copy never points into a checkout)
when it is missing or differs from the source here, then yields its entry-point name. Ray workers use the
same interpreter, so actors find the plugin by its entry point too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).parent / "plugins" / "rh_test_plugin"
ENTRY_POINT = "rh_test_plugin"


def _installed_source() -> str | None:
    try:
        distribution = metadata.distribution("ray-harness-test-plugin")
    except metadata.PackageNotFoundError:
        return None
    for file in distribution.files or []:
        if str(file).replace("\\", "/") == "rh_test_plugin/__init__.py":
            return Path(str(file.locate())).read_text(encoding="utf-8")
    return None


@pytest.fixture(scope="session")
def installed_test_plugin() -> str:
    source = (PLUGIN_DIR / "rh_test_plugin" / "__init__.py").read_text(encoding="utf-8")
    if _installed_source() != source:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall",
                        str(PLUGIN_DIR)], check=True, capture_output=True)
        for leftover in ("build", "ray_harness_test_plugin.egg-info"):  # setuptools writes these in the source
            shutil.rmtree(PLUGIN_DIR / leftover, ignore_errors=True)
        sys.modules.pop("rh_test_plugin", None)
    assert _installed_source() == source, "the test plugin did not install"
    return ENTRY_POINT
