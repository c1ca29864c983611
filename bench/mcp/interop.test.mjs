// Interoperability: the official TypeScript MCP SDK client (pinned in
// package-lock.json) against toolfs-api's /mcp (docs/mcp.md). Builds the
// real server from ../../cmd/toolfs-api, serves a temporary root on a
// loopback port with a token, and checks the tool list against GET /tools,
// a read and an edit in one MCP session with no session header, the error
// of a second MCP session against the REST problem's output, and the token.
// Run: npm ci && node --test interop.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const TOKEN = "interop-token-5c1d";
let tmp, root, server, base;

async function freePort() {
  const s = net.createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "toolfs-mcp-interop-"));
  root = fs.realpathSync(fs.mkdtempSync(path.join(tmp, "root-")));
  const bin = path.join(tmp, "toolfs-api");
  await promisify(execFile)("go", ["build", "-o", bin, "./cmd/toolfs-api"], { cwd: repo, timeout: 300000 });
  base = `http://127.0.0.1:${await freePort()}`;
  server = spawn(bin, ["--addr", base.slice("http://".length), "--root", root, "--token", TOKEN], { stdio: "ignore" });
  for (const until = Date.now() + 20000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch { /* not up yet */ }
  }
  throw new Error("server not healthy");
});

after(() => {
  server?.kill("SIGKILL");
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function connect(headers = { Authorization: `Bearer ${TOKEN}` }) {
  const client = new Client({ name: "toolfs-interop", version: "0.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } });
  await client.connect(transport);
  return { client, transport };
}

async function rest(tool, args, session) {
  const res = await fetch(`${base}/tools/${tool}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json", "X-Session-ID": session },
    body: JSON.stringify(args),
  });
  return { status: res.status, ...(await res.json()) };
}

const only = (result) => {
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, "text");
  return result.content[0].text;
};

test("tools/list is the catalog", async () => {
  const { client, transport } = await connect();
  try {
    assert.equal(transport.protocolVersion, "2025-11-25");
    assert.ok(transport.sessionId, "a stateful MCP session");
    const catalog = await (await fetch(`${base}/tools`, { headers: { Authorization: `Bearer ${TOKEN}` } })).json();
    const { tools: listed } = await client.listTools();
    // The checkpoint tools follow the catalog's over MCP (extended profile; docs/checkpoints.md).
    assert.deepEqual(listed.map((t) => t.name).slice(catalog.tools.length), ["changes", "revert"]);
    const tools = listed.slice(0, catalog.tools.length);
    assert.deepEqual(tools.map((t) => t.name), catalog.tools.map((t) => t.name));
    assert.deepEqual(tools.map((t) => t.name).slice(0, 3), ["read", "write", "edit"]);
    tools.forEach((t, i) => {
      assert.equal(t.description, catalog.tools[i].description);
      assert.deepEqual(t.inputSchema, catalog.tools[i].parameters);
    });
    assert.deepEqual(tools[0].annotations, { readOnlyHint: true, idempotentHint: false, openWorldHint: false });
    assert.deepEqual(tools[2].annotations, { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false });
    assert.equal(client.getInstructions(), catalog.tools.map((t) => t.guidance).join("\n\n"));
  } finally {
    await client.close();
  }
});

test("read then edit in one MCP session; another session is refused with the REST text", async () => {
  fs.writeFileSync(path.join(root, "notes.txt"), "draft\n");
  const a = await connect();
  const b = await connect();
  try {
    const read = await a.client.callTool({ name: "read", arguments: { file_path: "notes.txt" } });
    assert.equal(read.isError, undefined);
    assert.equal(only(read), (await rest("read", { file_path: "notes.txt" }, "rest-reader")).output);

    const edit = await a.client.callTool({ name: "edit", arguments: { file_path: "notes.txt", old_string: "draft", new_string: "final" } });
    assert.equal(only(edit), `The file ${path.join(root, "notes.txt")} has been updated successfully.`);
    assert.equal(fs.readFileSync(path.join(root, "notes.txt"), "utf8"), "final\n");

    const refused = await b.client.callTool({ name: "edit", arguments: { file_path: "notes.txt", old_string: "final", new_string: "x" } });
    assert.equal(refused.isError, true);
    const problem = await rest("edit", { file_path: "notes.txt", old_string: "final", new_string: "x" }, "never-read");
    assert.equal(problem.code, "FS_NOT_OBSERVED");
    assert.equal(only(refused), problem.output);
    assert.equal(fs.readFileSync(path.join(root, "notes.txt"), "utf8"), "final\n");
  } finally {
    await a.client.close();
    await b.client.close();
  }
});

test("the token is required", async () => {
  await assert.rejects(connect({}), /401|Unauthorized|missing or wrong bearer token/);
});
