#!/usr/bin/env bash
# Install ray_harness into the current Python and run the offline demo.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet -e .
python3 examples/demo.py
