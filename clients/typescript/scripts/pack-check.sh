#!/usr/bin/env bash
# Packs the client (npm pack, which builds it) and installs the tarball into
# a fresh project outside the repository, then type-checks a consumer that
# calls every method (pack-check/consumer.ts) under moduleResolution
# nodenext (a Node project, @types/node, no DOM) and bundler (a browser
# project, the DOM library), with skipLibCheck off so the package's own
# declarations are checked too; and imports the built package in Node.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tarball=$(npm pack --silent --pack-destination "$work" | tail -1)
echo "packed $tarball: $(tar tzf "$work/$tarball" | sed 's|^package/||' | sort | tr '\n' ' ')"

cd "$work"
npm init -y >/dev/null
npm pkg set type=module >/dev/null
timeout 300 npm install --no-audit --no-fund --loglevel=error \
  "./$tarball" typescript@5.9.3 @types/node@20.19.43
cp "$pkg/pack-check/consumer.ts" .

cat > tsconfig.nodenext.json <<'JSON'
{ "compilerOptions": { "target": "es2022", "module": "nodenext", "moduleResolution": "nodenext",
  "lib": ["es2022"], "types": ["node"], "strict": true, "noEmit": true, "skipLibCheck": false },
  "files": ["consumer.ts"] }
JSON
cat > tsconfig.bundler.json <<'JSON'
{ "compilerOptions": { "target": "es2022", "module": "esnext", "moduleResolution": "bundler",
  "lib": ["es2022", "dom", "dom.iterable"], "types": [], "strict": true, "noEmit": true, "skipLibCheck": false },
  "files": ["consumer.ts"] }
JSON
for mode in nodenext bundler; do
  echo "== type check of the installed package under moduleResolution $mode"
  timeout 300 npx --no-install tsc -p "tsconfig.$mode.json"
done

echo "== the installed package imports in Node and knows its version"
node --input-type=module -e '
import { createToolfsClient, VERSION } from "@toolfs/client";
import pkg from "@toolfs/client/package.json" with { type: "json" };
if (typeof createToolfsClient !== "function") throw new Error("no createToolfsClient");
if (VERSION !== pkg.version) throw new Error(`VERSION ${VERSION} != package.json ${pkg.version}`);
console.log(`@toolfs/client ${VERSION} imports`);
'
