// Interop: real MCP client libraries (pinned in package-lock.json) against
// toolfs-api's /mcp, each configured exactly as docs/mcp.md shows: the URL and
// the bearer token header, nothing else (the Inspector CLI also names a
// session, as its documented config does). No model: each test calls the
// tools the way the client's agent loop would, and takes the text the client
// would hand its model. Each client, on a fresh file of its own:
//   read -> edit -> edit of a file it never read (refused with the exact
//   FS_NOT_OBSERVED text) -> a batch edit (the `edits` argument),
// with the file on disk checked after every step, and the protocol revision
// it negotiated, and whether it held an MCP session, read off the requests.
// Then the file operations of SPEC §26 (docs/files.md): mkdir, a move, a
// delete, a non-empty folder refused, and a PNG read, whose text block and
// image block each client hands on, with the official TypeScript SDK and
// the OpenAI Agents SDK (through a real Agent run: what its model is sent).
// Run: npm ci && node --test clients.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { start, summary, texts, TOKEN } from "./harness.mjs";

import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Agent, MCPServerStreamableHttp, mcpToFunctionTool, run, RunContext, setTracingDisabled } from "@openai/agents";
// The Agents SDK's own model double (hoisted with @openai/agents, whose core
// it is): a scripted model records what the runner sends it.
import { ScriptedModel, functionCall, assistantMessage } from "@openai/agents-core/testing";
import { createMCPClient } from "@ai-sdk/mcp";
import { MultiServerMCPClient } from "@langchain/mcp-adapters";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { AIMessage } from "@langchain/core/messages";

const here = path.dirname(fileURLToPath(import.meta.url));
const auth = { Authorization: `Bearer ${TOKEN}` };
let h;

before(async () => {
  h = await start();
});

after(async () => {
  await h?.stop();
});

// flow runs the four steps through call(tool, args) -> {text, isError}, the
// client's view of one tool call, on <name>.txt and <name>-unread.txt.
// refused(text) is what the client makes of a tool error's text.
async function flow(t, name, call, { refused = (text) => text } = {}) {
  const file = h.file(`${name}.txt`, "alpha\nbeta\ngamma\n");
  const unread = h.file(`${name}-unread.txt`, "one\n");

  await t.test("read", async () => {
    const r = await call("read", { file_path: `${name}.txt` });
    assert.equal(r.text, texts.read(file, ["alpha", "beta", "gamma"]));
    assert.equal(r.isError, false);
    assert.equal(h.disk(`${name}.txt`), "alpha\nbeta\ngamma\n");
  });

  await t.test("edit after the read", async () => {
    const r = await call("edit", { file_path: `${name}.txt`, old_string: "alpha", new_string: "ALPHA" });
    assert.equal(r.text, texts.edited(file));
    assert.equal(r.isError, false);
    assert.equal(h.disk(`${name}.txt`), "ALPHA\nbeta\ngamma\n");
  });

  await t.test("edit of a file never read is refused", async () => {
    const r = await call("edit", { file_path: `${name}-unread.txt`, old_string: "one", new_string: "two" });
    assert.equal(r.text, refused(texts.notObserved(unread)));
    assert.equal(r.isError, true);
    assert.equal(h.disk(`${name}-unread.txt`), "one\n");
  });

  await t.test("batch edit", async () => {
    const r = await call("edit", {
      file_path: `${name}.txt`,
      edits: [{ old_string: "beta", new_string: "BETA" }, { old_string: "gamma", new_string: "GAMMA" }],
    });
    assert.equal(r.text, texts.batch(file, 2));
    assert.equal(r.isError, false);
    assert.equal(h.disk(`${name}.txt`), "ALPHA\nBETA\nGAMMA\n");
  });
}

const onlyText = (result) => {
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, "text");
  return { text: result.content[0].text, isError: result.isError === true };
};

// Every request carried the token and nothing else of the client's choosing
// but the protocol's own headers.
function configured(requests, { sessionHeader } = {}) {
  assert.ok(requests.length > 0);
  for (const r of requests) assert.equal(r.authorization, auth.Authorization);
  assert.deepEqual(summary(requests).sessionHeaders, sessionHeader ? [sessionHeader] : []);
}

// The catalog's tools, then the checkpoint tools (extended profile; docs/checkpoints.md).
const toolNames = ["read", "write", "edit", "glob", "grep", "move", "delete", "mkdir", "changes", "revert"];

// docs/mcp.md, "Sessions": none of the stateful clients tried ends its MCP
// session on close; the session idles out after --session-ttl.
const noDelete = (requests) => assert.deepEqual(requests.filter((r) => r.method === "DELETE"), []);

