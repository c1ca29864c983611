// A consumer of the packed package, type-checked by scripts/pack-check.sh in
// a fresh project under nodenext and bundler resolution: every method of the
// client, the types a caller names, and the browser bundle's entry.
import { createToolfsClient, lines, ToolError, VERSION } from "@toolfs/client";
import type {
  ApplyPatchResult, Catalog, ChangesResult, EditLinesResult, EditResult, FileListing, Health,
  ReadResult, RevertResult, SearchResult, WriteResult, ApprovalList, FeedEvent, paths,
} from "@toolfs/client";
import * as browser from "@toolfs/client/browser";

export async function everyRoute(): Promise<string[]> {
  const c = createToolfsClient({ baseUrl: "http://127.0.0.1:8080", sessionId: "s", dialect: "all" });
  const r: ReadResult = await c.read({ file_path: "a.txt" });
  for await (const line of c.readLines({ file_path: "a.txt" })) void line;
  const w: WriteResult = await c.write({ file_path: "a.txt", content: "x\n" });
  const e: EditResult = await c.edit({ file_path: "a.txt", old_string: "x", new_string: "y" });
  const el: EditLinesResult = await c.editLines({ file_path: "a.txt", edits: [{ op: "replace", start: "1#ab", text: "z" }] });
  const p: ApplyPatchResult = await c.applyPatch({ input: "*** Begin Patch\n*** End Patch" });
  const g: SearchResult = await c.glob({ pattern: "**/*.ts" });
  const gr: SearchResult = await c.grep({ pattern: "TODO", include: "*.go" });
  const m: { status: number; text: string } = await c.model("grep", { pattern: "x" });
  const cat: Catalog = await c.catalog();
  const other: unknown = await c.catalogAs("openai");
  const ch: ChangesResult = await c.changes("s");
  const rv: RevertResult = await c.revert("s", { to: 0 });
  await c.forgetSession("s");
  const ap: ApprovalList = await c.listApprovals({ wait: "1s", after: 0 });
  await c.decide("id", "approve");
  for await (const ev of c.events({ session: "s" })) { const f: FeedEvent = ev; void f; break; }
  const l: FileListing = await c.list("", { depth: 2, ignoreGit: true });
  const d = await c.download("a.txt");
  const u = await c.upload("b.txt", "hello", { createOnly: true });
  await c.remove("b.txt", u.etag);
  const h: Health = await c.health();
  const rd: Health = await c.ready();
  const text: string = (await c.metrics()) + (await c.openapi());
  const view: unknown = await c.openapiTools();
  const raw = await c.api.GET("/healthz");
  const route: keyof paths = "/tools/grep";
  try { await c.read({ file_path: "" }); } catch (err) { if (err instanceof ToolError) return [err.code]; }
  void [r, w, e, el, p, g, gr, m, cat, other, ch, rv, ap, l, d, h, rd, text, view, raw, lines, browser.createToolfsClient];
  return [VERSION, route];
}
