#!/usr/bin/env bash
# Builds the OpenTelemetry Collector with the OTLP receiver and the file
# exporter (the real OTLP receiver of the trace test, docs/running.md,
# "Traces") once and caches the binary, keyed by version; prints its path.
# Needs only Go and the module proxy: a throwaway module holding main.go.txt
# is built in a temporary folder, every collector module at one release.
# Concurrent runs wait on a lock; a finished build is reused.
set -euo pipefail
version="${TOOLFS_OTELCOL_VERSION:-v0.161.0}"
here=$(cd "$(dirname "$0")" && pwd)
cache="${TOOLFS_OTELCOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolfs-otelcol}/$version-$(sha256sum "$here/main.go.txt" | cut -c1-12)"
bin="$cache/otelcol"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
start=$(date +%s)
cp "$here/main.go.txt" "$tmp/main.go"
cd "$tmp"
go mod init toolfs.test/otelcol >/dev/null 2>&1
go get "go.opentelemetry.io/collector/otelcol@$version" \
  "go.opentelemetry.io/collector/receiver/otlpreceiver@$version" \
  "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter@$version" >&2
go mod tidy >&2
go build -trimpath -o "$bin.tmp" . >&2
mv "$bin.tmp" "$bin"
echo "build.sh: built otelcol $version in $(( $(date +%s) - start ))s" >&2
echo "$bin"
