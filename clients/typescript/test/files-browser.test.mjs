// The files endpoints (docs/files.md) through the built client against the
// real Go server: list, download (Blob, stream, 304), upload (progress, 428,
// 412) and remove from Node; then a page on another origin in headless
// Chromium shows the tree, renders a downloaded PNG, draws the picture the
// model's read of it carries (metadata.image), uploads a file with a
// progress bar, and shows the 412 when the agent changed the file first.
// Needs `npm run build` first. Artifacts: artifacts/files.png.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { createToolfsClient, ToolError } from "../dist/toolfs-client.js";
import { artifacts, launchChromium, pageRoutes, serveStatic, serverBinary, startServer, tempDir } from "../testing/harness.mjs";

const TOKEN = "files-token-5e21";
let tmp, root, server, statics, ctx, page, apiOrigin;

// png is a w×h PNG of one colour, made here so the test needs no fixture.
function png(w, h, [r, g, b]) {
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: w }, () => [r, g, b]).flat())]);
  const raw = Buffer.concat(Array.from({ length: h }, () => row));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

// The page: a person's client (no session) shows the tree, an image and an
// upload with its progress; the agent works through REST meanwhile.
const html = `<!doctype html><meta charset="utf-8"><title>files</title>
<style>body{font:14px system-ui;margin:16px} ul{font:12px ui-monospace,monospace;white-space:pre} img{border:1px solid #ccc;width:96px;image-rendering:pixelated}
progress{width:320px} #conflict{color:#8a1f1f}</style>
<h1>Workspace</h1><ul id="tree"></ul><h2>Image</h2><img id="img" alt="">
<h2>What the model saw</h2><pre id="readText"></pre><img id="readImg" alt="">
<h2>Upload</h2><progress id="bar" max="1" value="0"></progress> <span id="pct"></span><pre id="uploaded"></pre><pre id="conflict"></pre>
<script type="module">
import { createToolfsClient } from "/toolfs-client.js";
const q = new URLSearchParams(location.search);
const person = createToolfsClient({ baseUrl: q.get("api"), token: q.get("token") });
window.showTree = async () => {
  const { entries, truncated } = await person.list("", { depth: 3 });
  document.querySelector("#tree").replaceChildren(...entries.map((e) => {
    const li = document.createElement("li");
    li.textContent = "  ".repeat(e.path.split("/").length - 1) + e.path.split("/").pop() + (e.type === "dir" ? "/" : "") + (e.type === "file" ? " (" + e.size + " B)" : "");
    li.dataset.path = e.path;
    return li;
  }));
  return { n: entries.length, truncated };
};
window.showImage = async (p) => {
  const d = await person.download(p);
  const img = document.querySelector("#img");
  img.src = URL.createObjectURL(d.blob);
  await img.decode();
  return { w: img.naturalWidth, h: img.naturalHeight, type: d.contentType, etag: d.etag };
};
// The agent's read of an image: the text the model is shown, and the
// picture of metadata.image (docs/media.md), drawn in the page.
window.showModelRead = async (p) => {
  const agent = createToolfsClient({ baseUrl: q.get("api"), token: q.get("token"), sessionId: "viewer" });
  const r = await agent.read({ file_path: p });
  document.querySelector("#readText").textContent = r.output;
  const im = r.metadata.image;
  const img = document.querySelector("#readImg");
  img.src = "data:" + im.mediaType + ";base64," + im.data;
  await img.decode();
  return { output: r.output, mediaType: im.mediaType, width: im.width, height: im.height, w: img.naturalWidth, h: img.naturalHeight };
};
window.uploadBig = async (p, size) => {
  const bar = document.querySelector("#bar");
  const seen = [];
  const r = await person.upload(p, new Blob([new Uint8Array(size).fill(97)]), {
    createOnly: true,
    onProgress: (sent, total) => { bar.max = total; bar.value = sent; seen.push(sent); document.querySelector("#pct").textContent = Math.round(100 * sent / total) + "%"; },
  });
  document.querySelector("#uploaded").textContent = "uploaded " + r.path + " (" + r.size + " B)";
  return { seen, etag: r.etag, size: r.size };
};
window.fetchEtag = async (p) => (await person.download(p)).etag;
window.uploadOver = async (p, etag, text) => {
  try {
    const r = await person.upload(p, text, { ifMatch: etag });
    return "ok " + r.etag;
  } catch (e) {
    const t = e.status + " " + e.code + " " + e.output;
    document.querySelector("#conflict").textContent = t;
    return t;
  }
};
window.ready = true;
</script>`;

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  tmp = tempDir("toolfs-files-browser-");
  root = path.join(tmp, "root");
  fs.mkdirSync(path.join(root, "src"), { recursive: true });
  fs.mkdirSync(path.join(root, "assets"), { recursive: true });
  fs.writeFileSync(path.join(root, "src", "main.go"), "package main\n");
  fs.writeFileSync(path.join(root, "README.md"), "# demo\n");
  fs.writeFileSync(path.join(root, "assets", "logo.png"), png(12, 8, [220, 40, 40]));
  statics = await serveStatic(pageRoutes(html));
  server = await startServer(await serverBinary(tmp), { dir: tmp, args: ["--root", root, "--token", TOKEN, "--cors-origins", statics.origin] });
  apiOrigin = server.origin;
}, { timeout: 600_000 });

