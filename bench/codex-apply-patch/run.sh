#!/usr/bin/env bash
# Runs the apply_patch corpus (internal/handlers, TestPatchCorpus) through
# Codex's own applier beside ours and prints both tables (docs/edits.md,
# "Codex's applier beside ours"). The npm package @openai/codex ships the
# native codex binary, which applies a patch given as its one argument when
# it is started under the name apply_patch (codex-rs/arg0 dispatches on
# argv[0]). Skips cleanly, exit 0, when npm or the package is unavailable.
# Usage: bash bench/codex-apply-patch/run.sh [version]   (default: 0.171.0)
set -euo pipefail
version="${1:-0.171.0}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! command -v npm >/dev/null; then
	echo "skip: npm is not installed"
	exit 0
fi
if ! (cd "$work" && npm install --silent --no-audit --no-fund "@openai/codex@$version" >/dev/null 2>&1); then
	echo "skip: npm could not install @openai/codex@$version"
	exit 0
fi
bin="$(find "$work/node_modules/@openai" -path '*/vendor/*/bin/codex' -type f | head -1)"
if [ -z "$bin" ]; then
	echo "skip: no native codex binary for this platform in @openai/codex@$version"
	exit 0
fi
ln -s "$bin" "$work/apply_patch"
echo "Codex's applier: @openai/codex@$version ($("$bin" --version 2>/dev/null || true))"
cd "$repo"
TOOLFS_EDIT_CORPUS_REPORT=1 TOOLFS_CODEX_APPLY_PATCH="$work/apply_patch" \
	go test ./internal/handlers -run '^TestPatchCorpus$' -count=1 -v | grep -v '^=== RUN\|^--- PASS\|^PASS\|^ok'
