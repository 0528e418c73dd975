#!/usr/bin/env bash
# Install ray_harness with its test dependencies into the current Python (a venv if you use one).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e ".[dev,bench]"