after(async () => {
  await ctx?.close().catch(() => {});
  await server?.stop();
  statics?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, { timeout: 30_000 });

test("list, download, upload and remove from Node", async () => {
  const c = createToolfsClient({ baseUrl: apiOrigin, token: TOKEN });
  const l = await c.list("", { depth: 2 });
  assert.deepEqual(l.entries.map((e) => `${e.path}:${e.type}`),
    ["README.md:file", "assets:dir", "assets/logo.png:file", "src:dir", "src/main.go:file"]);
  assert.equal(l.truncated, false);
  const d = await c.download("assets/logo.png");
  assert.deepEqual(Buffer.from(await d.blob.arrayBuffer()), fs.readFileSync(path.join(root, "assets/logo.png")));
  assert.equal(d.contentType, "image/png");
  assert.equal(d.etag, `"${l.entries[2].version}"`);
  assert.equal(await c.download("assets/logo.png", { ifNoneMatch: d.etag }), undefined, "304");
  const s = await c.download("README.md", { stream: true });
  assert.equal(await new Response(s.stream).text(), "# demo\n");

  const progress = [];
  const up = await c.upload("new/notes.txt", "hello\n", { onProgress: (n, t) => progress.push([n, t]) });
  assert.equal(up.size, 6);
  assert.deepEqual(progress, [[6, 6]]);
  assert.equal(fs.readFileSync(path.join(root, "new/notes.txt"), "utf8"), "hello\n");
  await assert.rejects(c.upload("new/notes.txt", "blind\n"), (e) => e instanceof ToolError && e.status === 428 && e.code === "PRECONDITION_REQUIRED");
  await assert.rejects(c.upload("new/notes.txt", "stale\n", { ifMatch: '"0:0:0:0:0"' }), (e) => e.status === 412 && e.code === "FS_STALE_VERSION");
  const again = await c.upload("new/notes.txt", "replaced\n", { ifMatch: up.etag });
  await assert.rejects(c.remove("new/notes.txt", up.etag), (e) => e.status === 412);
  await c.remove("new/notes.txt", again.etag);
  assert.equal(fs.existsSync(path.join(root, "new/notes.txt")), false);
  await assert.rejects(c.download("src"), (e) => e.status === 422 && e.code === "FS_NOT_REGULAR_FILE");
});

test("a page on another origin: the tree, a PNG, an upload with progress, the 412 after the agent's edit", async () => {
  ({ ctx, page } = await launchChromium(tmp, { width: 900, height: 700 }));
  await page.goto(`${statics.origin}/?api=${encodeURIComponent(apiOrigin)}&token=${TOKEN}`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });

  const tree = await page.evaluate(() => window.showTree());
  assert.deepEqual(tree, { n: 6, truncated: false }, "the 5 entries and the folder new/ the Node test left");
  assert.equal(await page.locator('#tree li[data-path="assets/logo.png"]').textContent(), "  logo.png (" + fs.statSync(path.join(root, "assets/logo.png")).size + " B)");

  const img = await page.evaluate(() => window.showImage("assets/logo.png"));
  assert.deepEqual({ w: img.w, h: img.h, type: img.type }, { w: 12, h: 8, type: "image/png" });

  // The model's read of the same PNG: its text, and its picture drawn in the page.
  const seen = await page.evaluate(() => window.showModelRead("assets/logo.png"));
  const bytes = fs.statSync(path.join(root, "assets/logo.png")).size;
  assert.equal(seen.output, `<path>${path.join(root, "assets/logo.png")}</path>\n<type>image</type>\n<content>\nimage/png, 12x8 pixels, ${bytes} bytes\n</content>`);
  assert.deepEqual({ mediaType: seen.mediaType, width: seen.width, height: seen.height, w: seen.w, h: seen.h },
    { mediaType: "image/png", width: 12, height: 8, w: 12, h: 8 });
  assert.equal(await page.locator("#readText").textContent(), seen.output);

  const size = 8 << 20;
  const up = await page.evaluate((n) => window.uploadBig("uploads/big.bin", n), size);
  assert.equal(up.size, size);
  assert.equal(up.seen.at(-1), size, "the progress reached the total");
  assert.ok(up.seen.length >= 1);
  assert.equal(fs.statSync(path.join(root, "uploads/big.bin")).size, size);
  assert.equal(await page.locator("#bar").evaluate((b) => b.value), size);

  // The person opens README.md; the agent changes it first; the person's
  // upload over the version it saw is refused and nothing of the agent's is lost.
  const etag = await page.evaluate(() => window.fetchEtag("README.md"));
  const agent = createToolfsClient({ baseUrl: apiOrigin, token: TOKEN, sessionId: "agent" });
  await agent.read({ file_path: "README.md" });
  await agent.edit({ file_path: "README.md", old_string: "# demo", new_string: "# demo, edited by the agent" });
  const answer = await page.evaluate(([e]) => window.uploadOver("README.md", e, "# the person's version\n"), [etag]);
  assert.match(answer, /^412 FS_STALE_VERSION Error: cannot upload ".*README\.md": file changed since it was read/);
  assert.equal(fs.readFileSync(path.join(root, "README.md"), "utf8"), "# demo, edited by the agent\n");
  await page.evaluate(() => window.showTree());
  await page.screenshot({ path: path.join(artifacts, "files.png"), fullPage: true });
});
