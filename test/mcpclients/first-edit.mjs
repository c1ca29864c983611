// Measures a new user's first minute with a release archive, n times: from
// the archive on disk (as downloaded, with checksums.txt) to an agent's
// first edit of their own folder over stdio, the way a desktop client runs
// the server: check the archive's SHA-256, unpack the binary, start it with
// --stdio through the TypeScript SDK v1's StdioClientTransport, list the
// tools, read a file, edit it. The baseline in the same run starts an
// already-installed binary (no check, no unpacking). Prints the medians.
// Run: npm ci && node first-edit.mjs <dist folder> <archive name> 9
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [dist, archive, n = "9"] = process.argv.slice(2);
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// firstEdit starts bin over stdio on a fresh folder and edits a file there.
async function firstEdit(bin) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "first-edit-"));
  fs.writeFileSync(path.join(root, "notes.md"), "# Notes\nstatus: draft\n");
  const c = new Client({ name: "first-edit", version: "0" });
  await c.connect(new StdioClientTransport({ command: bin, args: ["--stdio", "--root", root], stderr: "ignore" }));
  await c.listTools();
  await c.callTool({ name: "read", arguments: { file_path: "notes.md" } });
  const r = await c.callTool({ name: "edit", arguments: { file_path: "notes.md", old_string: "draft", new_string: "final" } });
  await c.close();
  if (r.isError || fs.readFileSync(path.join(root, "notes.md"), "utf8") !== "# Notes\nstatus: final\n") {
    throw new Error(`the edit failed: ${JSON.stringify(r.content)}`);
  }
  fs.rmSync(root, { recursive: true, force: true });
}

const fromArchive = [], installed = [];
let bin;
for (let i = 0; i < Number(n); i++) {
  let t0 = performance.now();
  const want = fs.readFileSync(path.join(dist, "checksums.txt"), "utf8").split("\n")
    .find((l) => l.endsWith(`  ${archive}`))?.split(" ")[0];
  const got = createHash("sha256").update(fs.readFileSync(path.join(dist, archive))).digest("hex");
  if (!want || want !== got) throw new Error(`checksum of ${archive}: want ${want}, got ${got}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "install-"));
  execFileSync("tar", ["xzf", path.join(dist, archive), "-C", dir, "toolfs-api"]);
  bin = path.join(dir, "toolfs-api");
  await firstEdit(bin);
  fromArchive.push(performance.now() - t0);

  t0 = performance.now();
  await firstEdit(bin);
  installed.push(performance.now() - t0);
}
console.log(JSON.stringify({ runs: Number(n), archive_to_first_edit_median_ms: Math.round(med(fromArchive)),
  installed_binary_first_edit_median_ms: Math.round(med(installed)) }));
