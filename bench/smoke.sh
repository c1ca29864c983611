#!/usr/bin/env bash
# Runs every bench scenario tiny (go run ./bench -mode=short: small files,
# about a second each) to check that the harness, toolfs-api and the
# baselines work together. Timings are printed, never asserted; a wrong
# answer, an error under load or a server that fails to start exits non-zero.
# The MCP reference server is included when npm is present (npm ci in
# bench/mcp). Usage: bash bench/smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mcp=off
if command -v npm >/dev/null && command -v node >/dev/null; then
  (cd bench/mcp && timeout 300 npm ci --no-audit --no-fund --loglevel=error)
  mcp=on
fi
timeout 300 go run ./bench -mode=short -mcp="$mcp"
