// The console at /ui/ (docs/console.md) in headless Chromium against the
// real server: a person signs in with the token, approves an agent's
// escalated write while the agent's MCP call waits, rejects an escalated
// edit, watches edits arrive on the feed, reverts a session's changes,
// meets the 409 after editing a file in between, browses, downloads and
// uploads (a stale upload ends in 412), and reads the server's state.
// The server runs --sandbox-mode workspace-write with the agent's cwd ws,
// so the agent's writes outside ws escalate while the person's reverts and
// uploads (no cwd: the root) pass the fence. Screenshots go to
// CONSOLE_SCREENSHOTS (default artifacts/console); docs/console.md shows
// the committed ones from internal/console/screenshots.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { artifacts, launchChromium, serverBinary, startServer, tempDir } from "../testing/harness.mjs";

const AGENT = "agent-token-5e21";
const PERSON = "approver-token-9a0c";
const shots = process.env.CONSOLE_SCREENSHOTS ?? path.join(artifacts, "console");
const pageErrors = []; // uncaught errors and CSP violations
let tmp, root, server, ctx, page;

const shot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });

// rest calls a tool as the agent: session agent-1 unless given, cwd ws.
async function rest(tool, args, { session = "agent-1" } = {}) {
  const res = await fetch(`${server.origin}/tools/${tool}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${AGENT}`, "Content-Type": "application/json", "X-Session-ID": session, "X-Session-Cwd": "ws" },
    body: JSON.stringify(args),
  });
  return { status: res.status, body: await res.json() };
}

// mcpCall is one tools/call on /mcp as the agent, on the sessionless
// 2026-07-28 revision, without the elicitation capability: an escalation
// waits on /approvals.
async function mcpCall(name, args) {
  const res = await fetch(`${server.origin}/mcp`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${AGENT}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name, "X-Session-ID": "agent-1", "X-Session-Cwd": "ws",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": { name: "console-test", version: "1" }, "io.modelcontextprotocol/clientCapabilities": {} } } }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text).result;
}

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  tmp = tempDir("toolfs-console-browser-");
  root = path.join(tmp, "root");
  fs.mkdirSync(path.join(root, "ws"), { recursive: true });
  server = await startServer(await serverBinary(tmp), { dir: tmp, args: ["--root", root, "--token", AGENT, "--approver-token", PERSON,
    "--sandbox-mode", "workspace-write", "--approval-timeout", "60s"] });
  ({ ctx, page } = await launchChromium(tmp, { width: 1100, height: 760 }));
  page.on("pageerror", (e) => { pageErrors.push(String(e)); console.error("page error:", e); });
  page.on("console", (m) => { if (/Content.Security.Policy/i.test(m.text())) pageErrors.push(m.text()); });
}, { timeout: 600_000 });

after(async () => {
  await ctx?.close().catch(() => {});
  await server?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, { timeout: 30_000 });

test("the token is asked once and kept in the tab's session storage, never in the URL", async () => {
  await page.goto(`${server.origin}/ui/`);
  await page.locator("#token").waitFor({ timeout: 10_000 });
  assert.equal(await page.locator("#approver-label").isVisible(), true, "the approver token is asked too");
  assert.equal(await page.locator("#oauth-signin").isVisible(), false);
  assert.equal(await page.locator("#tabs").isVisible(), false, "nothing but the sign-in before it");
  await page.fill("#token", AGENT);
  await page.fill("#approver", PERSON);
  await shot("signin");
  // A wrong token is refused and asked again, saying why.
  await page.fill("#token", "not-the-token");
  await page.click("#token-form button[type=submit]");
  await page.locator("#signin-error", { hasText: "Your sign-in was refused (401): sign in again." }).waitFor({ timeout: 10_000 });
  assert.equal(await page.locator("#token").isVisible(), true);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("toolfs.token")), null, "the wrong token is forgotten");
  await page.fill("#token", AGENT);
  await page.fill("#approver", PERSON);
  await page.click("#token-form button[type=submit]");
  await page.waitForFunction(() => window.consoleReady === true, null, { timeout: 10_000 });
  assert.equal(await page.evaluate(() => sessionStorage.getItem("toolfs.token")), AGENT);
  assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing in local storage");
  assert.ok(!page.url().includes(AGENT) && !page.url().includes(PERSON), page.url());
  // A reload keeps the sign-in: the tab's storage, not a new question.
  await page.reload();
  await page.waitForFunction(() => window.consoleReady === true, null, { timeout: 10_000 });
  assert.equal(await page.locator("#signin").isVisible(), false);
});

