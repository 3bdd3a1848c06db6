#!/usr/bin/env bash
# Installs the pinned LanceDB (package.json and package-lock.json here) into
# a folder outside the repository (default /tmp/ragstore-npm), where
# `go run ./bench/ragstore -npm DIR` finds it. Node 20 works (LanceDB
# declares 22 and installs with a warning).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
W=${1:-/tmp/ragstore-npm}
mkdir -p "$W"
if cmp -s "$here/package-lock.json" "$W/package-lock.json" && [ -d "$W/node_modules/@lancedb/lancedb-linux-x64-gnu" ]; then
  echo "LanceDB already installed in $W" >&2; exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$W/"
# the linux-x64-gnu binary is a direct dependency, so --omit=optional drops
# only LanceDB's embedding extras, not its native code
(cd "$W" && npm ci --omit=optional --no-audit --no-fund >&2)
echo "LanceDB $(node -p "require('$W/node_modules/@lancedb/lancedb/package.json').version") installed in $W" >&2
