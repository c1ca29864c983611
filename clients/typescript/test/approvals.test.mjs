// Approvals through the built client (dist/toolfs-client.js) against the
// real server (built from ../../cmd/toolfs-api) in read-only sandbox mode,
// with an agent token and an approver token (docs/sandbox.md): a denied
// edit, the escalated retry waiting, listApprovals long-polling for it
// (the change shown as a diff), decide() by the approver (the agent's token is refused), the edit's
// answer and the file's new content; then a rejection.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createToolfsClient, ToolError } from "../dist/toolfs-client.js";
import { serverBinary, startServer, tempDir } from "../testing/harness.mjs";

const AGENT = "agent-token-5d1e";
const PERSON = "approver-token-88a0";
let tmp, root, server, base;

before(async () => {
  tmp = tempDir("toolfs-approvals-");
  root = path.join(tmp, "root");
  fs.mkdirSync(path.join(root, "ws"), { recursive: true });
  server = await startServer(await serverBinary(tmp), { dir: tmp, args: ["--root", root, "--token", AGENT, "--approver-token", PERSON,
    "--sandbox-mode", "read-only", "--approval-timeout", "30s"] });
  base = server.origin;
});

after(async () => {
  await server?.stop();
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
  // Handled now: the refusal may arrive while decide() is still answering.
  answer.catch(() => {});
  const { approvals } = await person.listApprovals({ wait: "20s" });
  assert.equal(approvals.length, 1);
  await person.decide(approvals[0].id, "reject");
  await assert.rejects(answer, (e) => e instanceof ToolError && e.status === 403 && e.code === "ESCALATION_DENIED" &&
    e.output === 'Error: the user rejected escalating this operation to "danger-full-access"');
  assert.equal(fs.existsSync(path.join(root, "top.txt")), false);
});