test("@modelcontextprotocol/client 2.x with version negotiation: 2026-07-28, no MCP session", async (t) => {
  const p = await h.recorder();
  // versionNegotiation auto is what the SDK's own 2026-07-28 docs and
  // @openai/agents use; the default ('legacy') still initializes on 2025-11-25.
  const client = new ClientV2({ name: "toolfs-mcpclients", version: "0.0.0" }, { versionNegotiation: { mode: "auto" } });
  const transport = new TransportV2(new URL(p.url), { requestInit: { headers: auth } });
  await client.connect(transport);
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), "2026-07-28");
    assert.equal(transport.sessionId, undefined);
    assert.deepEqual((await client.listTools()).tools.map((x) => x.name), toolNames);
    await flow(t, "sdk-v2", async (name, args) => onlyText(await client.callTool({ name, arguments: args })));
  } finally {
    await client.close();
  }
  const s = summary(p.requests);
  assert.deepEqual(s.revisions, ["2026-07-28"]);
  assert.deepEqual(s.mcpSessions, []);
  assert.equal(s.rpc[0], "server/discover");
  assert.ok(!s.rpc.includes("initialize"));
  configured(p.requests);
});

test("@modelcontextprotocol/client 2.x by default: initialize on 2025-11-25, one MCP session", async () => {
  const p = await h.recorder();
  const client = new ClientV2({ name: "toolfs-mcpclients", version: "0.0.0" });
  const transport = new TransportV2(new URL(p.url), { requestInit: { headers: auth } });
  await client.connect(transport);
  try {
    assert.equal(client.getNegotiatedProtocolVersion(), "2025-11-25");
    assert.ok(transport.sessionId);
  } finally {
    await client.close();
  }
  assert.deepEqual(summary(p.requests).revisions, ["2025-11-25"]);
  assert.equal(summary(p.requests).rpc[0], "initialize");
  noDelete(p.requests);
});

test("@modelcontextprotocol/sdk 1.x: 2025-11-25 in one MCP session; another MCP session has not read", async (t) => {
  const p = await h.recorder();
  const connect = async () => {
    const client = new ClientV1({ name: "toolfs-mcpclients", version: "0.0.0" });
    const transport = new TransportV1(new URL(p.url), { requestInit: { headers: auth } });
    await client.connect(transport);
    return { client, transport };
  };
  const a = await connect();
  try {
    assert.equal(a.transport.protocolVersion, "2025-11-25");
    assert.ok(a.transport.sessionId);
    assert.deepEqual((await a.client.listTools()).tools.map((x) => x.name), toolNames);
    await flow(t, "sdk-v1", async (name, args) => onlyText(await a.client.callTool({ name, arguments: args })));
    // Each MCP session is its own policy session (docs/mcp.md, "Sessions").
    const b = await connect();
    try {
      const r = onlyText(await b.client.callTool({ name: "edit", arguments: { file_path: "sdk-v1.txt", old_string: "ALPHA", new_string: "x" } }));
      assert.deepEqual(r, { text: texts.notObserved(path.join(h.root, "sdk-v1.txt")), isError: true });
      assert.equal(h.disk("sdk-v1.txt"), "ALPHA\nBETA\nGAMMA\n");
    } finally {
      await b.client.close();
    }
  } finally {
    await a.client.close();
  }
  const s = summary(p.requests);
  assert.deepEqual(s.revisions, ["2025-11-25"]);
  assert.equal(s.mcpSessions.length, 2);
  noDelete(p.requests);
  configured(p.requests);
});

test("@openai/agents MCPServerStreamableHttp: 2026-07-28, no MCP session", async (t) => {
  const p = await h.recorder();
  const server = new MCPServerStreamableHttp({ name: "toolfs", url: p.url, requestInit: { headers: auth } });
  await server.connect();
  try {
    assert.deepEqual((await server.listTools()).map((x) => x.name), toolNames);
    assert.equal(server.sessionId, undefined);
    // callTool answers the content blocks the agent hands its model (one
    // block: that block); a tool error is its text, not an exception.
    await flow(t, "openai-agents", async (name, args) => {
      const content = await server.callTool(name, args);
      assert.equal(content.length, 1);
      assert.equal(content[0].type, "text");
      return { text: content[0].text, isError: content[0].text.startsWith("Error: ") };
    });
    // The function tool an Agent runs answers that one block as it is.
    const read = mcpToFunctionTool((await server.listTools())[0], server, false);
    const out = await read.invoke(new RunContext(), JSON.stringify({ file_path: "openai-agents.txt" }));
    assert.deepEqual(out, { type: "text", text: texts.read(path.join(h.root, "openai-agents.txt"), ["ALPHA", "BETA", "GAMMA"]) });
  } finally {
    await server.close();
  }
  const s = summary(p.requests);
  assert.deepEqual(s.revisions, ["2026-07-28"]);
  assert.deepEqual(s.mcpSessions, []);
  assert.equal(s.rpc[0], "server/discover");
  configured(p.requests);
});

