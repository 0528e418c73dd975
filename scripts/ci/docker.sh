#!/usr/bin/env bash
# Docker engine for the sandbox tests: Debian's docker.io started in the background with no
# iptables and no bridge, its state under a temp dir, reachable on a unix socket; plus the busybox test image.
# Idempotent: a running engine from an earlier run is reused. Exports DOCKER_HOST and RAY_HARNESS_TEST_IMAGE.
set -euo pipefail
cd "$(dirname "$0")/../.."
ENV_FILE=/tmp/ray_harness_ci_env
DIR_FILE=/tmp/ray_harness_docker.dir
IMAGE=rh-busybox:test

if ! command -v dockerd >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io busybox-static
fi

R=""
if [ -f "$DIR_FILE" ]; then R=$(cat "$DIR_FILE"); fi
if [ -z "$R" ] || ! docker -H "unix://$R/docker.sock" version >/dev/null 2>&1; then
  R=$(mktemp -d /tmp/rh-docker.XXXXXX)
  mkdir -p "$R/docker-data" "$R/docker-exec"
  nohup /usr/sbin/dockerd --iptables=false --ip6tables=false --bridge=none \
    --data-root "$R/docker-data" --exec-root "$R/docker-exec" \
    -H "unix://$R/docker.sock" --pidfile "$R/dockerd.pid" > "$R/dockerd.log" 2>&1 &
  echo $! > "$R/dockerd.bgpid"
  echo "$R" > "$DIR_FILE"
  for _ in $(seq 1 600); do
    docker -H "unix://$R/docker.sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  docker -H "unix://$R/docker.sock" version >/dev/null || { cat "$R/dockerd.log" >&2; exit 1; }
fi
export DOCKER_HOST="unix://$R/docker.sock"
bash scripts/build_test_image.sh "$IMAGE"
touch "$ENV_FILE"
grep -v -e '^export DOCKER_HOST=' -e '^export RAY_HARNESS_TEST_IMAGE=' "$ENV_FILE" > "$ENV_FILE.tmp" || true
mv "$ENV_FILE.tmp" "$ENV_FILE"
echo "export DOCKER_HOST=$DOCKER_HOST" >> "$ENV_FILE"
echo "export RAY_HARNESS_TEST_IMAGE=$IMAGE" >> "$ENV_FILE"
echo "dockerd ready at $DOCKER_HOST (stop: kill \$(cat $R/dockerd.bgpid))"
