// A person approves an escalation in the client (docs/sandbox.md, "Approving
// in the client"): the official TypeScript SDK client with an elicitation
// handler, the server fenced read-only so every write escalates. On
// 2026-07-28 the escalation comes back as an input_required result whose
// sealed request state the client echoes on its retry; on 2025-11-25 as an
// elicitation request inside the MCP session. On one server, and on two
// replicas sharing one Redis with each request sent to the next replica
// (round robin, as nginx does).
// Run: npm ci && node --test elicit.test.mjs
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";
import { start, binary, freePort, TOKEN } from "./harness.mjs";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const auth = { Authorization: `Bearer ${TOKEN}` };
const fenced = ["--sandbox-mode", "read-only", "--approval-timeout", "30s"];
const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

// client connects the SDK with an elicitation handler that answers
// decision and records what the user was asked.
async function client(url, { auto, decision, fetch }) {
  const asked = [];
  const c = new Client({ name: "toolfs-elicit", version: "0.0.0" }, {
    capabilities: { elicitation: { form: {} } },
    ...(auto ? { versionNegotiation: { mode: "auto" } } : {}),
  });
  c.setRequestHandler("elicitation/create", async (request) => {
    asked.push(request.params);
    return { action: "accept", content: { decision } };
  });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth }, ...(fetch ? { fetch } : {}) });
  await c.connect(transport);
  cleanups.push(() => c.close());
  return { c, asked };
}

const escalated = (file, content) => ({ file_path: file, content, sandbox_permissions: "workspace-write", justification: "The user asked for it." });
const text = (res) => res.content.map((b) => b.text).join("");

for (const [name, auto, revision] of [["2026-07-28 (input_required)", true, "2026-07-28"], ["2025-11-25 (in the session)", false, "2025-11-25"]]) {
  test(`TypeScript SDK ${name}: approve runs the write, reject writes nothing`, async () => {
    const h = await start(fenced);
    cleanups.push(() => h.stop());
    for (const decision of ["approve", "reject"]) {
      const { c, asked } = await client(`${h.base}/mcp`, { auto, decision });
      assert.equal(c.getNegotiatedProtocolVersion(), revision);
      const file = `ts-${revision}-${decision}.txt`;
      const res = await c.callTool({ name: "write", arguments: escalated(file, "from the client\n") });
      assert.equal(asked.length, 1, "asked once");
      const abs = path.join(h.root, file);
      assert.equal(asked[0].mode, "form");
      assert.equal(asked[0].message,
        `toolfs-api asks for your approval.\nTool: write\nPath: ${abs}\nReason: escalate sandbox to workspace-write: The user asked for it.\n\n` +
        `--- ${abs}\n+++ ${abs}\n@@ -0,0 +1,1 @@\n+from the client`);
      assert.deepEqual(asked[0].requestedSchema.properties.decision.enum, ["approve", "reject"]);
      if (decision === "approve") {
        assert.ok(!res.isError, text(res));
        assert.equal(text(res), `<path>${abs}</path>\n<type>file</type>\n<content>\nCreated file\n</content>`);
        assert.equal(h.disk(file), "from the client\n");
      } else {
        assert.equal(res.isError, true);
        assert.equal(text(res), `Error: the user rejected escalating this operation to "workspace-write"`);
        assert.equal(fs.existsSync(abs), false);
      }
    }
    const metrics = await (await fetch(`${h.base}/metrics`, { headers: auth })).text();
    assert.match(metrics, /^toolfs_approvals_total\{decision="approve",via="elicitation"\} 1$/m);
    assert.match(metrics, /^toolfs_approvals_total\{decision="reject",via="elicitation"\} 1$/m);
  });
}

// redis starts a redis-server on a free port, in memory.
async function redis() {
  const port = await freePort();
  const r = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  cleanups.push(async () => { r.kill("SIGKILL"); });
  for (const until = Date.now() + 10000; Date.now() < until; await new Promise((res) => setTimeout(res, 100))) {
    try {
      const s = (await import("node:net")).createConnection(port, "127.0.0.1");
      await once(s, "connect");
      s.destroy();
      return `redis://127.0.0.1:${port}/0`;
    } catch { /* not up yet */ }
  }
  throw new Error("redis-server did not start");
}

test("TypeScript SDK 2026-07-28 across two replicas sharing Redis, round robin: asked on one, approved on the other", async () => {
  const store = await redis();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "toolfs-elicit-"));
  const root = fs.realpathSync(fs.mkdtempSync(path.join(tmp, "root-")));
  const bin = await binary(tmp);
  const ups = [];
  for (let i = 0; i < 2; i++) {
    const addr = `127.0.0.1:${await freePort()}`;
    const p = spawn(bin, ["--addr", addr, "--root", root, "--token", TOKEN, "--session-store", store, ...fenced], { stdio: "ignore" });
    cleanups.push(async () => { p.kill("SIGKILL"); });
    ups.push(`http://${addr}`);
  }
  for (const base of ups) {
    for (const until = Date.now() + 20000; ; await new Promise((r) => setTimeout(r, 100))) {
      try { if ((await fetch(`${base}/healthz`)).ok) break; } catch { /* not up yet */ }
      if (Date.now() > until) throw new Error(`${base} not healthy`);
    }
  }
  let n = 0;
  const served = [];
  const roundRobin = (input, init) => {
    const u = new URL(input instanceof Request ? input.url : String(input));
    const base = new URL(ups[n++ % ups.length]);
    u.host = base.host;
    served.push(base.host);
    return fetch(u, init);
  };
  const { c, asked } = await client(`${ups[0]}/mcp`, { auto: true, decision: "approve", fetch: roundRobin });
  assert.equal(c.getNegotiatedProtocolVersion(), "2026-07-28");
  const before = served.length;
  const res = await c.callTool({ name: "write", arguments: escalated("replicated.txt", "approved across replicas\n") });
  assert.ok(!res.isError, text(res));
  assert.equal(asked.length, 1);
  assert.equal(fs.readFileSync(path.join(root, "replicated.txt"), "utf8"), "approved across replicas\n");
  const legs = served.slice(before);
  assert.equal(legs.length, 2, "the call and its retry");
  assert.notEqual(legs[0], legs[1], "the retry reached the other replica");
  fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 3 });
});
