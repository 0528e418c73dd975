#!/usr/bin/env bash
# The README's first command, run the way a newcomer runs it (CI does this before anything else):
#  1. a clean clone of the commit under test and a fresh venv with the interpreter's own pip (no upgrade):
#     `bash scripts/demo.sh` must exit 0 and print the evaluation summary;
#  2. the wheel built from that clone, installed into another fresh venv: `ray-harness demo` run from a
#     directory outside any checkout must work too (the demo dataset and py.typed must be in the wheel).
# Usage: scripts/newcomer.sh   (PYTHON selects the interpreter, default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
work=$(mktemp -d "${TMPDIR:-/tmp}/ray_harness_newcomer.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "newcomer check failed: $1" >&2
  [ -f "$2" ] && tail -n 40 "$2" >&2
  exit 1
}

# The demo prints "rows N  errors 0  tokens ..." and then where the results went.
check_summary() {
  grep -Eq '^rows [0-9]+  errors 0  tokens [1-9]' "$1" || fail "no evaluation summary in the output" "$1"
  grep -q '^summary: ' "$1" || fail "the demo did not say where its summary went" "$1"
}

git clone --quiet "$(pwd)" "$work/clone"
git -C "$work/clone" checkout --quiet --detach "$(git rev-parse HEAD)"

demo_flow() {
  "$PYTHON" -m venv "$work/venv"
  (
    # shellcheck disable=SC1091
    source "$work/venv/bin/activate"
    cd "$work/clone"
    bash scripts/demo.sh --rows 8
  ) >"$work/demo.log" 2>&1 || fail "bash scripts/demo.sh exited non-zero" "$work/demo.log"
  check_summary "$work/demo.log"
}

wheel_flow() {
  "$PYTHON" -m pip wheel --quiet --no-deps -w "$work/dist" "$work/clone" >"$work/wheel.log" 2>&1 \
    || fail "building the wheel failed" "$work/wheel.log"
  "$PYTHON" -m venv "$work/venv-wheel"
  "$work/venv-wheel/bin/python" -m pip install --quiet "$work"/dist/ray_harness-*.whl >"$work/install.log" 2>&1 \
    || fail "installing the wheel failed" "$work/install.log"
  mkdir -p "$work/elsewhere"
  (
    cd "$work/elsewhere"
    "$work/venv-wheel/bin/python" -c "
from importlib import resources
root = resources.files('ray_harness')
missing = [name for name in ('py.typed', 'demo_data/questions.jsonl') if not (root / name).is_file()]
assert not missing, f'missing from the wheel: {missing}'
assert 'site-packages' in str(root), root
"
    "$work/venv-wheel/bin/ray-harness" demo --rows 8
  ) >"$work/wheel-demo.log" 2>&1 || fail "ray-harness demo from the wheel exited non-zero" "$work/wheel-demo.log"
  check_summary "$work/wheel-demo.log"
}

# The two flows are independent (each its own venv, pip and embedded Ray): run them side by side.
echo "== newcomer: fresh venv with stock pip ($("$PYTHON" -m pip --version | cut -d' ' -f1-2)) + bash scripts/demo.sh;" \
     "the wheel in another fresh venv + ray-harness demo outside the checkout"
demo_flow & demo_pid=$!
wheel_flow & wheel_pid=$!
status=0
wait "$demo_pid" || status=1
wait "$wheel_pid" || status=1
[ "$status" = 0 ] || exit 1
echo "demo.sh:      $(grep -E '^rows ' "$work/demo.log")"
echo "wheel demo:   $(grep -E '^rows ' "$work/wheel-demo.log")"
echo "newcomer check passed"
