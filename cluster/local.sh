#!/usr/bin/env bash
# A multi-node Ray cluster on one machine: a head and N workers, each a separate `ray start`
# with its own ports and a custom resource (node0, node1, ...) to pin work to a node.
#
#   cluster/local.sh up [N]     start a head and N worker nodes (default 2)
#   cluster/local.sh down       stop the nodes this script started (and only those)
#   cluster/local.sh status     `ray status` against the head
#
# Token authentication stays on (Ray's default): the script exports RAY_AUTH_MODE=token so the
# workers and drivers can join; a remote driver needs the token from `ray get-auth-token`.
# The dashboard binds to 127.0.0.1 only. On one machine this shows overhead, not speedup.
set -euo pipefail

STATE_DIR="${RAY_HARNESS_CLUSTER_DIR:-${TMPDIR:-/tmp}/ray_harness_local_cluster}"
HEAD_PORT="${RAY_HARNESS_HEAD_PORT:-6390}"
DASHBOARD_PORT="${RAY_HARNESS_DASHBOARD_PORT:-8265}"
CPUS_PER_NODE="${RAY_HARNESS_CPUS_PER_NODE:-1}"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"

if ! command -v ray >/dev/null 2>&1; then
  ray() { python3 -m ray.scripts.scripts "$@"; }  # the CLI without its console script on PATH
fi

node_temp() { echo "$STATE_DIR/node$1"; }

# Every node runs its own dashboard agent, metrics exporter and runtime-env agent; on one machine they
# need distinct ports (Ray's fixed defaults would collide, and then jobs find "no available agent").
agent_ports() {
  local base=$((30000 + (HEAD_PORT % 500) * 8 + $1 * 2))
  echo "--dashboard-agent-listen-port=$base --dashboard-agent-grpc-port=$((base + 5000))" \
       "--metrics-export-port=$((base + 10000)) --runtime-env-agent-port=$((base + 15000))"
}

up() {
  local workers="${1:-2}"
  mkdir -p "$STATE_DIR"
  chmod 700 "$STATE_DIR"
  if [ -f "$STATE_DIR/address" ]; then
    echo "a local cluster is already up at $(cat "$STATE_DIR/address"); run '$0 down' first" >&2
    exit 1
  fi
  # Each node gets its own temp dir so `down` can stop exactly the processes it started.
  ray start --head --port="$HEAD_PORT" --num-cpus="$CPUS_PER_NODE" --resources='{"node0": 1}' \
    --dashboard-host=127.0.0.1 --dashboard-port="$DASHBOARD_PORT" --include-dashboard=true \
    $(agent_ports 0) --temp-dir="$(node_temp 0)" --disable-usage-stats >"$STATE_DIR/node0.log" 2>&1
  echo "127.0.0.1:$HEAD_PORT" >"$STATE_DIR/address"
  for i in $(seq 1 "$workers"); do
    ray start --address="127.0.0.1:$HEAD_PORT" --num-cpus="$CPUS_PER_NODE" --resources="{\"node$i\": 1}" \
      --min-worker-port=$((20000 + i * 1000)) --max-worker-port=$((20000 + i * 1000 + 999)) $(agent_ports "$i") \
      --disable-usage-stats >"$STATE_DIR/node$i.log" 2>&1
  done
  echo "$workers" >"$STATE_DIR/workers"
  echo "head: 127.0.0.1:$HEAD_PORT  dashboard: http://127.0.0.1:$DASHBOARD_PORT  workers: $workers"
  echo "drivers: export RAY_ADDRESS=127.0.0.1:$HEAD_PORT RAY_AUTH_MODE=token"
}

down() {
  if [ ! -f "$STATE_DIR/address" ]; then
    echo "no local cluster recorded in $STATE_DIR"
    return 0
  fi
  # Stop only the raylets/GCS of this cluster: their command lines carry our temp dir or head port.
  local pids
  pids=$(pgrep -f -- "$STATE_DIR|--address=[^ ]*:$HEAD_PORT( |$)|gcs_server.*--gcs_server_port=$HEAD_PORT" || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    sleep 2
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
  fi
  rm -f "$STATE_DIR/address" "$STATE_DIR/workers"
  echo "local cluster stopped"
}

case "${1:-}" in
  up) up "${2:-2}" ;;
  down) down ;;
  status) RAY_ADDRESS="$(cat "$STATE_DIR/address")" ray status ;;
  *) echo "usage: $0 up [N] | down | status" >&2; exit 2 ;;
esac
