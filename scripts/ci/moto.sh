#!/usr/bin/env bash
# moto's S3 server for the S3SessionManager tests. The tests' session-scoped pytest fixture starts
# `moto_server -H 127.0.0.1 -p <free port>` itself; CI only needs the package (it is in the dev extra,
# so this normally does nothing).
set -euo pipefail
if ! python3 -c "import moto.server, flask" >/dev/null 2>&1; then
  python3 -m pip install --quiet 'moto[server]>=5.0'
fi
