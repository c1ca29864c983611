// Approvals through the built client (dist/toolfs-client.js) against the
// real server (built from ../../cmd/toolfs-api) in read-only sandbox mode,
// with an agent token and an approver token (docs/sandbox.md): a denied
// edit, the escalated retry waiting, listApprovals long-polling for it
// (the change shown as a diff), decide() by the approver (the agent's token is refused), the edit's
// answer and the file's new content; then a rejection.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { createToolfsClient, ToolError } from "../dist/toolfs-client.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");
const AGENT = "agent-token-5d1e";
const PERSON = "approver-token-88a0";
let tmp, root, server, base;

async function freePort() {
  const s = net.createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}

process.on("exit", () => { if (server && server.exitCode === null) server.kill("SIGKILL"); });

before(async () => {
  tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "toolfs-approvals-")));
  root = path.join(tmp, "root");
  fs.mkdirSync(path.join(root, "ws"), { recursive: true });
  let bin = process.env.TOOLFS_BIN;
  if (!bin) {
    bin = path.join(tmp, "toolfs-api");
    await promisify(execFile)("go", ["build", "-o", bin, "./cmd/toolfs-api"], {
      cwd: repo,
      timeout: 300_000,
      env: { ...process.env, GOFLAGS: `${process.env.GOFLAGS ?? ""} -buildvcs=false`.trim() },
    });
  }
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(tmp, "server.log"), "a");
  server = spawn(bin, ["--root", root, "--addr", `127.0.0.1:${port}`, "--token", AGENT, "--approver-token", PERSON,
    "--sandbox-mode", "read-only", "--approval-timeout", "30s"], { stdio: ["ignore", log, log] });
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server not healthy:\n${fs.readFileSync(path.join(tmp, "server.log"), "utf8").slice(-2000)}`);
});

after(async () => {
  if (server && server.exitCode === null) {
    server.kill("SIGTERM");
    await once(server, "exit");
  }
  fs.rmSync(tmp, { recursive: true, force: true });
});

const denied = "Error: [sandbox: file access denied under read-only mode]\n[sandbox: escalation available \u2014 retry this exact operation once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";

test("a denied edit, escalated, approved by the person's token and run once", async () => {
  fs.writeFileSync(path.join(root, "ws/app.conf"), "debug = false\n");
  const agent = createToolfsClient({ baseUrl: base, token: AGENT, sessionId: "chat-1", sessionCwd: "ws" });
  const person = createToolfsClient({ baseUrl: base, token: PERSON });
  await agent.read({ file_path: "app.conf" });
  const edit = { file_path: "app.conf", old_string: "false", new_string: "true" };
  await assert.rejects(agent.edit(edit), (e) => e instanceof ToolError && e.status === 403 && e.code === "FS_SANDBOX_DENIED" && e.output === denied);

  const first = await person.listApprovals();
  assert.deepEqual(first.approvals, []);
  const polled = person.listApprovals({ wait: "20s", after: first.cursor });
  const answer = agent.edit({ ...edit, sandbox_permissions: "workspace-write", justification: "The user asked to turn debugging on." });
  const { approvals, cursor } = await polled;
  assert.equal(approvals.length, 1);
  const a = approvals[0];
  assert.equal(a.tool, "edit");
  assert.equal(a.session, "chat-1");
  assert.equal(a.path, path.join(root, "ws/app.conf"));
  assert.equal(a.mode, "workspace-write");
  assert.equal(a.reason, "escalate sandbox to workspace-write: The user asked to turn debugging on.");
  const conf = path.join(root, "ws/app.conf");
  assert.equal(a.diff, `--- ${conf}\n+++ ${conf}\n@@ -1,1 +1,1 @@\n-debug = false\n+debug = true`);
  assert.equal(a.truncated, false);
  assert.ok(cursor > first.cursor);

  await assert.rejects(agent.decide(a.id, "approve"), (e) => e instanceof ToolError && e.status === 403 && e.code === "NOT_APPROVER");
  await person.decide(a.id, "approve");
  const done = await answer;
  assert.equal(done.output, `The file ${path.join(root, "ws/app.conf")} has been updated successfully.`);
  assert.equal(fs.readFileSync(path.join(root, "ws/app.conf"), "utf8"), "debug = true\n");
  await assert.rejects(person.decide(a.id, "approve"), (e) => e instanceof ToolError && e.status === 404 && e.code === "APPROVAL_NOT_FOUND");
});

test("a rejected escalation answers the original's text and writes nothing", async () => {
  const agent = createToolfsClient({ baseUrl: base, token: AGENT, sessionId: "chat-2" });
  const person = createToolfsClient({ baseUrl: base, token: PERSON });
  const answer = agent.write({ file_path: "top.txt", content: "x", sandbox_permissions: "danger-full-access", justification: "j" });
  const { approvals } = await person.listApprovals({ wait: "20s" });
  assert.equal(approvals.length, 1);
  await person.decide(approvals[0].id, "reject");
  await assert.rejects(answer, (e) => e instanceof ToolError && e.status === 403 && e.code === "ESCALATION_DENIED" &&
    e.output === 'Error: the user rejected escalating this operation to "danger-full-access"');
  assert.equal(fs.existsSync(path.join(root, "top.txt")), false);
});
