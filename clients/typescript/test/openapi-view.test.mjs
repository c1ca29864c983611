// The tool-only view (GET /openapi.json) through a JavaScript OpenAPI
// toolchain: @apidevtools/swagger-parser validates it (and the full
// contract, /openapi-full.json) against the OpenAPI 3.0 schema, then the
// test imports it as Open WebUI and LibreChat do (a tool per operationId,
// parameters from the body schema, calls POSTed to servers[0].url + path)
// and runs read → edit → a refused edit with nothing but the token.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import SwaggerParser from "@apidevtools/swagger-parser";
import { freePort, serverBinary, startServer, tempDir } from "../testing/harness.mjs";

const TOKEN = "view-token-91c2";
let tmp, root, server, base;

before(async () => {
  tmp = tempDir("toolfs-view-");
  root = path.join(tmp, "root");
  fs.mkdirSync(root);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = await startServer(await serverBinary(tmp), { dir: tmp, port, args: ["--root", root, "--token", TOKEN,
    "--default-session", "frontend", "--public-url", `${base}/`] });
});

after(async () => {
  await server?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const auth = { Authorization: `Bearer ${TOKEN}` };
const getJSON = async (p) => {
  const r = await fetch(base + p, { headers: auth });
  assert.equal(r.status, 200);
  return r.json();
};

test("the view and the full contract are valid OpenAPI 3.0 for swagger-parser", async () => {
  const view = await getJSON("/openapi.json");
  const checked = await SwaggerParser.validate(structuredClone(view));
  assert.match(checked.openapi, /^3\.0\./);
  assert.deepEqual(view.servers, [{ url: base }]);
  assert.deepEqual(Object.keys(view.paths), ["/model/read", "/model/write", "/model/edit", "/model/glob", "/model/grep", "/model/move", "/model/delete", "/model/mkdir"]
    .filter((p) => !p.endsWith("glob") && !p.endsWith("grep") || fs.existsSync("/usr/bin/rg")));
  for (const [p, item] of Object.entries(view.paths)) {
    assert.deepEqual(Object.keys(item), ["post"], p);
    assert.equal(item.post.operationId, p.slice("/model/".length));
    assert.equal(item.post.parameters, undefined, `${p}: no header parameters`);
  }
  assert.deepEqual(view.security, [{ bearerAuth: [] }]);

  const full = await getJSON("/openapi-full.json");
  await SwaggerParser.validate(structuredClone(full));
  assert.ok(full.paths["/tools/read"] && full.paths["/model/read"] && full.paths["/openapi.json"]);
});

test("an importer runs read, edit and a refused edit with only the token", async () => {
  fs.writeFileSync(path.join(root, "notes.md"), "# Notes\n- todo: ship\n");
  fs.writeFileSync(path.join(root, "other.md"), "other\n");
  const view = await getJSON("/openapi.json");
  const catalog = await getJSON("/tools");

  // Open WebUI's conversion: operationId → name, description (else
  // summary), parameters from every parameter and the JSON body schema.
  const tools = {};
  for (const [p, item] of Object.entries(view.paths)) {
    for (const op of Object.values(item)) {
      if (!op.operationId) continue;
      const schema = op.requestBody.content["application/json"].schema;
      tools[op.operationId] = {
        description: op.description ?? op.summary,
        parameters: { type: "object", properties: { ...schema.properties }, required: [...(schema.required ?? [])] },
        url: view.servers[0].url + p,
      };
    }
  }
  for (const t of catalog.tools) {
    assert.equal(tools[t.name].description, `${t.description}\n\n${t.guidance}`);
    assert.deepEqual(tools[t.name].parameters, t.parameters, `${t.name}: the model sees the catalog's schema`);
  }
  const call = async (name, args) => {
    const r = await fetch(tools[name].url, {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json" },
      body: JSON.stringify(args),
    });
    assert.equal(r.headers.get("content-type"), "text/plain; charset=utf-8");
    const text = await r.text();
    return r.ok ? text : `HTTP error ${r.status}: ${text}`;
  };

  const p = path.join(root, "notes.md");
  assert.equal(await call("read", { file_path: "notes.md" }),
    `<path>${p}</path>\n<type>file</type>\n<content>\n1: # Notes\n2: - todo: ship\n\n(End of file - total 2 lines)\n</content>`);
  assert.equal(await call("edit", { file_path: "notes.md", old_string: "todo", new_string: "done" }),
    `The file ${p} has been updated successfully.`);
  assert.equal(fs.readFileSync(p, "utf8"), "# Notes\n- done: ship\n");
  assert.equal(await call("edit", { file_path: "other.md", old_string: "other", new_string: "x" }),
    `HTTP error 409: Error: edit requires reading "${path.join(root, "other.md")}" first — read the file, then retry`);
});
