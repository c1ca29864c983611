// Interop over stdio: the real toolfs-api binary started as a command by the
// official TypeScript SDKs' StdioClientTransport and by the MCP Inspector's
// CLI, configured as docs/mcp.md ("Over stdio") shows: the command, --stdio
// and --root, nothing else. Each client, on a fresh root: the tool list, a
// read, an edit, an edit of a file it never read (refused with the exact
// FS_NOT_OBSERVED text), with the file on disk checked after each step.
// Run: npm ci && node --test stdio.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { binary, texts } from "./harness.mjs";

import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client as ClientV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";

const here = path.dirname(fileURLToPath(import.meta.url));
let tmp, bin;

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "toolfs-stdio-"));
  bin = await binary(tmp);
});

after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// root makes a fresh workspace with a.txt and unread.txt.
function root() {
  const r = fs.realpathSync(fs.mkdtempSync(path.join(tmp, "root-")));
  fs.writeFileSync(path.join(r, "a.txt"), "alpha\nbeta\n");
  fs.writeFileSync(path.join(r, "unread.txt"), "one\n");
  return r;
}

const disk = (r, name) => fs.readFileSync(path.join(r, name), "utf8");

const onlyText = (result) => {
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, "text");
  return { text: result.content[0].text, isError: result.isError === true };
};

// The catalog's tools, then the checkpoint tools (extended profile).
const toolNames = ["read", "write", "edit", "glob", "grep", "move", "delete", "mkdir", "changes", "revert"];

async function flow(t, r, call) {
  await t.test("read", async () => {
    assert.deepEqual(await call("read", { file_path: "a.txt" }), { text: texts.read(path.join(r, "a.txt"), ["alpha", "beta"]), isError: false });
  });
  await t.test("edit after the read", async () => {
    const got = await call("edit", { file_path: "a.txt", old_string: "alpha", new_string: "ALPHA" });
    assert.deepEqual(got, { text: texts.edited(path.join(r, "a.txt")), isError: false });
    assert.equal(disk(r, "a.txt"), "ALPHA\nbeta\n");
  });
  await t.test("edit of a file never read is refused", async () => {
    const got = await call("edit", { file_path: "unread.txt", old_string: "one", new_string: "two" });
    assert.deepEqual(got, { text: texts.notObserved(path.join(r, "unread.txt")), isError: true });
    assert.equal(disk(r, "unread.txt"), "one\n");
  });
}

// sdk drives one SDK's Client over its StdioClientTransport, configured as
// a desktop client's command and args are.
async function sdk(t, Client, Transport) {
  const r = root();
  const stderr = [];
  const transport = new Transport({ command: bin, args: ["--stdio", "--root", r], stderr: "pipe" });
  transport.stderr.on("data", (b) => stderr.push(b));
  const client = new Client({ name: "toolfs-stdio", version: "0.0.0" });
  await client.connect(transport);
  try {
    assert.equal(client.getServerVersion().name, "toolfs-api");
    assert.deepEqual((await client.listTools()).tools.map((x) => x.name), toolNames);
    await flow(t, r, async (name, args) => onlyText(await client.callTool({ name, arguments: args })));
  } finally {
    await client.close();
  }
  const logs = Buffer.concat(stderr).toString("utf8");
  assert.match(logs, /msg="serving MCP on stdin and stdout"/, "the logs are on stderr");
}

test("@modelcontextprotocol/sdk 1.x StdioClientTransport", (t) => sdk(t, ClientV1, StdioV1));

test("@modelcontextprotocol/client 2.x StdioClientTransport", (t) => sdk(t, ClientV2, StdioV2));

// The Inspector's CLI with a command: each run starts its own server
// process, whose memory session store starts empty, so one run's read does
// not authorize the next run's edit (docs/mcp.md, "Over stdio").
test("MCP Inspector CLI with a command: one process per call", async () => {
  const r = root();
  const inspector = async (tool, args) => {
    const argv = ["--cli", "--method", "tools/call", "--tool-name", tool, "--tool-arg"];
    for (const [k, v] of Object.entries(args)) argv.push(`${k}=${v}`);
    argv.push("--", bin, "--stdio", "--root", r);
    let stdout, code;
    try {
      ({ stdout } = await promisify(execFile)(path.join(here, "node_modules", ".bin", "mcp-inspector"), argv, { timeout: 60000 }));
      code = 0;
    } catch (e) {
      ({ stdout, code } = e);
    }
    const result = JSON.parse(stdout);
    assert.equal(code, result.isError === true ? 5 : 0, `exit ${code}: ${stdout}`);
    return onlyText(result);
  };
  assert.deepEqual(await inspector("read", { file_path: "a.txt" }), { text: texts.read(path.join(r, "a.txt"), ["alpha", "beta"]), isError: false });
  assert.deepEqual(await inspector("edit", { file_path: "a.txt", old_string: "alpha", new_string: "ALPHA" }), {
    text: `Error: edit requires reading "${path.join(r, "a.txt")}" first — read the file, then retry`,
    isError: true,
  });
  assert.equal(disk(r, "a.txt"), "alpha\nbeta\n");
});
