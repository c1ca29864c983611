// Measures, n times each, from spawning the binary to a tool list: over
// stdio (the TypeScript SDK v1's StdioClientTransport), and over HTTP (the
// binary on a loopback port, /healthz polled every 10 ms, then /mcp with
// StreamableHTTPClientTransport) as the baseline; prints the medians.
// Run: npm ci && node stdio-startup.mjs <toolfs-api binary> <root> 9
import { spawn } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { freePort } from "./harness.mjs";

const [bin, root, n = "9"] = process.argv.slice(2);
const med = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)].toFixed(0);
const stdio = [], http = [];
for (let i = 0; i < Number(n); i++) {
  let t0 = performance.now();
  const c = new Client({ name: "startup", version: "0" });
  await c.connect(new StdioClientTransport({ command: bin, args: ["--stdio", "--root", root], stderr: "ignore" }));
  await c.listTools();
  stdio.push(performance.now() - t0);
  await c.close();

  const port = await freePort();
  t0 = performance.now();
  const p = spawn(bin, ["--root", root, "--addr", `127.0.0.1:${port}`], { stdio: "ignore" });
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 10));
  }
  const h = new Client({ name: "startup", version: "0" });
  await h.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  await h.listTools();
  http.push(performance.now() - t0);
  await h.close();
  p.kill("SIGTERM");
}
console.log(JSON.stringify({ runs: Number(n), stdio_median_ms: Number(med(stdio)), http_median_ms: Number(med(http)) }));
