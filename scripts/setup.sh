#!/usr/bin/env bash
# Install ray_harness with its test dependencies into the current Python (a venv if you use one).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e ".[dev]"
# The Strands SDK is only for the side-by-side benchmarks. Installed on its own, pinned: resolving it
# together with everything else sends pip backtracking through dozens of strands releases.
python3 -m pip install --quiet "strands-agents==1.62.0" "opentelemetry-exporter-prometheus<0.66b2" \
  "opentelemetry-exporter-otlp-proto-http<1.45.2" "opentelemetry-exporter-otlp-proto-grpc<1.45.2"
