#!/usr/bin/env bash
# The reliability suite at full strength: fault injection (kill -9 of agents, hosts, graph nodes,
# sandboxes and a whole node), hypothesis fuzzing, load and the sandbox injection suite.
# CI runs the same tests with the default sizes as part of the normal test command.
#   RAY_HARNESS_FAULT_KILLS   kills per fault-injection test (default 10)
#   RAY_HARNESS_FUZZ_EXAMPLES examples per fuzzed property (default 1000)
#   RAY_HARNESS_LOAD_INVOCATIONS concurrent invocations in the load test (default 500)
set -euo pipefail
cd "$(dirname "$0")/.."
export RAY_HARNESS_FAULT_KILLS="${RAY_HARNESS_FAULT_KILLS:-20}"
export RAY_HARNESS_FUZZ_EXAMPLES="${RAY_HARNESS_FUZZ_EXAMPLES:-2000}"
export RAY_HARNESS_LOAD_INVOCATIONS="${RAY_HARNESS_LOAD_INVOCATIONS:-1000}"
python3 -m pytest -q -m reliability "$@"
