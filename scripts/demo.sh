#!/usr/bin/env bash
# Install ray_harness into the current Python and run the demo: an evaluation of a 4-agent graph
# (researcher → two parallel analysts → writer) over a bundled dataset on an embedded local Ray,
# with an offline deterministic model (no API key). Pass options through, e.g. --model anthropic:<id>.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet -e .
python3 -m ray_harness.cli demo "$@"
