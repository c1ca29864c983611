// Every route the package adds beyond read, write, edit, files, changes,
// revert, approvals and events, through the package's own build
// (dist/index.js, what `import "@toolfs/client"` loads) against the real
// server: glob, grep, apply_patch, the /model text answers, the catalog in
// both shapes, forgetting a session, health, readiness, metrics and the
// OpenAPI documents; and the package's version is the contract's.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createToolfsClient, ToolError, VERSION } from "../dist/index.js";
import { pkg, repo, serverBinary, startServer, tempDir } from "../testing/harness.mjs";

let tmp, root, server, c;

before(async () => {
  tmp = tempDir("toolfs-routes-");
  root = path.join(tmp, "root");
  fs.mkdirSync(path.join(root, "src"), { recursive: true });
  fs.writeFileSync(path.join(root, "src/a.go"), "package a\n// TODO: one\n");
  fs.writeFileSync(path.join(root, "notes.txt"), "alpha\nbeta\n");
  server = await startServer(await serverBinary(tmp), { dir: tmp, args: ["--root", root, "--token", "t0k"] });
  c = createToolfsClient({ baseUrl: server.origin, token: "t0k", sessionId: "routes" });
});

after(async () => {
  await server?.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test("VERSION is package.json's and api/openapi.yaml's info.version", () => {
  const json = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8"));
  const yaml = fs.readFileSync(path.join(repo, "api/openapi.yaml"), "utf8");
  const info = yaml.match(/^info:\n(?:  .*\n)*?  version: (\S+)$/m);
  assert.ok(info, "api/openapi.yaml has no info.version");
  assert.equal(VERSION, json.version);
  assert.equal(VERSION, info[1]);
});

test("glob and grep", async () => {
  const g = await c.glob({ pattern: "**/*.go" });
  assert.equal(g.output, "src/a.go");
  const r = await c.grep({ pattern: "TODO", include: "*.go" });
  assert.equal(r.output, "Found 1 match\n\nsrc/a.go\nLine 2: // TODO: one");
  await assert.rejects(c.grep({ pattern: "(" }), (e) => e instanceof ToolError && e.status === 400 && e.code === "SEARCH_INVALID_PATTERN");
});

test("applyPatch, then the model text of a read", async () => {
  await c.read({ file_path: "notes.txt" });
  const p = await c.applyPatch({ input: "*** Begin Patch\n*** Update File: notes.txt\n@@\n alpha\n-beta\n+gamma\n*** End Patch" });
  assert.equal(p.output, `Applied the patch: 1 file(s) changed.\nM ${root}/notes.txt`);
  assert.equal(fs.readFileSync(path.join(root, "notes.txt"), "utf8"), "alpha\ngamma\n");
  const m = await c.model("read", { file_path: "notes.txt", offset: 2 });
  assert.equal(m.status, 200);
  assert.equal(m.text, `<path>${root}/notes.txt</path>\n<type>file</type>\n<content>\n2: gamma\n\n(End of file - total 2 lines)\n</content>`);
  const miss = await c.model("read", { file_path: "nope.txt" });
  assert.deepEqual(miss, { status: 404, text: `Error: cannot read "${root}/nope.txt": not found` });
});

test("the catalog, in our shape and OpenAI's", async () => {
  const cat = await c.catalog();
  assert.deepEqual(cat.tools.map((t) => t.name).slice(0, 5), ["read", "write", "edit", "glob", "grep"]);
  const openai = await c.catalogAs("openai");
  assert.equal(openai[0].type, "function");
  assert.equal(openai[0].function.name, "read");
});

test("forgetSession: a forgotten session must read again before it edits", async () => {
  await c.read({ file_path: "src/a.go" });
  await c.forgetSession("routes");
  await c.forgetSession("never-seen"); // unknown ids are fine
  await assert.rejects(c.edit({ file_path: "src/a.go", old_string: "one", new_string: "two" }),
    (e) => e instanceof ToolError && e.status === 409 && e.code === "FS_NOT_OBSERVED");
});

test("health, readiness, metrics and the OpenAPI documents", async () => {
  assert.deepEqual(await c.health(), { status: "ok" });
  assert.deepEqual(await c.ready(), { status: "ok" });
  assert.match(await c.metrics(), /^toolfs_tool_calls_total\{code="ok",tool="glob",transport="rest"\} 1$/m);
  assert.match(await c.openapi(), /^openapi: 3\.0\.3$/m);
  const view = await c.openapiTools();
  assert.ok(view.paths["/model/read"], "the tool view lists /model/read");
  const anon = createToolfsClient({ baseUrl: server.origin });
  await assert.rejects(anon.metrics(), (e) => e instanceof ToolError && e.status === 401 && e.code === "UNAUTHORIZED");
});
