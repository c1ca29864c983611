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
import { spawn, execFile } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.resolve(here, "..");
const repo = path.resolve(pkg, "../..");
const artifacts = path.join(pkg, "artifacts");
const AGENT = "agent-token-31b7";
const PERSON = "approver-token-c04d";
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
let tmp, root, server, statics, ctx, page, apiOrigin, pageOrigin;

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

async function freePort() {
  const s = net.createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const p = s.address().port;
  await new Promise((r) => s.close(r));
  return p;
}

process.on("exit", () => { if (server && server.exitCode === null) server.kill("SIGKILL"); });

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "toolfs-approvals-browser-")));
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
  statics = http.createServer((req, res) => {
    const p = new URL(req.url, "http://x").pathname;
    if (p === "/") { res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" }); return res.end(html); }
    if (p === "/toolfs-client.js") {
      res.writeHead(200, { "Content-Type": "text/javascript; charset=utf-8" });
      return fs.createReadStream(path.join(pkg, "dist/toolfs-client.js")).pipe(res);
    }
    res.writeHead(404).end();
  }).listen(0, "127.0.0.1");
  await once(statics, "listening");
  pageOrigin = `http://127.0.0.1:${statics.address().port}`;
  const port = await freePort();
  apiOrigin = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(tmp, "server.log"), "a");
  server = spawn(bin, ["--root", root, "--addr", `127.0.0.1:${port}`, "--token", AGENT, "--approver-token", PERSON,
    "--sandbox-mode", "read-only", "--approval-timeout", "60s", "--cors-origins", pageOrigin], { stdio: ["ignore", log, log] });
  const until = Date.now() + 15_000;
  for (;;) {
    try { if ((await fetch(`${apiOrigin}/healthz`)).ok) break; } catch { /* not up yet */ }
    if (Date.now() > until) throw new Error("server not healthy: " + fs.readFileSync(path.join(tmp, "server.log"), "utf8").slice(-2000));
    await new Promise((r) => setTimeout(r, 100));
  }
  ctx = await chromium.launchPersistentContext(path.join(tmp, "profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 900, height: 500 },
    timeout: 60_000,
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  await page.goto(`${pageOrigin}/?api=${encodeURIComponent(apiOrigin)}&agent=${AGENT}&person=${PERSON}`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
}, { timeout: 600_000 });

after(async () => {
  await ctx?.close().catch(() => {});
  if (server && server.exitCode === null) {
    server.kill("SIGTERM");
    await once(server, "exit");
  }
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
