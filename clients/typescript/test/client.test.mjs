// Unit tests of the built client (dist/toolfs-client.js, `npm run build`)
// against a real loopback HTTP server that answers canned bodies, so real
// fetch, real chunked transfers and real aborts are exercised.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { once } from "node:events";
import { createToolfsClient, lines, ToolError } from "../dist/toolfs-client.js";

const enc = new TextEncoder();
let server;
let baseUrl;
const seen = []; // requests the server got: {method, url, headers, body}
const closed = new Set(); // routes whose response the client dropped

// Canned answers by path. Each writes the whole response.
const routes = {
  "/tools/read": (req, res, body) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ output: `read ${JSON.parse(body).file_path}`, metadata: { path: "/r/a.txt", offset: 1, lines: [], totalLines: 0 } }));
  },
  "/tools/edit": (req, res) => {
    res.writeHead(409, { "Content-Type": "application/problem+json" });
    res.end(JSON.stringify({
      type: "about:blank", title: "Conflict", status: 409, code: "FS_STALE_VERSION",
      detail: 'cannot edit "/r/a.txt": file changed since it was read — re-read the file, then retry',
      output: 'Error: cannot edit "/r/a.txt": file changed since it was read — re-read the file, then retry',
    }));
  },
  "/tools/edit_lines": (req, res, body) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ output: `edited ${JSON.parse(body).edits.length}`, metadata: { diffs: [] } }));
  },
  "/tools/write": (req, res) => {
    res.writeHead(502, { "Content-Type": "text/html" });
    res.end("<h1>bad gateway</h1>");
  },
};

// Streamed reads, chosen by file_path: chunks are written with a flush between.
const streams = {
  "split.txt": ["<path>/r/split.txt</path>\n<ty", "pe>file</type>\n<content>\n1: h", "é", "llo\n", "\n(End", " of file - total 1 lines)\n</content>"],
  // "é" is 0xC3 0xA9 and "😀" 4 bytes: cut inside both.
  "bytes.txt": [Buffer.from([0x61, 0xc3]), Buffer.from([0xa9, 0x0a, 0xf0, 0x9f]), Buffer.from([0x98, 0x80, 0x0a])],
  "crlf.txt": ["a\r\nb\n\nc"],
  "empty.txt": [],
};

