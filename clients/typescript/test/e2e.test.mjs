// End-to-end: the real server (built from ../../cmd/toolfs-api) on one
// loopback port, the page (e2e/index.html + dist/page.js) served from
// another, driven in Debian's headless Chromium through playwright-core. The
// page uses the client with a bearer token and a session; the test changes
// files on disk between steps and asserts on the page's DOM.
// Needs `npm run build` first. Artifacts: artifacts/e2e.png, artifacts/server.log.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { artifacts, launchChromium, serveStatic, serverBinary, startServer, tempDir } from "../testing/harness.mjs";

const TOKEN = "e2e-token-7f3a";

let tmp, root, server, apiOrigin, pageOrigin, thirdOrigin, ctx, page;
const statics = [];
const pageErrors = [];

// The e2e page, served on its own origin (twice: a configured origin and
// a third one).
const pageFiles = {
  "/": { file: "e2e/index.html", type: "text/html; charset=utf-8" },
  "/page.js": { file: "dist/page.js", type: "text/javascript; charset=utf-8" },
  "/page.js.map": { file: "dist/page.js.map", type: "application/json" },
};

const write = (name, text) => fs.writeFileSync(path.join(root, name), text);
const read = (name) => fs.readFileSync(path.join(root, name), "utf8");
const call = (fn, ...args) => page.evaluate(([f, a]) => window.toolfs[f](...a), [fn, args]);
const text = (sel) => page.locator(sel).innerText();
const textContent = (sel) => page.locator(sel).evaluate((e) => e.textContent);

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  tmp = tempDir("toolfs-e2e-");
  root = path.join(tmp, "root");
  fs.mkdirSync(root);
  statics.push(await serveStatic(pageFiles), await serveStatic(pageFiles));
  [pageOrigin, thirdOrigin] = statics.map((st) => st.origin);
  server = await startServer(await serverBinary(tmp), { dir: tmp, args: ["--root", root, "--token", TOKEN, "--cors-origins", pageOrigin] });
  apiOrigin = server.origin;

  ({ ctx, page } = await launchChromium(tmp, { width: 900, height: 1000 }));
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await page.goto(`${pageOrigin}/?api=${encodeURIComponent(apiOrigin)}&token=${TOKEN}`);
  await page.waitForFunction(() => window.toolfs !== undefined, null, { timeout: 10_000 });
}, { timeout: 600_000 });

