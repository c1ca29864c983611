// Bundles the client (dist/toolfs-client.js) and the e2e page script
// (dist/page.js) into browser-loadable ES modules.
import { build } from "esbuild";

const common = { bundle: true, format: "esm", target: "es2022", sourcemap: true, logLevel: "warning" };
await build({ ...common, entryPoints: ["src/index.ts"], outfile: "dist/toolfs-client.js", platform: "neutral" });
await build({ ...common, entryPoints: ["e2e/page.ts"], outfile: "dist/page.js", platform: "browser" });
