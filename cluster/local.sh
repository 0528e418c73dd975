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
# A node whose `ray start` failed and that then did not register (its raylet gone, or RAY_HARNESS_NODE_GRACE_S
# more seconds passed) is stopped - only its own processes - and started again, up to this many starts in all.
ATTEMPTS="${RAY_HARNESS_NODE_ATTEMPTS:-3}"
GRACE_S="${RAY_HARNESS_NODE_GRACE_S:-30}"
tries=() failed_at=() gave_up=()

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

# The processes of node $1 (its raylet, agents and workers; the head's GCS and dashboard too): their command
# lines carry the node's temp dir. Other Ray instances on this machine are never touched.
node_pids() { pgrep -f -- "$(node_temp "$1")(/|[[:space:]]|\$)" || true; }
raylet_alive() { pgrep -f -- "raylet/raylet .*$(node_temp "$1")/" >/dev/null; }

stop_node() {
  local pids
  pids=$(node_pids "$1")
  if [ "$1" = 0 ]; then  # the head's Ray client server carries only the head port (no worker node exists yet)
    pids="$pids $(pgrep -f -- "--address=[^ ]*:$HEAD_PORT( |$)|gcs_server.*--gcs_server_port=$HEAD_PORT" || true)"
  fi
  [ -n "${pids// /}" ] || return 0
  # shellcheck disable=SC2086
  kill $pids 2>/dev/null || true
  sleep 2
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null || true
}

# `ray start` of node $1 (0: the head); every attempt appends to node$1.log.
start_node() {
  local i=$1 log="$STATE_DIR/node$1.log"
  tries[i]=$((${tries[i]:-0} + 1))
  echo "=== cluster/local.sh: attempt ${tries[i]} of $ATTEMPTS ===" >>"$log"
  if [ "$i" = 0 ]; then
    ray start --head --port="$HEAD_PORT" --num-cpus="$CPUS_PER_NODE" --resources='{"node0": 1}' \
      --dashboard-host=127.0.0.1 --dashboard-port="$DASHBOARD_PORT" --include-dashboard=true \
      $(agent_ports 0) --temp-dir="$(node_temp 0)" --disable-usage-stats >>"$log" 2>&1
  else
    ray start --address="127.0.0.1:$HEAD_PORT" --num-cpus="$CPUS_PER_NODE" --resources="{\"node$i\": 1}" \
      --min-worker-port=$((20000 + i * 1000)) --max-worker-port=$((20000 + i * 1000 + 999)) $(agent_ports "$i") \
      --temp-dir="$(node_temp "$i")" --disable-usage-stats >>"$log" 2>&1
  fi && { unset 'failed_at[i]'; return 0; }
  failed_at[i]=$SECONDS
  echo "node$i: 'ray start' failed (attempt ${tries[i]} of $ATTEMPTS, see $log); waiting for it to register" >&2
}

# Node $1 has not registered: start it again (at most ATTEMPTS starts in all) when it will not register by itself
# — its raylet is gone, or its `ray start` failed and GRACE_S more seconds did not bring it.
restart_if_stuck() {
  local i=$1 why
  if ! raylet_alive "$i"; then
    why="its raylet is not running"
  elif [ -n "${failed_at[i]:-}" ] && [ $((SECONDS - failed_at[i])) -ge "$GRACE_S" ]; then
    why="it did not register within ${GRACE_S}s of its failed 'ray start'"
  else
    return 0
  fi
  if [ "${tries[i]}" -ge "$ATTEMPTS" ] || [ $((DEADLINE - SECONDS)) -lt 45 ]; then
    [ "${gave_up[i]:-}" ] || echo "node$i: $why; not starting it again (${tries[i]} attempts)" >&2
    gave_up[i]=1
    if ! raylet_alive "$i"; then
      echo "node$i did not start (see $STATE_DIR/node$i.log); '$0 down' cleans up" >&2
      exit 1
    fi
    return 0
  fi
  echo "node$i: $why; stopping its processes and starting it again" >&2
  stop_node "$i"
  start_node "$i" || true
}

up() {
  local workers="${1:-2}"
  mkdir -p "$STATE_DIR"
  chmod 700 "$STATE_DIR"
  if [ -f "$STATE_DIR/address" ]; then
    echo "a local cluster is already up at $(cat "$STATE_DIR/address"); run '$0 down' first" >&2
    exit 1
  fi
  # `ray start --head` with token auth needs a token to exist already (~/.ray/auth_token or RAY_AUTH_TOKEN*).
  if [ "$RAY_AUTH_MODE" = token ]; then
    ray get-auth-token --generate >/dev/null 2>&1 || echo "could not make sure a Ray auth token exists" >&2
  fi
  # All of `up` (every node's start and restarts) has RAY_HARNESS_NODE_WAIT_S (180) seconds.
  DEADLINE=$((SECONDS + ${RAY_HARNESS_NODE_WAIT_S:-180}))
  # Each node gets its own temp dir: so `down` can stop exactly the processes it started, and so the nodes'
  # runtime-env agents do not share one runtime_resources dir. Sharing it (a worker without --temp-dir uses
  # the head's session dir) broke the first job of every cluster: when the job's driver connects, each other
  # node installs the job's working_dir eagerly and, finding it not in its own cache, deletes and re-extracts
  # the directory the driver runs in (its cwd then no longer exists: "No module named ...", "file ... does
  # not exist"). A temp dir outside /tmp/ray also means this cluster writes no /tmp/ray/ray_current_cluster,
  # so a plain ray.init() elsewhere on the machine starts its own Ray instead of joining this one.
  start_node 0 || true
  echo "127.0.0.1:$HEAD_PORT" >"$STATE_DIR/address"
  echo "$workers" >"$STATE_DIR/workers"
  # `ray start` gives a node 30 s (fixed) to register with the GCS; on a loaded machine it can take longer,
  # and the node's processes keep starting after `ray start` gave up: wait_for_nodes decides, for the head too,
  # and starts a node again whose start will not finish by itself (restart_if_stuck).
  wait_for_nodes 0 0
  for i in $(seq 1 "$workers"); do
    start_node "$i" || true
  done
  wait_for_nodes 1 "$workers"
  echo "head: 127.0.0.1:$HEAD_PORT  dashboard: http://127.0.0.1:$DASHBOARD_PORT  workers: $workers"
  echo "drivers: export RAY_ADDRESS=127.0.0.1:$HEAD_PORT RAY_AUTH_MODE=token"
}

# Until `ray status` shows the custom resource of nodes $1..$2 (node0 is the head), or DEADLINE.
wait_for_nodes() {
  local shown i missing
  while :; do
    shown=$(ray status --address="127.0.0.1:$HEAD_PORT" 2>/dev/null || true)
    missing=""
    for i in $(seq "$1" "$2"); do
      grep -Eq "[0-9.]+/[0-9.]+ node$i\b" <<<"$shown" && continue
      missing="$missing node$i"
      # A worker's registration can only be seen through the head: judge workers only when the head answered.
      if [ "$i" = 0 ] || [ -n "$shown" ]; then restart_if_stuck "$i"; fi
    done
    [ -z "$missing" ] && return 0
    if [ "$SECONDS" -ge "$DEADLINE" ]; then
      echo "node(s)$missing did not register with the head at 127.0.0.1:$HEAD_PORT; '$0 down' cleans up" >&2
      exit 1
    fi
    sleep 2
  done
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
