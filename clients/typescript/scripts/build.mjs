// Builds the package (dist/index.js with its declarations, by tsc under
// nodenext resolution, and the generated dist/schema.d.ts, which tsc does
// not copy), a self-contained browser bundle (dist/toolfs-client.js, also
// `@toolfs/client/browser`), and the e2e page script (dist/page.js).
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import fs from "node:fs";

fs.rmSync("dist", { recursive: true, force: true });
execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" });
fs.copyFileSync("src/schema.d.ts", "dist/schema.d.ts");
const common = { bundle: true, format: "esm", target: "es2022", sourcemap: true, logLevel: "warning" };
await build({ ...common, entryPoints: ["src/index.ts"], outfile: "dist/toolfs-client.js", platform: "neutral" });
await build({ ...common, entryPoints: ["e2e/page.ts"], outfile: "dist/page.js", platform: "browser" });
