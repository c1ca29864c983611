// The approval flow in a browser (docs/sandbox.md): a page on another
// origin than the server (--sandbox-mode read-only, an agent token and an
// approver token, --cors-origins set to the page) makes a denied edit,
// retries it with sandbox_permissions, shows the pending approval it gets
// from GET /approvals with Approve and Reject buttons, and a click decides
// it. The edit's answer and the file's content are checked; a second run
// rejects. Debian's headless Chromium through playwright-core; needs `npm
// run build` first. Artifacts: artifacts/approvals.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { artifacts, launchChromium, pageRoutes, serveStatic, serverBinary, startServer, tempDir } from "../testing/harness.mjs";

const AGENT = "agent-token-31b7";
const PERSON = "approver-token-c04d";
let tmp, root, server, statics, ctx, page;

// The page: the agent's client edits; the person's client lists and
// decides, one button per pending approval.
const html = `<!doctype html><meta charset="utf-8"><title>approvals</title>
<h1>Pending approvals</h1><ul id="approvals"></ul><pre id="denied"></pre><pre id="result"></pre>
<script type="module">
import { createToolfsClient } from "/toolfs-client.js";
const q = new URLSearchParams(location.search);
const agent = createToolfsClient({ baseUrl: q.get("api"), token: q.get("agent"), sessionId: "browser-1", sessionCwd: "ws" });
const person = createToolfsClient({ baseUrl: q.get("api"), token: q.get("person") });
window.flow = async (file) => {
  document.querySelector("#approvals").replaceChildren();
  document.querySelector("#result").textContent = "";
  await agent.read({ file_path: file });
  const edit = { file_path: file, old_string: "false", new_string: "true" };
  try { await agent.edit(edit); } catch (e) { document.querySelector("#denied").textContent = e.status + " " + e.code + " " + e.output; }
  const answer = agent.edit({ ...edit, sandbox_permissions: "workspace-write", justification: "The user asked to turn debugging on." })
    .then((r) => r.output, (e) => e.status + " " + e.code + " " + e.output)
    .then((t) => { document.querySelector("#result").textContent = t; });
  const { approvals } = await person.listApprovals({ wait: "20s" });
  for (const a of approvals) {
    const li = document.createElement("li");
    li.textContent = a.tool + " " + a.path + " → " + a.mode + ": " + a.reason + " ";
    for (const d of ["approve", "reject"]) {
      const b = document.createElement("button");
      b.textContent = d; b.dataset.decision = d;
      b.onclick = () => person.decide(a.id, d).then(() => { b.textContent = d + "d"; });
      li.append(b);
    }
    document.querySelector("#approvals").append(li);
  }
  await answer;
};
window.ready = true;
</script>`;

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  tmp = tempDir("toolfs-approvals-browser-");
  root = path.join(tmp, "root");
  fs.mkdirSync(path.join(root, "ws"), { recursive: true });
  statics = await serveStatic(pageRoutes(html));
  server = await startServer(await serverBinary(tmp), { dir: tmp, args: ["--root", root, "--token", AGENT, "--approver-token", PERSON,
    "--sandbox-mode", "read-only", "--approval-timeout", "60s", "--cors-origins", statics.origin] });
  ({ ctx, page } = await launchChromium(tmp, { width: 900, height: 500 }));
  await page.goto(`${statics.origin}/?api=${encodeURIComponent(server.origin)}&agent=${AGENT}&person=${PERSON}`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
}, { timeout: 600_000 });

after(async () => {
  await ctx?.close().catch(() => {});
  await server?.stop();
  statics?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, { timeout: 30_000 });

const denied = "403 FS_SANDBOX_DENIED Error: [sandbox: file access denied under read-only mode]\n[sandbox: escalation available \u2014 retry this exact operation once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";

for (const decision of ["approve", "reject"]) {
  test(`a click ${decision}s the page's escalated edit`, async () => {
    const file = `${decision}.conf`;
    const abs = path.join(root, "ws", file);
    fs.writeFileSync(abs, "debug = false\n");
    const flow = page.evaluate((f) => window.flow(f), file);
    const button = page.locator(`button[data-decision="${decision}"]`);
    await button.waitFor({ timeout: 20_000 });
    assert.equal(await page.locator("#denied").textContent(), denied);
    assert.equal(await page.locator("#approvals li").count(), 1);
    assert.match(await page.locator("#approvals li").textContent(),
      new RegExp(`^edit ${abs.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} → workspace-write: escalate sandbox to workspace-write: The user asked to turn debugging on\\. `));
    assert.equal(fs.readFileSync(abs, "utf8"), "debug = false\n", "nothing runs before the click");
    await button.click();
    await flow;
    if (decision === "approve") {
      assert.equal(await page.locator("#result").textContent(), `The file ${abs} has been updated successfully.`);
      assert.equal(fs.readFileSync(abs, "utf8"), "debug = true\n");
      await page.screenshot({ path: path.join(artifacts, "approvals.png"), fullPage: true });
    } else {
      assert.equal(await page.locator("#result").textContent(), `403 ESCALATION_DENIED Error: the user rejected escalating this operation to "workspace-write"`);
      assert.equal(fs.readFileSync(abs, "utf8"), "debug = false\n");
    }
  });
}