// docs/mcp.md, "Which edit tool": the configuration given for GPT models,
// the URL with ?dialect=apply_patch, offers apply_patch in edit's place,
// and a patch applies through the agent's client.
test("@openai/agents with ?dialect=apply_patch: apply_patch instead of edit", async () => {
  const p = await h.recorder();
  const server = new MCPServerStreamableHttp({ name: "toolfs", url: `${p.url}?dialect=apply_patch`, requestInit: { headers: auth } });
  await server.connect();
  try {
    assert.deepEqual((await server.listTools()).map((x) => x.name), ["read", "write", "apply_patch", "glob", "grep", "move", "delete", "mkdir", "changes", "revert"]);
    const file = h.file("openai-agents-patch.txt", "alpha\nbeta\n");
    const read = await server.callTool("read", { file_path: "openai-agents-patch.txt" });
    assert.equal(read[0].text, texts.read(file, ["alpha", "beta"]));
    const content = await server.callTool("apply_patch", {
      input: "*** Begin Patch\n*** Update File: openai-agents-patch.txt\n@@\n alpha\n-beta\n+BETA\n*** End Patch",
    });
    assert.equal(content.length, 1);
    assert.equal(content[0].text, `Applied the patch: 1 file(s) changed.\nM ${file}`);
    assert.equal(h.disk("openai-agents-patch.txt"), "alpha\nBETA\n");
  } finally {
    await server.close();
  }
  configured(p.requests);
});

test("@ai-sdk/mcp createMCPClient (http transport): 2026-07-28, no MCP session", async (t) => {
  const p = await h.recorder();
  const client = await createMCPClient({ transport: { type: "http", url: p.url, headers: auth } });
  try {
    const tools = await client.tools();
    assert.deepEqual(Object.keys(tools), toolNames);
    // It closes each input schema (docs/mcp.md).
    const catalog = await (await fetch(`${p.base}/tools`, { headers: auth })).json();
    assert.deepEqual(await tools.read.inputSchema.jsonSchema, { ...catalog.tools[0].parameters, additionalProperties: false });
    await flow(t, "ai-sdk", async (name, args) => {
      const result = await tools[name].execute(args, { toolCallId: `call-${name}`, messages: [] });
      // What the model is sent: the text block alone (toModelOutput).
      const shown = await tools[name].toModelOutput({ toolCallId: `call-${name}`, input: args, output: result });
      assert.equal(shown.type, "content");
      assert.deepEqual(shown.value, [{ type: "text", text: onlyText(result).text }]);
      return onlyText(result);
    });
  } finally {
    await client.close();
  }
  const s = summary(p.requests);
  assert.deepEqual(s.revisions, ["2026-07-28"]);
  assert.deepEqual(s.mcpSessions, []);
  assert.equal(s.rpc[0], "server/discover");
  configured(p.requests);
});

test("@langchain/mcp-adapters MultiServerMCPClient: 2025-11-25 in one MCP session", async (t) => {
  const p = await h.recorder();
  const client = new MultiServerMCPClient({ mcpServers: { toolfs: { url: p.url, headers: auth } } });
  try {
    const tools = await client.getTools();
    assert.deepEqual(tools.map((x) => x.name), toolNames);
    // LangGraph's ToolNode is what an agent runs the tools with: a tool error
    // reaches the model wrapped in LangChain's own words.
    const node = new ToolNode(tools);
    let n = 0;
    await flow(
      t,
      "langchain",
      async (name, args) => {
        const id = `call-${++n}`;
        const out = await node.invoke({ messages: [new AIMessage({ content: "", tool_calls: [{ id, name, args }] })] });
        assert.equal(out.messages.length, 1);
        const m = out.messages[0];
        assert.equal(m.tool_call_id, id);
        assert.equal(typeof m.content, "string");
        return { text: m.content, isError: m.status === "error" };
      },
      { refused: (text) => `Error: MCP tool 'edit' on server 'toolfs' returned an error: ${text}\n Please fix your mistakes.` },
    );
  } finally {
    await client.close();
  }
  const s = summary(p.requests);
  assert.deepEqual(s.revisions, ["2025-11-25"]);
  assert.equal(s.mcpSessions.length, 1);
  assert.equal(s.rpc[0], "initialize");
  noDelete(p.requests);
  configured(p.requests);
});