test("a person approves an agent's escalated write while its MCP call waits", async () => {
  await page.click('#tabs button[data-tab="approvals"]');
  const target = path.join(root, "outside.txt");
  const call = mcpCall("write", { file_path: target, content: "written after approval\n", sandbox_permissions: "danger-full-access", justification: "The user asked for a note at the top." });
  const card = page.locator("#approvals-list li.approval");
  await card.waitFor({ timeout: 20_000 });
  assert.match(await card.locator(".reason").textContent(), /^escalate sandbox to danger-full-access: The user asked for a note at the top\.$/);
  assert.match(await card.locator("pre.diff").textContent(), /\+written after approval/);
  assert.equal(await page.locator("#approvals-count").textContent(), "1");
  assert.equal(fs.existsSync(target), false, "nothing runs before the click");
  await shot("approvals");
  await card.locator('button[data-decision="approve"]').click();
  const result = await call;
  assert.equal(result.isError ?? false, false, JSON.stringify(result));
  assert.equal(result.content[0].text, `<path>${target}</path>\n<type>file</type>\n<content>\nCreated file\n</content>`);
  assert.equal(fs.readFileSync(target, "utf8"), "written after approval\n");
  await page.locator("#approvals-list .decided").waitFor({ timeout: 5_000 });
  assert.equal(await page.locator("#approvals-list .decided").textContent(), `Approved: write ${target}`);
});

test("a person rejects an escalated edit and the agent is told", async () => {
  const target = path.join(root, "settings.conf");
  fs.writeFileSync(target, "debug = false\n");
  await rest("read", { file_path: target });
  const call = rest("edit", { file_path: target, old_string: "false", new_string: "true", sandbox_permissions: "danger-full-access", justification: "Turn debugging on." });
  const card = page.locator("#approvals-list li.approval", { hasText: "settings.conf" });
  await card.waitFor({ timeout: 20_000 });
  assert.match(await card.locator("pre.diff").textContent(), /-debug = false\n\+debug = true/);
  await card.locator('button[data-decision="reject"]').click();
  const { status, body } = await call;
  assert.equal(status, 403);
  assert.equal(body.code, "ESCALATION_DENIED");
  assert.equal(body.output, `Error: the user rejected escalating this operation to "danger-full-access"`);
  assert.equal(fs.readFileSync(target, "utf8"), "debug = false\n");
  await page.locator("#approvals-list .decided", { hasText: "Rejected" }).waitFor({ timeout: 5_000 });
  assert.equal(await page.locator("#approvals-count").isVisible(), false, "nothing left to decide");
});

test("edits arrive on the feed live, with who made them and the diff", async () => {
  await page.click('#tabs button[data-tab="feed"]');
  await page.locator("#feed-state.live").waitFor({ timeout: 10_000 });
  const file = path.join(root, "ws", "app.conf");
  assert.equal((await rest("write", { file_path: file, content: "port = 8080\nname = demo\n" })).status, 200);
  assert.equal((await rest("edit", { file_path: file, old_string: "8080", new_string: "9090" })).status, 200);
  const edit = page.locator('#feed-list li[data-type="edit"][data-path="ws/app.conf"]');
  await edit.waitFor({ timeout: 10_000 });
  assert.equal(await edit.locator(".who").textContent(), " by session agent-1");
  assert.equal(await edit.locator("pre.diff").textContent(), "-port = 8080\n+port = 9090\n");
  await page.locator('#feed-list li[data-type="write"][data-path="ws/app.conf"]').waitFor({ timeout: 5_000 });
  await shot("feed");
});

