// Measures a new user's first minute with a release, n times: from nothing
// installed to an agent's first edit of their own folder, following the
// docs word for word. The README's "Install" commands run as written, with
// the release page's address pointed at a loopback server that serves dist/
// (so "download" is a real HTTP download of the archive and checksums.txt)
// and `sudo install ... /usr/local/bin/` pointed at a folder of the run's
// own; then the server is started the way docs/mcp.md's Claude Desktop
// configuration ("Over stdio") says, through the TypeScript SDK v1's
// StdioClientTransport (what a desktop client does with that JSON): list the
// tools, read a file, edit it. The baseline in the same run starts the
// already-installed binary (no download, no check, no unpacking). Prints the
// medians. Run: npm ci && node first-edit.mjs <dist folder> 9
import { execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [dist, n = "9"] = process.argv.slice(2);
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const version = JSON.parse(fs.readFileSync(path.join(dist, "metadata.json"), "utf8")).version;

// installSteps is the README's first indented block under "## Install",
// with the release page and the install folder replaced.
function installSteps(base, prefix) {
  const readme = fs.readFileSync(path.join(repo, "README.md"), "utf8");
  const install = readme.slice(readme.indexOf("## Install"));
  const block = install.split("\n\n").find((p) => p.startsWith("    "));
  const page = "https://github.com/toolfs/toolfs-api/releases/download";
  const sudo = "sudo install toolfs-api /usr/local/bin/";
  if (!block || !block.includes(page) || !block.includes(sudo) || !/^ {4}v=[^;]+;/.test(block)) {
    throw new Error(`README's install block is not the one this script knows:\n${block}`);
  }
  return block.split("\n").map((l) => l.slice(4)).join("\n")
    .replace(/^v=[^;]+;/, `v=${version};`).replaceAll(page, base).replace(sudo, `install toolfs-api "${prefix}/"`);
}

// desktopConfig is docs/mcp.md's claude_desktop_config.json under
// "Over stdio", with the binary's absolute path (as that section says to
// give when it is not on the application's PATH) and the user's folder.
function desktopConfig(bin, root) {
  const doc = fs.readFileSync(path.join(repo, "docs/mcp.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Over stdio"));
  const json = section.slice(section.indexOf("```json") + 7, section.indexOf("```", section.indexOf("```json") + 7));
  const s = JSON.parse(json).mcpServers.toolfs;
  if (s.command !== "toolfs-api" || !s.args.includes("/home/me/my-project")) throw new Error(`unexpected config: ${json}`);
  return { command: bin, args: s.args.map((a) => (a === "/home/me/my-project" ? root : a)) };
}

// firstEdit starts the server as the desktop configuration says on a
// fresh folder and edits a file there.
async function firstEdit(bin) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "first-edit-"));
  fs.writeFileSync(path.join(root, "notes.md"), "# Notes\nstatus: draft\n");
  const c = new Client({ name: "first-edit", version: "0" });
  await c.connect(new StdioClientTransport({ ...desktopConfig(bin, root), stderr: "ignore" }));
  await c.listTools();
  await c.callTool({ name: "read", arguments: { file_path: "notes.md" } });
  const r = await c.callTool({ name: "edit", arguments: { file_path: "notes.md", old_string: "draft", new_string: "final" } });
  await c.close();
  if (r.isError || fs.readFileSync(path.join(root, "notes.md"), "utf8") !== "# Notes\nstatus: final\n") {
    throw new Error(`the edit failed: ${JSON.stringify(r.content)}`);
  }
  fs.rmSync(root, { recursive: true, force: true });
}

// The release page: any path ending in a file dist/ holds.
const page = http.createServer((req, res) => {
  const f = path.join(dist, path.basename(new URL(req.url, "http://x").pathname));
  if (!fs.existsSync(f) || !fs.statSync(f).isFile()) { res.writeHead(404).end(); return; }
  res.writeHead(200, { "Content-Length": fs.statSync(f).size });
  fs.createReadStream(f).pipe(res);
});
await new Promise((r) => page.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${page.address().port}/toolfs/toolfs-api/releases/download`;

const fromNothing = [], installed = [];
let archiveBytes = 0;
for (let i = 0; i < Number(n); i++) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "first-minute-"));
  const prefix = path.join(home, "bin");
  fs.mkdirSync(prefix);
  let t0 = performance.now();
  // Asynchronous: the release page is served by this process.
  await promisify(execFile)("bash", ["-euo", "pipefail", "-c", installSteps(base, prefix)], { cwd: home });
  const bin = path.join(prefix, "toolfs-api");
  await firstEdit(bin);
  fromNothing.push(performance.now() - t0);
  archiveBytes = fs.readdirSync(home).filter((f) => f.endsWith(".tar.gz")).map((f) => fs.statSync(path.join(home, f)).size)[0];

  t0 = performance.now();
  await firstEdit(bin);
  installed.push(performance.now() - t0);
  fs.rmSync(home, { recursive: true, force: true });
}
page.close();
console.log(JSON.stringify({ runs: Number(n), version, archive_bytes: archiveBytes,
  download_to_first_edit_median_ms: Math.round(med(fromNothing)), download_to_first_edit_max_ms: Math.round(Math.max(...fromNothing)),
  installed_binary_first_edit_median_ms: Math.round(med(installed)) }));
