#!/usr/bin/env bash
# CI for clients/typescript on a fresh Debian machine: installs Chromium (apt)
# and the npm dependencies (npm ci), checks that src/schema.d.ts matches
# ../../api/openapi.yaml, type-checks, builds, checks the packed package in a
# fresh project (scripts/pack-check.sh), then runs the unit tests and the
# end-to-end test in headless Chromium against the real Go server.
# Every step is bounded by `timeout`, which signals the step's whole process
# group (the test runner, its test processes and the server they started).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v node >/dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "clients/typescript needs Node >= 20 and npm on PATH"; exit 1
fi

if [ ! -x /usr/bin/chromium ]; then
  echo "== apt-get install chromium"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 apt-get update -qq
  timeout 900 apt-get install -y -qq chromium >/dev/null
fi
echo "== $(/usr/bin/chromium --version 2>/dev/null)"

echo "== npm ci"
timeout 600 npm ci --no-audit --no-fund

echo "== generated types are fresh"
timeout 120 npm run -s check-generated

echo "== type check"
timeout 300 npx --no-install tsc --noEmit -p .

echo "== build"
timeout 120 npm run -s build

echo "== the packed package, installed into a fresh project, type-checked under nodenext and bundler"
timeout 600 bash scripts/pack-check.sh

echo "== the server, built once for every test"
bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
(cd ../.. && GOFLAGS="${GOFLAGS:-} -buildvcs=false" timeout 300 go build -o "$bin_dir/toolfs-api" ./cmd/toolfs-api)
export TOOLFS_BIN="$bin_dir/toolfs-api"

echo "== tests (unit + e2e in headless Chromium)"
timeout -k 15 900 node --test --test-timeout=180000 test/