test("a person reverts a session's changes", async () => {
  await page.click('#tabs button[data-tab="changes"]');
  await page.click('#sessions-list button[data-session="agent-1"]');
  const rows = page.locator("#changes-table tbody tr[data-seq]");
  await rows.first().waitFor({ timeout: 10_000 });
  // The approved write, the edit and the write of app.conf.
  assert.equal(await rows.count(), 3);
  assert.match(await rows.first().textContent(), /edit.*ws\/app\.conf/);
  await shot("changes");
  await page.click("#revert-preview");
  const preview = page.locator("#revert-result p.preview");
  await preview.waitFor({ timeout: 10_000 });
  assert.match(await preview.textContent(), /^Preview, nothing written: /);
  assert.match(await page.locator("#revert-result").textContent(), /-port = 9090/);
  assert.equal(fs.readFileSync(path.join(root, "ws", "app.conf"), "utf8"), "port = 9090\nname = demo\n", "a preview writes nothing");
  await page.click("#revert-all");
  const ok = page.locator("#revert-result p.ok");
  await ok.waitFor({ timeout: 10_000 });
  assert.match(await ok.textContent(), /^Reverted 3 change\(s\) in 2 file\(s\): /);
  assert.equal(fs.existsSync(path.join(root, "ws", "app.conf")), false);
  assert.equal(fs.existsSync(path.join(root, "outside.txt")), false);
  await shot("reverted");
});

test("a person's edit in between refuses the revert with 409 and shows what changed", async () => {
  const file = path.join(root, "ws", "notes.md");
  assert.equal((await rest("write", { file_path: file, content: "# Notes\n" }, { session: "agent-2" })).status, 200);
  await page.locator('#sessions-list button[data-session="agent-2"]').waitFor({ timeout: 10_000 });
  fs.writeFileSync(file, "# Notes\nmy own line\n"); // the person's editor
  // Within the watcher's 100 ms window of the agent's create, the
  // person's write is reported with it as one "created" (docs/events.md).
  await page.locator('#feed-list li:is([data-type="modified"], [data-type="created"])[data-path="ws/notes.md"]').waitFor({ state: "attached", timeout: 10_000 });
  await page.click('#sessions-list button[data-session="agent-2"]');
  await page.locator("#changes-table tbody tr[data-seq]").first().waitFor({ timeout: 10_000 });
  await page.click("#revert-all");
  const refused = page.locator("#revert-result .refused");
  await refused.waitFor({ timeout: 10_000 });
  assert.equal(await refused.locator("p.error").textContent(),
    "409 FS_STALE_VERSION: cannot revert: these files changed since this session's last change to them: ws/notes.md");
  assert.match(await refused.locator("li").textContent(), /^ws\/notes\.md — last change seen: (modified|created) outside the API/);
  assert.equal(await refused.locator(".now pre.content").textContent(), "# Notes\nmy own line\n");
  assert.equal(fs.readFileSync(file, "utf8"), "# Notes\nmy own line\n", "nothing restored");
  await shot("revert-409");
  // The sessions seen stay listed across a reload of the tab.
  await page.reload();
  await page.waitForFunction(() => window.consoleReady === true, null, { timeout: 10_000 });
  assert.deepEqual(await page.locator("#sessions-list button").evaluateAll((b) => b.map((x) => x.dataset.session)), ["agent-1", "agent-2"]);
});

