// The suite's server: the real toolfs-api binary built from ../../cmd/toolfs-api,
// serving a temporary root on a loopback port with a bearer token, reached
// through recording pass-through proxies, one per client. A proxy forwards
// every request and answer unchanged (streams included) and keeps, for each
// request to /mcp, the
// headers a client chose to send (MCP-Protocol-Version, Mcp-Session-Id,
// X-Session-ID) and the JSON-RPC methods in its body, so a test can say which
// protocol revision a client negotiated and whether it held an MCP session.
import { spawn, execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const TOKEN = "mcpclients-token-7e3a";

export async function freePort() {
  const s = net.createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

async function healthy(base) {
  for (const until = Date.now() + 20000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch { /* not up yet */ }
  }
  throw new Error(`${base} not healthy`);
}

// binary is the toolfs-api binary: TOOLFS_BIN, or one built into dir.
export async function binary(dir) {
  if (process.env.TOOLFS_BIN) return process.env.TOOLFS_BIN;
  const bin = path.join(dir, "toolfs-api");
  await promisify(execFile)("go", ["build", "-o", bin, "./cmd/toolfs-api"], { cwd: repo, timeout: 300000 });
  return bin;
}

// start builds the binary (unless TOOLFS_BIN names one) and serves a fresh
// root. extraArgs go to the server after --addr, --root and --token; port is
// the loopback port to listen on (a free one unless given: a test that must
// name the server's URL in its flags, as --public-url, picks it first).
export async function start(extraArgs = [], { port } = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "toolfs-mcpclients-"));
  const root = fs.realpathSync(fs.mkdtempSync(path.join(tmp, "root-")));
  const bin = await binary(tmp);
  const upstream = `127.0.0.1:${port ?? (await freePort())}`;
  const server = spawn(bin, ["--addr", upstream, "--root", root, "--token", TOKEN, ...extraArgs], { stdio: "ignore" });
  await healthy(`http://${upstream}`);

  const recorders = [];
  return {
    root,
    // base is the server's own URL, without a recorder in between.
    base: `http://${upstream}`,
    // recorder gives a client its own way in, so the requests it records are
    // that client's alone (a client may still be closing a stream when the
    // next one starts).
    async recorder() {
      const r = await recorder(upstream);
      recorders.push(r);
      return r;
    },
    // file writes name in the root and returns its absolute path.
    file(name, content) {
      const p = path.join(root, name);
      fs.writeFileSync(p, content);
      return p;
    },
    disk: (name) => fs.readFileSync(path.join(root, name), "utf8"),
    async stop() {
      for (const r of recorders) r.close();
      server.kill("SIGKILL");
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}

// recorder is a pass-through proxy to upstream (host:port) that records each
// request to /mcp.
async function recorder(upstream) {
  const requests = [];
  const [host, port] = upstream.split(":");
  const proxy = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (req.url.startsWith("/mcp")) {
        let rpc = [];
        try {
          const msg = JSON.parse(body.toString("utf8"));
          rpc = (Array.isArray(msg) ? msg : [msg]).map((m) => m.method ?? "(response)");
        } catch { /* a GET or DELETE has no body */ }
        requests.push({
          method: req.method,
          protocolVersion: req.headers["mcp-protocol-version"],
          mcpSessionId: req.headers["mcp-session-id"],
          sessionId: req.headers["x-session-id"],
          authorization: req.headers.authorization,
          rpc,
        });
      }
      const up = http.request({ host, port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode, ur.headers);
        ur.pipe(res);
      });
      up.on("error", () => res.destroy());
      res.on("close", () => up.destroy());
      up.end(body);
    });
  });
  proxy.listen(0, "127.0.0.1");
  await once(proxy, "listening");
  const base = `http://127.0.0.1:${proxy.address().port}`;
  return {
    base,
    url: `${base}/mcp`,
    requests,
    close() {
      proxy.closeAllConnections();
      proxy.close();
    },
  };
}

// What the model sees, byte for byte (docs/api.md; SPEC §4 and §13).
export const texts = {
  read: (abs, lines) =>
    `<path>${abs}</path>\n<type>file</type>\n<content>\n` +
    lines.map((l, i) => `${i + 1}: ${l}\n`).join("") +
    `\n(End of file - total ${lines.length} lines)\n</content>`,
  edited: (abs) => `The file ${abs} has been updated successfully.`,
  batch: (abs, n) => `The file ${abs} has been updated successfully. Applied ${n} edits.`,
  notObserved: (abs) => `Error: edit requires reading "${abs}" first — read the file, then retry`,
};

// revisions lists, in order, the distinct MCP-Protocol-Version headers of the
// recorded requests, and sessions the distinct Mcp-Session-Id headers.
export function summary(requests) {
  const uniq = (xs) => [...new Set(xs.filter((x) => x !== undefined))];
  return {
    revisions: uniq(requests.map((r) => r.protocolVersion)),
    mcpSessions: uniq(requests.map((r) => r.mcpSessionId)),
    sessionHeaders: uniq(requests.map((r) => r.sessionId)),
    rpc: requests.flatMap((r) => r.rpc),
  };
}
