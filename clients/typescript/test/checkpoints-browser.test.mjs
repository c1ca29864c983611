// Checkpoints in a browser (docs/checkpoints.md): a page on another origin
// than the server (--cors-origins set to the page) lets an agent's client
// write and edit, lists the session's changes with a card per change (its
// diff from the dry run), and reverts them all with a click; a second run,
// where a person edits a file in between, shows the refusal and nothing is
// restored. Debian's headless Chromium through playwright-core; needs `npm
// run build` first. Artifacts: artifacts/checkpoints.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { artifacts, launchChromium, pageRoutes, serveStatic, serverBinary, startServer, tempDir } from "../testing/harness.mjs";

const TOKEN = "token-5e21";
let tmp, root, server, statics, ctx, page;

const html = `<!doctype html><meta charset="utf-8"><title>checkpoints</title>
<h1>What the agent changed</h1><ul id="changes"></ul><div id="diff"></div><button id="revert">Revert all</button><pre id="result"></pre>
<script type="module">
import { createToolfsClient } from "/toolfs-client.js";
const q = new URLSearchParams(location.search);
const person = createToolfsClient({ baseUrl: q.get("api"), token: q.get("token") });
window.agent = async (session) => {
  const agent = createToolfsClient({ baseUrl: q.get("api"), token: q.get("token"), sessionId: session });
  await agent.read({ file_path: "app.conf" });
  await agent.edit({ file_path: "app.conf", old_string: "debug = false", new_string: "debug = true" });
  await agent.write({ file_path: "notes.md", content: "# Notes\\nwritten by the agent\\n" });
};
window.show = async (session) => {
  document.querySelector("#result").textContent = "";
  const { changes } = await person.changes(session);
  const ul = document.querySelector("#changes");
  ul.replaceChildren();
  for (const c of changes) {
    const li = document.createElement("li");
    li.textContent = c.seq + " " + c.tool + " " + c.path + " +" + c.added + " -" + c.removed;
    ul.append(li);
  }
  const dry = await person.revert(session, { to: 0, dry_run: true });
  const diff = document.querySelector("#diff");
  diff.replaceChildren();
  for (const r of dry.metadata.restored) {
    const card = document.createElement("pre");
    card.className = "card";
    card.textContent = r.path + "\\n" + r.diffs.map((d) => "- " + (d.oldText ?? "") + "\\n+ " + d.newText).join("\\n");
    diff.append(card);
  }
  document.querySelector("#revert").onclick = () => person.revert(session, { to: 0 })
    .then((r) => r.output, (e) => e.status + " " + e.code + " " + e.output)
    .then((t) => { document.querySelector("#result").textContent = t; });
};
window.ready = true;
</script>`;

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  tmp = tempDir("toolfs-checkpoints-browser-");
  root = path.join(tmp, "root");
  fs.mkdirSync(root, { recursive: true });
  statics = await serveStatic(pageRoutes(html));
  server = await startServer(await serverBinary(tmp), { dir: tmp, args: ["--root", root, "--token", TOKEN, "--cors-origins", statics.origin] });
  ({ ctx, page } = await launchChromium(tmp, { width: 900, height: 500 }));
  await page.goto(`${statics.origin}/?api=${encodeURIComponent(server.origin)}&token=${TOKEN}`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
}, { timeout: 600_000 });

after(async () => {
  await ctx?.close().catch(() => {});
  await server?.stop();
  statics?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, { timeout: 30_000 });

for (const person of [false, true]) {
  test(person ? "a person's edit in between refuses the click's revert" : "a click reverts the agent's changes", async () => {
    const session = person ? "agent-b" : "agent-a";
    const conf = path.join(root, "app.conf");
    fs.writeFileSync(conf, "debug = false\n");
    fs.rmSync(path.join(root, "notes.md"), { force: true });
    await page.evaluate((s) => window.agent(s), session);
    assert.equal(fs.readFileSync(conf, "utf8"), "debug = true\n");
    await page.evaluate((s) => window.show(s), session);
    assert.deepEqual(await page.locator("#changes li").allTextContents(), ["2 write notes.md +2 -0", "1 edit app.conf +1 -1"]);
    assert.equal(await page.locator("#diff .card").count(), 2);
    assert.match(await page.locator("#diff .card").first().textContent(), /^app\.conf\n- debug = true\n\+ debug = false/);
    if (person) fs.writeFileSync(conf, "debug = true\nlevel = 3\n");
    await page.click("#revert");
    await page.locator("#result").filter({ hasText: /./ }).waitFor({ timeout: 10_000 });
    if (!person) {
      assert.equal(await page.locator("#result").textContent(), "Reverted 2 change(s) in 2 file(s): app.conf, notes.md");
      assert.equal(fs.readFileSync(conf, "utf8"), "debug = false\n");
      assert.equal(fs.existsSync(path.join(root, "notes.md")), false);
      await page.screenshot({ path: path.join(artifacts, "checkpoints.png"), fullPage: true });
    } else {
      assert.match(await page.locator("#result").textContent(),
        /^409 FS_STALE_VERSION Error: cannot revert: these files changed since this session's last change to them: app\.conf/);
      assert.equal(fs.readFileSync(conf, "utf8"), "debug = true\nlevel = 3\n");
      assert.equal(fs.readFileSync(path.join(root, "notes.md"), "utf8"), "# Notes\nwritten by the agent\n", "nothing restored");
      await page.screenshot({ path: path.join(artifacts, "checkpoints-refused.png"), fullPage: true });
    }
  });
}
