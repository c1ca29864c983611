#!/usr/bin/env bash
# Checks deploy/monitoring in CI (docs/running.md, "Dashboard and alerts"):
# promtool (built once from its Go module through the module proxy, cached
# by version) checks and unit-tests the alert rules, then the Go tests hold
# every series the rules and the dashboard name to what /metrics exports,
# check the dashboard's structure and parse each of its queries with
# promtool. TOOLFS_PROMTOOL names a promtool to use instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=v0.316.0 # github.com/prometheus/prometheus: Prometheus 3.x's promtool
promtool=${TOOLFS_PROMTOOL:-}
if [ -z "$promtool" ]; then
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/toolfs-api/promtool-$version"
  if [ ! -x "$dir/promtool" ]; then
    echo "== building promtool $version (once)"
    GOFLAGS= GOBIN="$dir" timeout 3000 go install "github.com/prometheus/prometheus/cmd/promtool@$version"
  fi
  promtool="$dir/promtool"
fi
echo "== promtool check rules"
"$promtool" check rules deploy/monitoring/alerts.yaml
echo "== promtool test rules"
(cd deploy/monitoring && "$promtool" test rules alerts_test.yaml)
echo "== the series named exist, the dashboard is well formed and its queries parse"
TOOLFS_PROMTOOL="$promtool" timeout 600 go test -count=1 -run 'TestMonitoringNamesExportedSeries|TestGrafanaDashboardWellFormed' ./internal/server/
