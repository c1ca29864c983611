// The e2e page: loaded from an origin other than the server's, it drives the
// client and renders what it gets. The test calls window.toolfs.* and asserts
// on the DOM. Config comes from the query: ?api=<server origin>&token=<token>.
import { createToolfsClient, ToolError, type Diff } from "../src/index";
import { usage } from "../examples/usage";

const q = new URLSearchParams(location.search);
const baseUrl = q.get("api") ?? "";
const token = q.get("token") ?? "";
const fs = createToolfsClient({ baseUrl, token, sessionId: "e2e-page" });

const el = (id: string): HTMLElement => {
  const e = document.getElementById(id);
  if (!e) throw new Error(`no #${id}`);
  return e;
};

function node(tag: string, className: string, text?: string): HTMLElement {
  const e = document.createElement(tag);
  e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Outcome is what each page action reports back to the test. */
export type Outcome =
  | { ok: true; output: string }
  | { ok: false; code: string; status: number; output: string }
  | { ok: false; error: string };

// diffCard shows one hunk unified: shared leading and trailing lines are
// context, the rest is removed (old) then added (new).
function diffCard(d: Diff): HTMLElement {
  const oldLines = d.oldText === null || d.oldText === undefined ? [] : d.oldText.split("\n");
  const newLines = d.newText.split("\n");
  let pre = 0;
  while (pre < oldLines.length && pre < newLines.length && oldLines[pre] === newLines[pre]) pre++;
  let suf = 0;
  while (
    suf < oldLines.length - pre &&
    suf < newLines.length - pre &&
    oldLines[oldLines.length - 1 - suf] === newLines[newLines.length - 1 - suf]
  ) suf++;
  const card = node("div", "card diff");
  card.append(node("header", "", d.path));
  const body = node("pre", "");
  const add = (cls: string, mark: string, text: string) => body.append(node("span", `line ${cls}`, `${mark} ${text}`));
  oldLines.slice(0, pre).forEach((l) => add("ctx", " ", l));
  oldLines.slice(pre, oldLines.length - suf).forEach((l) => add("del", "-", l));
  newLines.slice(pre, newLines.length - suf).forEach((l) => add("add", "+", l));
  newLines.slice(newLines.length - suf).forEach((l) => add("ctx", " ", l));
  card.append(body);
  return card;
}

// settle runs a call and turns a ToolError into an error card.
async function settle(label: string, call: () => Promise<string>): Promise<Outcome> {
  try {
    return { ok: true, output: await call() };
  } catch (e) {
    if (e instanceof ToolError) {
      const card = node("div", "card error");
      card.append(node("header", "", `${label}: ${e.status} ${e.code}`), node("pre", "", e.output));
      el("errors").append(card);
      return { ok: false, code: e.code, status: e.status, output: e.output };
    }
    return { ok: false, error: String(e) };
  }
}

const toolfs = {
  async usage(): Promise<Outcome> {
    const out = el("usage");
    return settle("usage", async () => {
      await usage(baseUrl, token, (t) => out.append(t + "\n"));
      return out.textContent ?? "";
    });
  },
  read: (file_path: string) =>
    settle(`read ${file_path}`, async () => {
      const r = await fs.read({ file_path });
      el("read-json").textContent = r.output;
      return r.output;
    }),
  stream: (file_path: string, limit?: number) =>
    settle(`stream ${file_path}`, async () => {
      const out = el("read-stream");
      out.textContent = "";
      const got: string[] = [];
      for await (const line of fs.readLines({ file_path, limit })) {
        got.push(line);
        out.append(line + "\n");
      }
      return got.join("\n");
    }),
  edit: (file_path: string, old_string: string, new_string: string) =>
    settle(`edit ${file_path}`, async () => {
      const r = await fs.edit({ file_path, old_string, new_string });
      for (const d of r.metadata.diffs) el("diffs").append(diffCard(d));
      return r.output;
    }),
  // watch subscribes to the change feed (GET /events) for one session and
  // renders each mutation's diff as a card as its event arrives. It resolves
  // once the stream is open.
  async watch(session: string): Promise<void> {
    const feed = el("feed");
    const it = fs.events({ session });
    const first = it.next();
    void (async () => {
      for (let r = await first; !r.done; r = await it.next()) {
        const e = r.value;
        const item = node("div", "event");
        item.append(node("div", "event-head", `${e.type} ${e.path ?? ""} by ${e.session ?? "?"}`));
        for (const d of e.diffs ?? []) item.append(diffCard(d));
        feed.append(item);
      }
    })();
    await new Promise((r) => setTimeout(r, 300)); // the request is out and answered
  },
  // withToken repeats a read with another token, to see the 401 problem.
  readWithToken: (file_path: string, other: string) =>
    settle(`read ${file_path} (bad token)`, async () => {
      const r = await createToolfsClient({ baseUrl, token: other }).read({ file_path });
      return r.output;
    }),
  // probe reports whether this origin may talk to the server at all.
  async probe(): Promise<{ healthz: string; read: string }> {
    const attempt = async (f: () => Promise<unknown>) => {
      try {
        await f();
        return "ok";
      } catch (e) {
        return e instanceof ToolError ? `tool error ${e.code}` : `blocked: ${(e as Error).name}`;
      }
    };
    return {
      healthz: await attempt(async () => (await fetch(`${baseUrl}/healthz`)).text()),
      read: await attempt(() => fs.read({ file_path: "notes.txt" })),
    };
  },
};

declare global {
  interface Window {
    toolfs: typeof toolfs;
  }
}
window.toolfs = toolfs;
el("status").textContent = `origin ${location.origin} → server ${baseUrl}`;