test("a person browses, downloads and uploads files, and a stale upload is refused", async () => {
  fs.mkdirSync(path.join(root, "docs"), { recursive: true });
  fs.writeFileSync(path.join(root, "docs", "readme.txt"), "hello from the workspace\n");
  await page.click('#tabs button[data-tab="files"]');
  const docs = page.locator('#files-table tr[data-path="docs"] button.link');
  await docs.waitFor({ timeout: 10_000 });
  await docs.click();
  const row = page.locator('#files-table tr[data-path="docs/readme.txt"]');
  await row.waitFor({ timeout: 10_000 });
  await row.locator("button.link").click();
  await page.locator("#preview pre.content").waitFor({ timeout: 10_000 });
  assert.equal(await page.locator("#preview pre.content").textContent(), "hello from the workspace\n");

  // An image is shown as one, from the downloaded bytes (a blob: URL the
  // page's CSP allows).
  const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==", "base64");
  fs.writeFileSync(path.join(root, "docs", "dot.png"), png);
  await page.click("#folder-reload");
  await page.locator('#files-table tr[data-path="docs/dot.png"] button.link').click();
  await page.locator("#preview img").waitFor({ timeout: 10_000 });
  assert.equal(await page.locator("#preview img").evaluate((img) => img.complete && img.naturalWidth), 2);
  await row.locator("button.link").click();
  await page.locator("#preview pre.content").waitFor({ timeout: 10_000 });

  const [download] = await Promise.all([page.waitForEvent("download", { timeout: 10_000 }), row.locator("button.download").click()]);
  assert.equal(download.suggestedFilename(), "readme.txt");
  assert.equal(fs.readFileSync(await download.path(), "utf8"), "hello from the workspace\n");

  const big = Buffer.alloc(3 << 20, "x");
  await page.setInputFiles("#upload-file", { name: "data.bin", mimeType: "application/octet-stream", buffer: big });
  await page.click("#upload-form button[type=submit]");
  await page.locator("#upload-result.ok").waitFor({ timeout: 20_000 });
  assert.equal(await page.locator("#upload-result").textContent(), `Created docs/data.bin (${big.length} bytes)`);
  assert.equal(await page.locator("#upload-progress").evaluate((p) => p.value), 1);
  assert.ok(fs.readFileSync(path.join(root, "docs", "data.bin")).equals(big));
  await page.locator('#files-table tr[data-path="docs/data.bin"]').waitFor({ timeout: 10_000 });
  await shot("files");

  // The listing knows readme.txt's version; an edit on disk makes it stale.
  fs.writeFileSync(path.join(root, "docs", "readme.txt"), "changed by someone else\n");
  await page.setInputFiles("#upload-file", { name: "readme.txt", mimeType: "text/plain", buffer: Buffer.from("the person's upload\n") });
  await page.click("#upload-form button[type=submit]");
  await page.locator("#upload-result.error").waitFor({ timeout: 10_000 });
  assert.match(await page.locator("#upload-result").textContent(), /^412 FS_STALE_VERSION: .* — the file changed since this folder was listed: reload and try again\.$/);
  assert.equal(fs.readFileSync(path.join(root, "docs", "readme.txt"), "utf8"), "changed by someone else\n");
  await shot("files-412");

  // Delete asks first, and deletes only the version listed.
  page.once("dialog", (d) => { assert.equal(d.message(), "Delete docs/data.bin?"); d.accept(); });
  await page.locator('#files-table tr[data-path="docs/data.bin"] button.delete').click();
  await page.locator("#files-error.ok").waitFor({ timeout: 10_000 });
  assert.equal(await page.locator("#files-error").textContent(), "Deleted docs/data.bin");
  assert.equal(fs.existsSync(path.join(root, "docs", "data.bin")), false);
  fs.writeFileSync(path.join(root, "docs", "readme.txt"), "changed once more\n");
  page.once("dialog", (d) => d.accept());
  await page.locator('#files-table tr[data-path="docs/readme.txt"] button.delete').click();
  await page.locator("#files-error.error").waitFor({ timeout: 10_000 });
  assert.match(await page.locator("#files-error").textContent(), /^412 FS_STALE_VERSION: .* — the file changed since this folder was listed: reload and try again\.$/);
  assert.equal(fs.readFileSync(path.join(root, "docs", "readme.txt"), "utf8"), "changed once more\n");
});

test("the server's state", async () => {
  await page.click('#tabs button[data-tab="server"]');
  await page.locator('#server-state dd[data-key="version"]').waitFor({ timeout: 10_000 });
  assert.equal(await page.locator('#server-state dd[data-key="ready"]').textContent(), "yes");
  assert.equal(await page.locator('#server-state dd[data-key="sandbox mode"]').textContent(), "workspace-write");
  assert.equal(await page.locator('#server-state dd[data-key="profile"]').textContent(), "extended");
  assert.equal(await page.locator('#server-state dd[data-key="edit dialect"]').textContent(), "str_replace");
  assert.match(await page.locator('#server-state dd[data-key="sessions"]').textContent(), /^\d+$/);
  await shot("server");
});

test("nothing the page did broke its Content-Security-Policy or threw", () => {
  assert.deepEqual(pageErrors, []);
});