test("sessionless clients share the default session", async () => {
  // One read by the AI SDK client lets the OpenAI Agents client edit: neither
  // sends anything the server could tell them apart by.
  const p = await h.recorder();
  const file = h.file("shared.txt", "shared\n");
  const ai = await createMCPClient({ transport: { type: "http", url: p.url, headers: auth } });
  const agents = new MCPServerStreamableHttp({ name: "toolfs", url: p.url, requestInit: { headers: auth } });
  await agents.connect();
  try {
    await (await ai.tools()).read.execute({ file_path: "shared.txt" }, { toolCallId: "r", messages: [] });
    const content = await agents.callTool("edit", { file_path: "shared.txt", old_string: "shared", new_string: "edited" });
    assert.equal(content[0].text, texts.edited(file));
    assert.equal(h.disk("shared.txt"), "edited\n");
  } finally {
    await ai.close();
    await agents.close();
  }
  assert.deepEqual(summary(p.requests).mcpSessions, []);
});

// The MCP Inspector's CLI: one process per call, as docs/mcp.md shows it.
const inspectorBin = path.join(here, "node_modules", ".bin", "mcp-inspector");

// The command line of docs/mcp.md: the URL first (--header and --tool-arg
// take several values each); a --tool-arg value that parses as JSON is sent
// as JSON, so edits is an array.
async function inspector(url, tool, args, headers) {
  const argv = ["--cli", url, "--transport", "http"];
  for (const hd of headers) argv.push("--header", hd);
  argv.push("--method", "tools/call", "--tool-name", tool, "--tool-arg");
  for (const [k, v] of Object.entries(args)) argv.push(`${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  let stdout, code;
  try {
    ({ stdout } = await promisify(execFile)(inspectorBin, argv, { timeout: 60000 }));
    code = 0;
  } catch (e) {
    ({ stdout, code } = e);
  }
  const result = JSON.parse(stdout);
  // Exit 5 is its "the tool returned isError" (TOOL_ERROR).
  assert.equal(code, result.isError === true ? 5 : 0, `exit ${code}: ${stdout}`);
  return onlyText(result);
}

test("MCP Inspector CLI with its session header: each call a new MCP session, one policy session", async (t) => {
  const p = await h.recorder();
  const headers = [`Authorization: Bearer ${TOKEN}`, "X-Session-ID: inspector-task"];
  await flow(t, "inspector", (name, args) => inspector(p.url, name, args, headers));
  const s = summary(p.requests);
  assert.deepEqual(s.revisions, ["2025-11-25"]);
  assert.equal(s.rpc.filter((m) => m === "initialize").length, 4);
  assert.equal(s.mcpSessions.length, 4, "one MCP session per process");
  noDelete(p.requests);
  configured(p.requests, { sessionHeader: "inspector-task" });
});

test("MCP Inspector CLI without a session header: a read does not carry to the next call", async () => {
  const p = await h.recorder();
  const file = h.file("inspector-bare.txt", "bare\n");
  const headers = [`Authorization: Bearer ${TOKEN}`];
  const read = await inspector(p.url, "read", { file_path: "inspector-bare.txt" }, headers);
  assert.deepEqual(read, { text: texts.read(file, ["bare"]), isError: false });
  const edit = await inspector(p.url, "edit", { file_path: "inspector-bare.txt", old_string: "bare", new_string: "x" }, headers);
  assert.deepEqual(edit, { text: texts.notObserved(file), isError: true });
  assert.equal(h.disk("inspector-bare.txt"), "bare\n");
  assert.equal(summary(p.requests).mcpSessions.length, 2);
});

// png is a w x h RGB PNG, encoded here so the suite needs no image library.
function png(w, h) {
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
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const rows = [];
  for (let y = 0; y < h; y++) {
    rows.push(Buffer.from([0]));
    for (let x = 0; x < w; x++) rows.push(Buffer.from([x * 40, y * 60, 128]));
  }
  const sig = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([sig, chunk("IHDR", ihdr), chunk("IDAT", zlib.deflateSync(Buffer.concat(rows))), chunk("IEND", Buffer.alloc(0))]);
}

// fileOps runs mkdir, read then move, delete, a refused delete of a
// non-empty folder, and a PNG read, through call(tool, args) -> content
// blocks, on names of its own; the disk is checked after each step.
async function fileOps(t, name, call) {
  const abs = (rel) => path.join(h.root, rel);
  h.file(`${name}-a.txt`, "a\n");
  const image = png(3, 2);
  fs.writeFileSync(abs(`${name}.png`), image);
  const one = (blocks) => {
    assert.equal(blocks.length, 1);
    assert.equal(blocks[0].type, "text");
    return blocks[0].text;
  };

  await t.test("mkdir", async () => {
    assert.equal(one(await call("mkdir", { path: `${name}-dir/sub` })), `Created folder ${abs(`${name}-dir/sub`)}.`);
    assert.ok(fs.statSync(abs(`${name}-dir/sub`)).isDirectory());
  });
  await t.test("move after a read", async () => {
    await call("read", { file_path: `${name}-a.txt` });
    assert.equal(one(await call("move", { from: `${name}-a.txt`, to: `${name}-dir/sub/b.txt` })), `Moved ${abs(`${name}-a.txt`)} to ${abs(`${name}-dir/sub/b.txt`)}.`);
    assert.equal(fs.existsSync(abs(`${name}-a.txt`)), false);
    assert.equal(h.disk(`${name}-dir/sub/b.txt`), "a\n");
  });
  await t.test("delete of a non-empty folder is refused", async () => {
    assert.equal(one(await call("delete", { file_path: `${name}-dir` })), `Error: cannot delete "${abs(`${name}-dir`)}": the folder is not empty`);
    assert.equal(h.disk(`${name}-dir/sub/b.txt`), "a\n");
  });
  await t.test("delete", async () => {
    assert.equal(one(await call("delete", { file_path: `${name}-dir/sub/b.txt` })), `Deleted ${abs(`${name}-dir/sub/b.txt`)}.`);
    assert.equal(fs.existsSync(abs(`${name}-dir/sub/b.txt`)), false);
  });
  await t.test("read of a PNG: a text block, then the image block", async () => {
    const blocks = await call("read", { file_path: `${name}.png` });
    assert.deepEqual(blocks, [
      { type: "text", text: `<path>${abs(`${name}.png`)}</path>\n<type>image</type>\n<content>\nimage/png, 3x2 pixels, ${image.length} bytes\n</content>` },
      { type: "image", data: image.toString("base64"), mimeType: "image/png" },
    ]);
  });
  return { abs, image };
}

test("file operations and a PNG read with @modelcontextprotocol/sdk 1.x", async (t) => {
  const p = await h.recorder();
  const client = new ClientV1({ name: "toolfs-mcpclients", version: "0.0.0" });
  await client.connect(new TransportV1(new URL(p.url), { requestInit: { headers: auth } }));
  try {
    const tools = (await client.listTools()).tools;
    const hints = Object.fromEntries(tools.map((x) => [x.name, x.annotations?.destructiveHint]));
    assert.deepEqual([hints.move, hints.delete, hints.mkdir], [true, true, false]);
    await fileOps(t, "files-sdk", async (name, args) => (await client.callTool({ name, arguments: args })).content);
  } finally {
    await client.close();
  }
  configured(p.requests);
});

test("file operations and a PNG read with @openai/agents: what an Agent's model is sent", async (t) => {
  setTracingDisabled(true);
  const p = await h.recorder();
  const server = new MCPServerStreamableHttp({ name: "toolfs", url: p.url, requestInit: { headers: auth } });
  await server.connect();
  try {
    const { abs, image } = await fileOps(t, "files-agents", (name, args) => server.callTool(name, args));
    // A real run: the scripted model asks for the PNG, and the runner sends
    // the model the tool's text and the picture as one function call output.
    const model = new ScriptedModel([[functionCall("read", { file_path: "files-agents.png" }, { callId: "c1" })], [assistantMessage("seen")]]);
    const result = await run(new Agent({ name: "looker", instructions: "Look at the file.", model, mcpServers: [server] }), "What is in files-agents.png?");
    assert.equal(result.finalOutput, "seen");
    const output = model.calls[1].request.input.find((i) => i.type === "function_call_result" && i.callId === "c1");
    assert.deepEqual(output.output, [
      { type: "input_text", text: `<path>${abs("files-agents.png")}</path>\n<type>image</type>\n<content>\nimage/png, 3x2 pixels, ${image.length} bytes\n</content>` },
      { type: "input_image", image: `data:image/png;base64,${image.toString("base64")}` },
    ]);
  } finally {
    await server.close();
  }
  configured(p.requests);
});
