#!/usr/bin/env bash
# The test command (README): lint, type-check, then the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check ray_harness tests benchmarks examples
python3 -m mypy
python3 -m pytest -q "$@"
