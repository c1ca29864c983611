// What every end-to-end test here needs, once: a temporary folder, the
// real server (TOOLFS_BIN, or built from ../../cmd/toolfs-api) on a free
// loopback port, a page server on another origin, and Debian's headless
// Chromium through playwright-core. A server a test started is killed
// when the test process ends, however it ends.
import { spawn, execFile } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const pkg = path.resolve(here, "..");
export const repo = path.resolve(pkg, "../..");
export const artifacts = path.join(pkg, "artifacts");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

// freePort asks the kernel for an unused loopback port.
export async function freePort() {
  const s = net.createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// tempDir makes a fresh folder, its path resolved: the server shows paths
// as given, and /tmp may be a link.
export function tempDir(prefix) {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
}

// serverBinary is TOOLFS_BIN (ci.sh builds it once), else a build into dir.
export async function serverBinary(dir) {
  if (process.env.TOOLFS_BIN) return process.env.TOOLFS_BIN;
  const bin = path.join(dir, "toolfs-api");
  await promisify(execFile)("go", ["build", "-o", bin, "./cmd/toolfs-api"], {
    cwd: repo,
    timeout: 300_000,
    env: { ...process.env, GOFLAGS: `${process.env.GOFLAGS ?? ""} -buildvcs=false`.trim() },
  });
  return bin;
}

const live = new Set();
const killAll = () => { for (const p of live) p.kill("SIGKILL"); };
process.on("exit", killAll);
// A runner killed by a timeout still takes its servers with it.
for (const sig of ["SIGINT", "SIGTERM"]) process.once(sig, () => { killAll(); process.exit(1); });

// startServer runs bin with args on 127.0.0.1:port (a free one when not
// given), its output appended to dir/server.log, and waits until
// /healthz answers. stop() sends SIGTERM and waits for the exit
// (SIGKILL after 5 s).
export async function startServer(bin, { dir, args = [], port }) {
  port ??= await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const logPath = path.join(dir, "server.log");
  const fd = fs.openSync(logPath, "a");
  const proc = spawn(bin, [...args, "--addr", `127.0.0.1:${port}`], { stdio: ["ignore", fd, fd] });
  fs.closeSync(fd);
  live.add(proc);
  let exited = "";
  proc.on("exit", (code, sig) => { live.delete(proc); exited = sig ?? `code ${code}`; });
  const log = () => fs.readFileSync(logPath, "utf8").slice(-4000);
  const until = Date.now() + 15_000;
  for (;;) {
    if (exited) throw new Error(`server exited (${exited}) before it was healthy:\n${log()}`);
    try { if ((await fetch(`${origin}/healthz`)).ok) break; } catch { /* not up yet */ }
    if (Date.now() > until) throw new Error(`server not healthy after 15 s:\n${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const stop = async () => {
    if (exited) return;
    const gone = once(proc, "exit");
    proc.kill("SIGTERM");
    const t = setTimeout(() => proc.kill("SIGKILL"), 5_000);
    await gone;
    clearTimeout(t);
  };
  return { proc, port, origin, log, stop, exited: () => exited };
}

// serveStatic serves routes on its own origin: path → {body} or {file}
// (relative to the package), with its type; anything else is 404.
export async function serveStatic(routes) {
  const s = http.createServer((req, res) => {
    const r = routes[new URL(req.url, "http://x").pathname];
    if (!r) { res.writeHead(404).end(); return; }
    res.writeHead(200, { "Content-Type": r.type, "Cache-Control": "no-store" });
    if (r.body !== undefined) res.end(r.body);
    else fs.createReadStream(path.join(pkg, r.file)).pipe(res);
  }).listen(0, "127.0.0.1");
  await once(s, "listening");
  return {
    origin: `http://127.0.0.1:${s.address().port}`,
    close: () => { s.closeAllConnections(); s.close(); },
  };
}

// pageRoutes is a page that imports the built client from
// /toolfs-client.js.
export const pageRoutes = (html) => ({
  "/": { body: html, type: "text/html; charset=utf-8" },
  "/toolfs-client.js": { file: "dist/toolfs-client.js", type: "text/javascript; charset=utf-8" },
});

// launchChromium opens a headless Chromium with its profile in dir and
// returns the context and its first page.
export async function launchChromium(dir, viewport) {
  const { chromium } = await import("playwright-core");
  const ctx = await chromium.launchPersistentContext(path.join(dir, "profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport,
    timeout: 60_000,
  });
  return { ctx, page: ctx.pages()[0] ?? (await ctx.newPage()) };
}
