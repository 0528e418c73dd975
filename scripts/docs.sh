#!/usr/bin/env bash
# Build the documentation site with MkDocs in strict mode: a broken link, a missing page or an API reference
# that does not resolve fails the build. Usage: scripts/docs.sh [output dir] (default: site/, git-ignored).
# Needs the docs extra: pip install -e ".[docs]".
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-site}"
export NO_MKDOCS_2_WARNING=1   # Material's end-of-life banner is not a problem of these docs
python3 -m mkdocs build --strict --clean -d "$OUT"
echo "docs built in $OUT/index.html"