before(async () => {
  server = http.createServer(async (req, res) => {
    let body = "";
    for await (const c of req) body += c;
    seen.push({ method: req.method, url: req.url, headers: req.headers, body });
    res.on("close", () => { if (!res.writableFinished) closed.add(JSON.parse(body || "{}").file_path); });
    const path = req.url.split("?")[0];
    if (path === "/tools/read" && req.headers.accept === "text/plain") {
      const { file_path } = JSON.parse(body);
      if (file_path === "missing.txt") {
        res.writeHead(404, { "Content-Type": "application/problem+json" });
        return res.end(JSON.stringify({ type: "about:blank", title: "Not Found", status: 404, code: "FS_NOT_FOUND", output: 'Error: cannot read "/r/missing.txt": not found' }));
      }
      if (file_path === "json.txt") return routes["/tools/read"](req, res, body);
      res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
      if (file_path === "aborted.txt" || file_path === "endless.txt") {
        res.write("1: first\n2: sec");
        // aborted: the server gives up mid-line; endless: it waits for the client.
        if (file_path === "aborted.txt") setTimeout(() => res.destroy(), 50);
        return;
      }
      for (const c of streams[file_path]) {
        res.write(c);
        await new Promise((r) => setTimeout(r, 5));
      }
      return res.end();
    }
    const route = routes[path];
    if (!route) { res.writeHead(404); return res.end(); }
    route(req, res, body);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  baseUrl = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server.closeAllConnections();
  server.close();
});

const client = () => createToolfsClient({ baseUrl, token: "t0ken", sessionId: "s-1", sessionCwd: "sub" });

async function collect(gen) {
  const out = [];
  for await (const l of gen) out.push(l);
  return out;
}

test("read sends the token, session headers and JSON body", async () => {
  const r = await client().read({ file_path: "a.txt", offset: 2 });
  assert.equal(r.output, "read a.txt");
  const req = seen.at(-1);
  assert.equal(req.method, "POST");
  assert.equal(req.headers.authorization, "Bearer t0ken");
  assert.equal(req.headers["x-session-id"], "s-1");
  assert.equal(req.headers["x-session-cwd"], "sub");
  assert.equal(req.headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(req.body), { file_path: "a.txt", offset: 2 });
});

test("the dialect goes as ?dialect= on the tool routes; editLines posts edit_lines", async () => {
  const c = createToolfsClient({ baseUrl, dialect: "anchors" });
  await c.read({ file_path: "a.txt" });
  assert.equal(seen.at(-1).url, "/tools/read?dialect=anchors");
  await collect(c.readLines({ file_path: "split.txt" }));
  assert.equal(seen.at(-1).url, "/tools/read?dialect=anchors");
  const r = await c.editLines({ file_path: "a.txt", edits: [{ op: "replace", start: "1#SW", text: "hi" }] });
  assert.equal(r.output, "edited 1");
  assert.equal(seen.at(-1).url, "/tools/edit_lines?dialect=anchors");
  await client().read({ file_path: "a.txt" });
  assert.equal(seen.at(-1).url, "/tools/read", "no dialect, no query");
});

test("headers left unset are not sent", async () => {
  await createToolfsClient({ baseUrl }).read({ file_path: "a.txt" });
  const h = seen.at(-1).headers;
  assert.equal(h.authorization, undefined);
  assert.equal(h["x-session-id"], undefined);
  assert.equal(h["x-session-cwd"], undefined);
});

test("a problem body becomes a ToolError with code, status and output", async () => {
  const err = await client().edit({ file_path: "a.txt", old_string: "x", new_string: "y" }).catch((e) => e);
  assert.ok(err instanceof ToolError);
  assert.equal(err.name, "ToolError");
  assert.equal(err.code, "FS_STALE_VERSION");
  assert.equal(err.status, 409);
  assert.equal(err.output, 'Error: cannot edit "/r/a.txt": file changed since it was read — re-read the file, then retry');
  assert.equal(err.message, 'cannot edit "/r/a.txt": file changed since it was read — re-read the file, then retry');
});

test("a body that is not a problem becomes HTTP_ERROR with the status", async () => {
  const err = await client().write({ file_path: "a.txt", content: "x" }).catch((e) => e);
  assert.ok(err instanceof ToolError);
  assert.equal(err.code, "HTTP_ERROR");
  assert.equal(err.status, 502);
  assert.equal(err.output, "Error: HTTP 502: <h1>bad gateway</h1>");
});

test("readLines yields lines as streamed", async (t) => {
  const cases = [
    { name: "chunks split inside lines and tags", file: "split.txt",
      want: ["<path>/r/split.txt</path>", "<type>file</type>", "<content>", "1: héllo", "", "(End of file - total 1 lines)", "</content>"] },
    { name: "chunks split inside multi-byte characters", file: "bytes.txt", want: ["aé", "😀"] },
    { name: "\\r kept, empty lines kept, no final newline", file: "crlf.txt", want: ["a\r", "b", "", "c"] },
    { name: "empty body yields nothing", file: "empty.txt", want: [] },
  ];
  for (const c of cases) {
    await t.test(c.name, async () => {
      assert.deepEqual(await collect(client().readLines({ file_path: c.file })), c.want);
      assert.equal(seen.at(-1).headers.accept, "text/plain");
    });
  }
});

test("readLines throws the ToolError before any line", async () => {
  const err = await collect(client().readLines({ file_path: "missing.txt" })).catch((e) => e);
  assert.ok(err instanceof ToolError);
  assert.equal(err.code, "FS_NOT_FOUND");
  assert.equal(err.status, 404);
  assert.equal(err.output, 'Error: cannot read "/r/missing.txt": not found');
});

test("readLines refuses a body that is not text/plain", async () => {
  const err = await collect(client().readLines({ file_path: "json.txt" })).catch((e) => e);
  assert.ok(err instanceof ToolError);
  assert.equal(err.code, "HTTP_ERROR");
  assert.match(err.output, /expected text\/plain, got "application\/json"/);
});

test("an aborted transfer rejects instead of ending short", async () => {
  const got = [];
  const err = await (async () => {
    for await (const l of client().readLines({ file_path: "aborted.txt" })) got.push(l);
  })().catch((e) => e);
  assert.deepEqual(got, ["1: first"]); // the partial "2: sec" is never yielded
  assert.ok(err instanceof Error, `want an error, got ${err}`);
  assert.ok(!(err instanceof ToolError));
});

test("leaving the loop early cancels the transfer", async () => {
  for await (const l of client().readLines({ file_path: "endless.txt" })) {
    assert.equal(l, "1: first");
    break;
  }
  for (let i = 0; i < 100 && !closed.has("endless.txt"); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(closed.has("endless.txt"), "server never saw the client go away");
});

test("lines rejects invalid UTF-8", async () => {
  const stream = new ReadableStream({ start(c) { c.enqueue(enc.encode("ok\n")); c.enqueue(new Uint8Array([0xff, 0x0a])); c.close(); } });
  const got = [];
  const err = await (async () => { for await (const l of lines(stream)) got.push(l); })().catch((e) => e);
  assert.deepEqual(got, ["ok"]);
  assert.ok(err instanceof TypeError, `want TypeError, got ${err}`);
});
