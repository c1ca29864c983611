#!/usr/bin/env bash
# The release configuration, run as a snapshot so it cannot rot
# (docs/running.md, "Releases"): goreleaser (built once from its Go module
# through the module proxy, cached by version) checks .goreleaser.yaml and
# builds the linux amd64 and arm64 archives and checksums.txt into dist/
# without publishing or building the image; then the README's install
# steps run against dist/ as if it were the release page, and the binary
# says its version. TOOLFS_GORELEASER names a goreleaser to use instead.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v2.17.0 # the newest goreleaser that builds with Go 1.26
goreleaser=${TOOLFS_GORELEASER:-}
if [ -z "$goreleaser" ]; then
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/toolfs-api/goreleaser-$version"
  if [ ! -x "$dir/goreleaser" ]; then
    echo "== building goreleaser $version (once)"
    GOFLAGS= GOBIN="$dir" timeout 3000 go install "github.com/goreleaser/goreleaser/v2@$version"
  fi
  goreleaser="$dir/goreleaser"
fi

echo "== goreleaser check"
"$goreleaser" check
echo "== goreleaser release --snapshot --clean --skip=publish,docker"
start=$SECONDS
GOFLAGS= timeout 1200 "$goreleaser" release --snapshot --clean --skip=publish,docker
echo "built in $((SECONDS - start))s"

echo "== the README's install steps against dist/"
v=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' dist/metadata.json | head -1)
test -n "$v"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for arch in amd64 arm64; do
  archive="toolfs-api_${v}_linux_$arch.tar.gz"
  grep -q " $archive\$" dist/checksums.txt || { echo "checksums.txt lacks $archive"; exit 1; }
  (cd dist && sha256sum -c --ignore-missing --quiet checksums.txt)
  mkdir "$work/$arch"
  tar xzf "dist/$archive" -C "$work/$arch" toolfs-api
done
got=$("$work/$(go env GOARCH)/toolfs-api" --version)
echo "toolfs-api --version: $got"
case "$got" in "toolfs-api v$v go"*" linux/$(go env GOARCH)") ;; *) echo "want toolfs-api v$v go... linux/$(go env GOARCH)"; exit 1 ;; esac
