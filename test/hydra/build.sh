#!/usr/bin/env bash
# Builds Ory Hydra (the authorization server the identity tests run against,
# docs/identity.md) once and caches the binary, keyed by version; prints its
# path. Needs only Go and the module proxy: hydra's module is downloaded,
# copied to a writable folder (its go.mod's replace directives only apply
# when it is the main module), and built there with SQLite in memory.
# Concurrent runs wait on a lock; a finished build is reused.
set -euo pipefail
version="${TOOLFS_HYDRA_VERSION:-v2.3.0}"
cache="${TOOLFS_HYDRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolfs-hydra}/$version"
bin="$cache/hydra"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
start=$(date +%s)
dir=$(cd "$tmp" && go mod download -json "github.com/ory/hydra/v2@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then echo "build.sh: go mod download of hydra $version failed" >&2; exit 1; fi
cp -r "$dir" "$tmp/src"
chmod -R u+w "$tmp/src"
cd "$tmp/src"
go mod edit -dropreplace github.com/ory/hydra-client-go/v2
go build -mod=mod -trimpath -tags sqlite,sqlite_omit_load_extension -o "$bin.tmp" . >&2
mv "$bin.tmp" "$bin"
echo "build.sh: built hydra $version in $(( $(date +%s) - start ))s" >&2
echo "$bin"
