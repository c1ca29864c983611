// The change feed through the built client (dist/toolfs-client.js) against
// the real server (built from ../../cmd/toolfs-api): events() reads GET
// /events over fetch with the bearer token, yields edits with their diffs
// and external changes, resumes with Last-Event-ID, and reconnects by
// itself when the server goes away (a new process answers with a reset).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createToolfsClient, ToolError } from "../dist/toolfs-client.js";
import * as harness from "../testing/harness.mjs";

const TOKEN = "events-token-19c2";
let tmp, root, bin, port, base, server;

// The server restarts on the same port in the second test.
const startServer = async () => { server = await harness.startServer(bin, { dir: tmp, port, args: ["--root", root, "--token", TOKEN] }); };
const stopServer = () => server?.stop();

before(async () => {
  tmp = harness.tempDir("toolfs-events-");
  root = path.join(tmp, "root");
  fs.mkdirSync(root);
  bin = await harness.serverBinary(tmp);
  port = await harness.freePort();
  base = `http://127.0.0.1:${port}`;
  await startServer();
});

after(async () => {
  await stopServer();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// next takes the next value of an async iterator, or fails after ms.
async function next(it, ms = 5000) {
  let timer;
  const r = await Promise.race([
    it.next(),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms); }),
  ]);
  clearTimeout(timer);
  assert.equal(r.done, false);
  return r.value;
}

test("edits arrive with their diffs; external changes too; resume after leaving", async () => {
  const agent = createToolfsClient({ baseUrl: base, token: TOKEN, sessionId: "agent-1" });
  const feed = createToolfsClient({ baseUrl: base, token: TOKEN });
  const it = feed.events({ session: "agent-1" });
  const first = it.next(); // opens the stream
  await new Promise((r) => setTimeout(r, 300));

  await agent.write({ file_path: "notes.md", content: "one\ntwo\n" });
  await agent.edit({ file_path: "notes.md", old_string: "two", new_string: "2" });
  const w = (await first).value;
  assert.equal(w.type, "write");
  assert.equal(w.path, "notes.md");
  assert.equal(w.session, "agent-1");
  assert.deepEqual(w.diffs, []);
  assert.match(w.id, /^[0-9a-f]{8}-\d+$/);
  const e = await next(it);
  assert.equal(e.type, "edit");
  assert.deepEqual(e.diffs, [{ path: "notes.md", oldText: "one\ntwo", newText: "one\n2" }]);
  await it.return(); // leaves the loop: the stream closes

  // Missed while away, delivered on resume.
  await agent.edit({ file_path: "notes.md", old_string: "one", new_string: "1" });
  const resumed = feed.events({ session: "agent-1", lastEventId: e.id });
  const missed = await next(resumed);
  assert.equal(missed.type, "edit");
  assert.deepEqual(missed.diffs, [{ path: "notes.md", oldText: "one\n2", newText: "1\n2" }]);
  await resumed.return();

  // External changes have no session: read them without the filter.
  const all = feed.events({ path: "ext" });
  const opened = all.next();
  await new Promise((r) => setTimeout(r, 300));
  fs.mkdirSync(path.join(root, "ext"));
  fs.writeFileSync(path.join(root, "ext", "made-by-an-editor.txt"), "x");
  const seen = [(await opened).value, await next(all)].map((v) => `${v.type} ${v.path}`);
  assert.deepEqual(seen, ["created ext", "created ext/made-by-an-editor.txt"]);
  await all.return();
});

test("a wrong token throws ToolError; a restarted server answers the resume with a reset", async () => {
  const bad = createToolfsClient({ baseUrl: base, token: "wrong" });
  await assert.rejects(bad.events().next(), (err) => err instanceof ToolError && err.code === "UNAUTHORIZED" && err.status === 401);

  const agent = createToolfsClient({ baseUrl: base, token: TOKEN, sessionId: "agent-2" });
  const feed = createToolfsClient({ baseUrl: base, token: TOKEN });
  const ac = new AbortController();
  const it = feed.events({ session: "agent-2", retryMs: 200, signal: ac.signal });
  const first = it.next();
  await new Promise((r) => setTimeout(r, 300));
  await agent.write({ file_path: "restart.txt", content: "a" });
  assert.equal((await first).value.type, "write");

  // The server restarts: the client reconnects by itself, with the last id;
  // the new process cannot resume another's ids and says reset.
  const pending = it.next();
  await stopServer();
  await startServer();
  const reset = (await Promise.race([pending, new Promise((_, j) => setTimeout(() => j(new Error("no reset")), 10_000))])).value;
  assert.equal(reset.type, "reset");
  await agent.write({ file_path: "after.txt", content: "b" });
  const after = await next(it);
  assert.equal(after.type, "write");
  assert.equal(after.path, "after.txt");
  ac.abort();
  assert.equal((await it.next()).done, true);
});
