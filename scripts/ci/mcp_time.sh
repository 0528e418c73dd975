#!/usr/bin/env bash
# The real MCP server of examples/mcp_tools.py, `mcp-server-time` from PyPI, in a venv of its own: its current
# releases need mcp>=2.2, while strands-agents (the bench extra, installed beside ray_harness) needs mcp<2.2, so
# the two cannot share one environment. Writes RAY_HARNESS_MCP_TIME_SERVER (the server's command) to the CI env.
set -euo pipefail
VENV="${RAY_HARNESS_MCP_TIME_VENV:-$HOME/.cache/ray_harness/mcp-time-venv}"
if ! "$VENV/bin/python" -c "import mcp_server_time" >/dev/null 2>&1; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet "mcp-server-time>=2026.10"
fi
"$VENV/bin/python" -c "import mcp_server_time"
ENV_FILE=/tmp/ray_harness_ci_env
touch "$ENV_FILE"
grep -v '^export RAY_HARNESS_MCP_TIME_SERVER=' "$ENV_FILE" > "$ENV_FILE.tmp" || true
mv "$ENV_FILE.tmp" "$ENV_FILE"
echo "export RAY_HARNESS_MCP_TIME_SERVER='$VENV/bin/python -m mcp_server_time'" >> "$ENV_FILE"
echo "mcp-server-time ready in $VENV"