after(async () => {
  try {
    if (page) await page.screenshot({ path: path.join(artifacts, "e2e.png"), fullPage: true });
  } finally {
    await ctx?.close().catch(() => {});
    await server?.stop();
    for (const st of statics) st.close();
    if (tmp) {
      fs.copyFileSync(path.join(tmp, "server.log"), path.join(artifacts, "server.log"));
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
}, { timeout: 30_000 });

test("the README usage example runs in the page", async () => {
  write("notes.txt", "# Notes\nstatus: draft\nowner: ada\n");
  write("todo.txt", "a\n");
  const out = await call("usage");
  const p = path.join(root, "notes.txt");
  const readOut = `<path>${p}</path>\n<type>file</type>\n<content>\n1: # Notes\n2: status: draft\n3: owner: ada\n\n(End of file - total 3 lines)\n</content>`;
  const want =
    `${readOut}\n` + // JSON read
    `${readOut}\n` + // the same text, streamed line by line
    `The file ${p} has been updated successfully.\n` +
    "- # Notes\nstatus: draft\nowner: ada\n+ # Notes\nstatus: final\nowner: ada\n" +
    `409 FS_NOT_OBSERVED Error: edit requires reading "${path.join(root, "todo.txt")}" first — read the file, then retry\n`;
  assert.deepEqual(out, { ok: true, output: want });
  assert.equal(await textContent("#usage"), want);
  assert.equal(read("notes.txt"), "# Notes\nstatus: final\nowner: ada\n");
  assert.equal(read("todo.txt"), "a\n");
});

test("a streamed read the server aborts rejects in the page, never ends short", async () => {
  // Above --read-stream-min-size (10 MiB), so the window streams before the
  // count reaches the invalid byte at the end.
  const line = "x".repeat(99) + "\n";
  fs.writeFileSync(path.join(root, "big.txt"), Buffer.concat([Buffer.from(line.repeat(110_000)), Buffer.from([0xff, 0x0a])]));
  const out = await call("stream", "big.txt", 3);
  assert.equal(out.ok, false, JSON.stringify(out).slice(0, 300));
  assert.match(out.error ?? "", /^TypeError/, JSON.stringify(out).slice(0, 300));
  // Whether the page saw the window lines before the error is timing: a
  // ReadableStream that errors drops the chunks still queued in it. The Go
  // tests prove the lines leave first; here what matters is no short success.
  const shown = await textContent("#read-stream");
  assert.ok(!shown.includes("(End of file"), shown.slice(-300));
  assert.ok(!shown.includes("</content>"), shown.slice(-300));
  fs.rmSync(path.join(root, "big.txt"));
});

const app = "const a = 1;\nconst b = 2;\nconst c = 3;\nconst d = 4;\nconst e = 5;\nconst f = 6;\nconst g = 7;\nconst h = 8;\n";
const appOut = (text) => {
  const body = text.split("\n").slice(0, -1).map((l, i) => `${i + 1}: ${l}`).join("\n");
  const n = text.split("\n").length - 1;
  return `<path>${path.join(root, "app.ts")}</path>\n<type>file</type>\n<content>\n${body}\n\n(End of file - total ${n} lines)\n</content>`;
};

test("read as JSON and streamed give the same text", async () => {
  write("app.ts", app);
  assert.deepEqual(await call("read", "app.ts"), { ok: true, output: appOut(app) });
  assert.equal(await textContent("#read-json"), appOut(app));
  assert.deepEqual(await call("stream", "app.ts"), { ok: true, output: appOut(app) });
  assert.equal(await textContent("#read-stream"), `${appOut(app)}\n`);
});

test("an edit renders its diff as a card", async () => {
  const out = await call("edit", "app.ts", "const e = 5;", "const e = 50; // tuned");
  assert.deepEqual(out, { ok: true, output: `The file ${path.join(root, "app.ts")} has been updated successfully.` });
  assert.equal(read("app.ts"), app.replace("const e = 5;", "const e = 50; // tuned"));
  const card = page.locator("#diffs .card").last();
  assert.equal(await card.locator("header").innerText(), "app.ts");
  assert.deepEqual(await card.locator(".del").allInnerTexts(), ["- const e = 5;"]);
  assert.deepEqual(await card.locator(".add").allInnerTexts(), ["+ const e = 50; // tuned"]);
  // 3 lines of context on each side, as the original's hunks.
  assert.deepEqual(await card.locator(".ctx").allInnerTexts(), [
    "  const b = 2;", "  const c = 3;", "  const d = 4;", "  const f = 6;", "  const g = 7;", "  const h = 8;",
  ]);
  assert.ok(await card.isVisible());
});

test("a change on disk after the read gives FS_STALE_VERSION, a re-read recovers", async () => {
  const edited = app.replace("const e = 5;", "const e = 50; // tuned");
  const changed = edited.replace("const a = 1;", "const a = 100;");
  write("app.ts", changed);
  const p = path.join(root, "app.ts");
  const want = `Error: cannot edit "${p}": file changed since it was read — re-read the file, then retry`;
  assert.deepEqual(await call("edit", "app.ts", "const h = 8;", "const h = 80;"), {
    ok: false, code: "FS_STALE_VERSION", status: 409, output: want,
  });
  assert.equal(read("app.ts"), changed);
  assert.equal(await text("#errors .card:last-child header"), "edit app.ts: 409 FS_STALE_VERSION");
  assert.equal(await textContent("#errors .card:last-child pre"), want);

  assert.equal((await call("read", "app.ts")).ok, true);
  assert.deepEqual(await call("edit", "app.ts", "const h = 8;", "const h = 80;"), {
    ok: true, output: `The file ${p} has been updated successfully.`,
  });
  assert.equal(read("app.ts"), changed.replace("const h = 8;", "const h = 80;"));
});

test("an edit of a file never read gives FS_NOT_OBSERVED", async () => {
  write("never-read.txt", "one\ntwo\n");
  const want = `Error: edit requires reading "${path.join(root, "never-read.txt")}" first — read the file, then retry`;
  assert.deepEqual(await call("edit", "never-read.txt", "one", "uno"), {
    ok: false, code: "FS_NOT_OBSERVED", status: 409, output: want,
  });
  assert.equal(read("never-read.txt"), "one\ntwo\n");
  assert.equal(await text("#errors .card:last-child header"), "edit never-read.txt: 409 FS_NOT_OBSERVED");
  assert.equal(await textContent("#errors .card:last-child pre"), want);
});

test("a wrong token gets a problem the page can read", async () => {
  const out = await call("readWithToken", "app.ts", "wrong-token");
  assert.equal(out.ok, false);
  assert.equal(out.code, "UNAUTHORIZED", JSON.stringify(out));
  assert.equal(out.status, 401);
  assert.match(out.output, /^Error: /);
});

test("CORS preflight answers the configured origin only", async (t) => {
  const cases = [
    { name: "configured origin", origin: () => pageOrigin, allowed: true },
    { name: "third origin", origin: () => thirdOrigin, allowed: false },
  ];
  for (const c of cases) {
    await t.test(c.name, async () => {
      const res = await fetch(`${apiOrigin}/tools/edit`, {
        method: "OPTIONS",
        headers: {
          Origin: c.origin(),
          "Access-Control-Request-Method": "POST",
          // As browsers send it: lowercase, sorted, no spaces (rs/cors 1.11 denies other forms).
          "Access-Control-Request-Headers": "accept,authorization,content-type,x-session-cwd,x-session-id",
        },
      });
      const allow = res.headers.get("access-control-allow-origin");
      if (!c.allowed) {
        assert.equal(allow, null);
        return;
      }
      assert.ok(res.status >= 200 && res.status < 300, `preflight status ${res.status}`);
      assert.equal(allow, c.origin());
      const headers = (res.headers.get("access-control-allow-headers") ?? "").toLowerCase();
      for (const h of ["authorization", "content-type", "x-session-id", "x-session-cwd", "accept"]) {
        assert.ok(headers.includes(h), `allow-headers ${headers} lacks ${h}`);
      }
      assert.match(res.headers.get("access-control-allow-methods") ?? "", /POST/);
    });
  }
});

test("a page on a third origin is blocked, the configured one is not", async () => {
  assert.deepEqual(await page.evaluate(() => window.toolfs.probe()), { healthz: "ok", read: "ok" });
  const other = await ctx.newPage();
  try {
    await other.goto(`${thirdOrigin}/?api=${encodeURIComponent(apiOrigin)}&token=${TOKEN}`);
    await other.waitForFunction(() => window.toolfs !== undefined, null, { timeout: 10_000 });
    assert.deepEqual(await other.evaluate(() => window.toolfs.probe()), {
      healthz: "blocked: TypeError",
      read: "blocked: TypeError",
    });
  } finally {
    await other.close();
  }
});

test("an agent's edit appears in the page's change feed as a diff card", async () => {
  await call("watch", "agent-e2e");
  write("feed.ts", "const x = 1;\nconst y = 2;\n");
  // The agent is another client of the server (not the page): it reads,
  // then edits, with its own session.
  const agent = async (tool, body) => {
    const r = await fetch(`${apiOrigin}/tools/${tool}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}`, "X-Session-ID": "agent-e2e" },
      body: JSON.stringify(body),
    });
    assert.equal(r.status, 200, await r.text());
  };
  await agent("read", { file_path: "feed.ts" });
  await agent("edit", { file_path: "feed.ts", old_string: "const y = 2;", new_string: "const y = 42;" });
  await page.locator("#feed .card").first().waitFor({ timeout: 10_000 });
  assert.equal(await text("#feed .event-head"), "edit feed.ts by agent-e2e");
  assert.equal(await text("#feed .card header"), "feed.ts");
  assert.equal(await textContent("#feed .card pre"), "  const x = 1;- const y = 2;+ const y = 42;");
  await page.locator("#feed").screenshot({ path: path.join(artifacts, "events.png") });
});

test("the page raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
