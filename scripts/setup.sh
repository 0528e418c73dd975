#!/usr/bin/env bash
# Install ray_harness with everything the tests, the side-by-side benchmarks and the docs need into the
# current Python (a venv if you use one). Uses the interpreter's own pip as it is: the declarations in
# pyproject.toml resolve with pip 23.x and current (CI checks the demo with a stock pip too).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet -e ".[dev,bench,docs]"
# The extension tests' plugin (entry point group ray_harness.extensions); the tests install it themselves
# when it is missing or stale (tests/plugin_fixture.py), this just saves them the build.
python3 -m pip install --quiet --no-deps tests/plugins/rh_test_plugin tests/plugins/rh_probe_plugin
rm -rf tests/plugins/*/build tests/plugins/*/*.egg-info
