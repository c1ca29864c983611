// Typed client for toolfs-api. Every call goes through openapi-fetch with the
// types generated from api/openapi.yaml (src/schema.d.ts, `npm run generate`);
// the only hand-written parts are the streamed read and the error type.
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";

/**
 * VERSION is this package's version, the server release it was built with:
 * api/openapi.yaml's info.version (test/package.test.mjs holds them equal).
 */
export const VERSION = "0.1.0";

type Schemas = components["schemas"];
/** ReadRequest is the body of POST /tools/read. */
export type ReadRequest = Schemas["ReadRequest"];
/** ReadResult is the JSON answer of a read. */
export type ReadResult = Schemas["ReadResult"];
/** WriteRequest is the body of POST /tools/write. */
export type WriteRequest = Schemas["WriteRequest"];
/** WriteResult is the answer of a write. */
export type WriteResult = Schemas["WriteResult"];
/** EditRequest is the body of POST /tools/edit. */
export type EditRequest = Schemas["EditRequest"];
/** EditLinesRequest is the body of POST /tools/edit_lines: lines replaced, deleted and inserted by their anchors. */
export type EditLinesRequest = Schemas["EditLinesRequest"];
/** EditLinesResult is the answer of an edit_lines. */
export type EditLinesResult = Schemas["EditLinesResult"];
/** MoveRequest is the body of POST /tools/move: a file or folder moved inside the root (extended profile). */
export type MoveRequest = Schemas["MoveRequest"];
/** MoveResult is the answer of a move. */
export type MoveResult = Schemas["MoveResult"];
/** DeleteRequest is the body of POST /tools/delete: a file the session read, or an empty folder. */
export type DeleteRequest = Schemas["DeleteRequest"];
/** DeleteResult is the answer of a delete tool call. */
export type DeleteResult = Schemas["DeleteResult"];
/** MkdirRequest is the body of POST /tools/mkdir: a folder and its missing parents. */
export type MkdirRequest = Schemas["MkdirRequest"];
/** MkdirResult is the answer of a mkdir. */
export type MkdirResult = Schemas["MkdirResult"];
/** Dialect is an edit dialect: which edit tool a model is offered, and whether read shows anchors. */
export type Dialect = "str_replace" | "apply_patch" | "anchors" | "all";
/** ApplyPatchRequest is the body of POST /tools/apply_patch: a patch in Codex's grammar, or OpenAI's apply_patch_call operations. */
export type ApplyPatchRequest = Schemas["ApplyPatchRequest"];
/** ApplyPatchResult is the answer of an apply_patch. */
export type ApplyPatchResult = Schemas["ApplyPatchResult"];
/** GlobRequest is the body of POST /tools/glob. */
export type GlobRequest = Schemas["GlobRequest"];
/** GrepRequest is the body of POST /tools/grep. */
export type GrepRequest = Schemas["GrepRequest"];
/** SearchResult is the answer of a glob or grep. */
export type SearchResult = Schemas["SearchResult"];
/** Catalog is GET /tools without a format: each tool's name, description, parameters and guidance. */
export type Catalog = Schemas["Catalog"];
/** CatalogFormat is an ecosystem's shape of the catalog (GET /tools?format=). */
export type CatalogFormat = "openai" | "anthropic" | "mcp";
/** Health is the answer of /healthz and /readyz. */
export type Health = Schemas["Health"];
/** ModelTool is a tool with a /model/<tool> route: its answer is the model text alone. */
export type ModelTool = "read" | "write" | "edit" | "apply_patch" | "edit_lines" | "glob" | "grep" | "move" | "delete" | "mkdir";
/** EditResult is the answer of an edit. */
export type EditResult = Schemas["EditResult"];
/** Diff is one hunk of a write or edit, with 3 lines of context. */
export type Diff = Schemas["Diff"];
/** Problem is the RFC 9457 error body with the stable `code` and model text `output`. */
export type Problem = Schemas["Problem"];
/** Approval is a pending sandbox escalation waiting for a person (docs/sandbox.md). */
export type Approval = Schemas["Approval"];
/** ApprovalList is GET /approvals: the pending approvals, oldest first, and the cursor for the next long poll. */
export type ApprovalList = Schemas["ApprovalList"];
/** Change is one change of a session's history (docs/checkpoints.md). */
export type Change = Schemas["Change"];
/** ChangesResult is GET /sessions/{id}/changes: the history, newest first, and its model text. */
export type ChangesResult = Schemas["ChangesResult"];
/** RevertRequest is the body of POST /sessions/{id}/revert. */
export type RevertRequest = Schemas["RevertRequest"];
/** RevertResult is a revert's answer: the model text and each restored file's diffs. */
export type RevertResult = Schemas["RevertResult"];
/** Decision is a person's answer to an approval. */
export type Decision = Schemas["ApprovalDecision"]["decision"];

/** ListApprovalsOptions are the long-poll options of listApprovals. */
export interface ListApprovalsOptions extends CallOptions {
  /** wait long-polls up to this Go duration (e.g. "30s", at most "60s") for an approval opened after `after`. */
  wait?: string;
  /** after is the cursor of a previous answer: only newer approvals end the wait. */
  after?: number;
}

/** ChangeEvent is one event of the change feed, GET /events (docs/events.md). */
export type ChangeEvent = Schemas["ChangeEvent"];
/** FeedEvent is a ChangeEvent with its SSE id (pass it as lastEventId to resume). */
export type FeedEvent = ChangeEvent & { id: string };

/** EventsOptions filter and resume the change feed. */
export interface EventsOptions extends CallOptions {
  /** session keeps only the mutations of these sessions (external changes have none). */
  session?: string | string[];
  /** path keeps only events at or under these root-relative paths, by whole segments. */
  path?: string | string[];
  /** lastEventId resumes after this event (the id of a FeedEvent). */
  lastEventId?: string;
  /** retryMs is the wait before reconnecting; default the server's `retry:` (2000 ms). */
  retryMs?: number;
}

/** FileListing is GET /files: a folder's entries sorted by path (docs/files.md). */
export type FileListing = Schemas["FileListing"];
/** FileEntry is one listed entry. */
export type FileEntry = Schemas["FileEntry"];
/** FileUpload is the answer of an upload. */
export type FileUpload = Schemas["FileUpload"];

/** ListOptions shape a listing. */
export interface ListOptions extends CallOptions {
  /** depth is 1..8 levels (default 1). */
  depth?: number;
  /** ignoreGit leaves out what the root's .gitignore files ignore. */
  ignoreGit?: boolean;
}

/** Download is a downloaded file: its bytes as a Blob, or as a stream with `stream: true`. */
export interface Download {
  blob?: Blob;
  stream?: ReadableStream<Uint8Array>;
  /** etag is the file's version as sent (quotes included): pass it to upload or remove. */
  etag: string;
  contentType: string;
  size: number;
}

/** DownloadOptions: `stream` returns the body unread; `ifNoneMatch` answers `notModified` when the file is still at that ETag. */
export interface DownloadOptions extends CallOptions {
  stream?: boolean;
  ifNoneMatch?: string;
}

/** UploadOptions are an upload's precondition and progress. */
export interface UploadOptions extends CallOptions {
  /** ifMatch is the ETag of the file being replaced (required to replace one). */
  ifMatch?: string;
  /** createOnly sends If-None-Match: * (fails with 412 if the file exists). */
  createOnly?: boolean;
  /** onProgress hears the bytes sent so far and the total. */
  onProgress?: (sent: number, total: number) => void;
}

/** ToolfsOptions configures createToolfsClient. */
export interface ToolfsOptions {
  /** baseUrl is the server's origin, e.g. "http://127.0.0.1:8080". */
  baseUrl: string;
  /** token is sent as `Authorization: Bearer <token>` when set. */
  token?: string;
  /** sessionId is sent as X-Session-ID (1–128 of A-Za-z0-9._:-); write and edit need it while the policy is on. */
  sessionId?: string;
  /** sessionCwd is sent as X-Session-Cwd: the folder relative paths resolve against. */
  sessionCwd?: string;
  /**
   * dialect is sent as ?dialect= on read, readLines, write, edit and
   * editLines; with "anchors" or "all", read shows each line as
   * `<n>#<tag>: <text>` and its metadata lines carry `tag` (docs/edits.md).
   */
  dialect?: Dialect;
  /** fetch replaces globalThis.fetch (tests, proxies). */
  fetch?: typeof globalThis.fetch;
}

/** CallOptions are per-call options. */
export interface CallOptions {
  /** signal aborts the request (and a streamed read's transfer). */
  signal?: AbortSignal;
}

/**
 * ToolError is a failed tool call: the server's problem body, or a
 * synthesized one (code "HTTP_ERROR") when the body is not a problem.
 */
export class ToolError extends Error {
  /** code is the stable error code, e.g. "FS_STALE_VERSION". */
  readonly code: string;
  /** status is the HTTP status. */
  readonly status: number;
  /** output is the exact model text, "Error: <message>". */
  readonly output: string;

  constructor(code: string, status: number, output: string) {
    super(output.replace(/^Error: /, ""));
    this.name = "ToolError";
    this.code = code;
    this.status = status;
    this.output = output;
  }
}

/** toolError turns a non-2xx answer into a ToolError. */
export function toolError(body: unknown, response: Response): ToolError {
  if (body !== null && typeof body === "object") {
    const { code, output } = body as Partial<Problem>;
    if (typeof code === "string" && typeof output === "string") {
      return new ToolError(code, response.status, output);
    }
  }
  const text = typeof body === "string" && body !== "" ? `: ${body.slice(0, 200)}` : "";
  return new ToolError("HTTP_ERROR", response.status, `Error: HTTP ${response.status}${text}`);
}

/** ToolfsClient is what createToolfsClient returns. */
export interface ToolfsClient {
  /** api is the raw typed openapi-fetch client, for the endpoints without a helper. */
  readonly api: Client<paths>;
  /** read returns the JSON read window; it throws ToolError on failure. */
  read(body: ReadRequest, opts?: CallOptions): Promise<ReadResult>;
  /**
   * readLines streams the read output (`Accept: text/plain`) line by line,
   * without the line terminators. A transfer the server aborts mid-way
   * rejects with the fetch error, never ends as a short success. Leaving the
   * loop early cancels the transfer.
   */
  readLines(body: ReadRequest, opts?: CallOptions): AsyncGenerator<string, void, undefined>;
  /** write creates or replaces a file; it throws ToolError on failure. */
  write(body: WriteRequest, opts?: CallOptions): Promise<WriteResult>;
  /** edit replaces literal text in a file; it throws ToolError on failure. */
  edit(body: EditRequest, opts?: CallOptions): Promise<EditResult>;
  /** editLines replaces, deletes and inserts lines named by the anchors an anchored read shows; it throws ToolError on failure. */
  editLines(body: EditLinesRequest, opts?: CallOptions): Promise<EditLinesResult>;
  /** applyPatch applies a patch to one or more files, all or nothing; it throws ToolError on failure. */
  applyPatch(body: ApplyPatchRequest, opts?: CallOptions): Promise<ApplyPatchResult>;
  /** glob finds files whose paths match a glob pattern; it throws ToolError on failure. */
  glob(body: GlobRequest, opts?: CallOptions): Promise<SearchResult>;
  /** grep searches file contents with a ripgrep regular expression; it throws ToolError on failure. */
  grep(body: GrepRequest, opts?: CallOptions): Promise<SearchResult>;
  /**
   * model makes the same call as the tool's method through POST /model/<tool>
   * and resolves to the model text alone (what an importer hands the model);
   * a failure resolves too, to the problem's `output`, as the model sees it.
   */
  model(tool: ModelTool, body: unknown, opts?: CallOptions): Promise<{ status: number; text: string }>;
  /** catalog returns GET /tools: the tools for a model, in the dialect of the client. */
  catalog(opts?: CallOptions): Promise<Catalog>;
  /** catalogAs returns GET /tools?format=: the tools in that ecosystem's shape. */
  catalogAs(format: CatalogFormat, opts?: CallOptions): Promise<unknown>;
  /** forgetSession forgets a session's observed state (DELETE /sessions/{id}); an unknown id is fine. */
  forgetSession(sessionId: string, opts?: CallOptions): Promise<void>;
  /** health is GET /healthz (liveness). */
  health(opts?: CallOptions): Promise<Health>;
  /** ready is GET /readyz; a dependency that cannot serve throws ToolError 503 with the reason. */
  ready(opts?: CallOptions): Promise<Health>;
  /** metrics is GET /metrics: the Prometheus text (needs toolfs:read, the token, or --metrics-token). */
  metrics(opts?: CallOptions): Promise<string>;
  /** openapi is GET /openapi.yaml, the full contract, as text. */
  openapi(opts?: CallOptions): Promise<string>;
  /** openapiTools is GET /openapi.json: the tool view for OpenAPI importers, in the client's dialect. */
  openapiTools(opts?: CallOptions): Promise<unknown>;
  /** move moves or renames a file or folder (the model's tool, extended profile); it throws ToolError on failure (409 FS_ALREADY_EXISTS for an existing destination without overwrite). */
  move(body: MoveRequest, opts?: CallOptions): Promise<MoveResult>;
  /** deleteTool deletes a file the session read, or an empty folder (the model's delete tool, POST /tools/delete; `remove` is the person's DELETE /files); it throws ToolError on failure (409 FS_NOT_EMPTY for a folder that holds anything). */
  deleteTool(body: DeleteRequest, opts?: CallOptions): Promise<DeleteResult>;
  /** mkdir makes a folder and its missing parents; an existing folder is fine. It throws ToolError on failure. */
  mkdir(body: MkdirRequest, opts?: CallOptions): Promise<MkdirResult>;
  /**
   * events reads the change feed (GET /events) over fetch, so the bearer
   * token goes in a header, as EventSource cannot send one. It reconnects
   * by itself when the stream ends or the connection drops, resuming with
   * Last-Event-ID; a `reset` event says to reload what you show. A refusal
   * (401, 400, 404) throws ToolError; 503 TOO_MANY_SUBSCRIBERS waits for
   * Retry-After and tries again. Leaving the loop or aborting the signal
   * closes the stream.
   */
  events(opts?: EventsOptions): AsyncGenerator<FeedEvent, void, undefined>;
  /**
   * listApprovals returns the pending sandbox escalations (GET /approvals);
   * with `wait` it long-polls until one opened after `after` is pending.
   * Pass the answer's `cursor` as `after` to wait for the next one.
   */
  listApprovals(opts?: ListApprovalsOptions): Promise<ApprovalList>;
  /**
   * decide approves or rejects one pending approval (POST /approvals/{id}).
   * With --approver-token, create the client with that token. It throws
   * ToolError: APPROVAL_NOT_FOUND (404), APPROVAL_NOT_PENDING (409),
   * NOT_APPROVER (403).
   */
  decide(id: string, decision: Decision, opts?: CallOptions): Promise<void>;
  /** changes lists a session's change history, newest first (GET /sessions/{id}/changes). */
  changes(sessionId: string, opts?: CallOptions): Promise<ChangesResult>;
  /**
   * revert undoes a session's changes after `to` (0: all), all or nothing
   * (POST /sessions/{id}/revert). It throws ToolError: FS_STALE_VERSION
   * (409) when a file changed since, FS_NOT_REVERTIBLE (422).
   */
  revert(sessionId: string, body: RevertRequest, opts?: CallOptions): Promise<RevertResult>;
  /** list lists a folder (GET /files), relative to the root ("" = the root). */
  list(path?: string, opts?: ListOptions): Promise<FileListing>;
  /**
   * download fetches a file's bytes (GET /files/<path>) as a Blob, or as a
   * stream; with ifNoneMatch, a file still at that ETag resolves to
   * `undefined` (304).
   */
  download(path: string, opts?: DownloadOptions): Promise<Download | undefined>;
  /**
   * upload stores data as the file's whole content (PUT /files/<path>).
   * Replacing needs ifMatch (else 428 PRECONDITION_REQUIRED); a stale ETag
   * throws ToolError 412 FS_STALE_VERSION. In a browser it reports
   * progress through XMLHttpRequest's upload events.
   */
  upload(path: string, data: Blob | Uint8Array | string, opts?: UploadOptions): Promise<FileUpload & { etag: string }>;
  /** remove deletes a file (DELETE /files/<path>) at the ETag given. */
  remove(path: string, etag: string, opts?: CallOptions): Promise<void>;
}

/** filesUrl is /files/<path> with each segment percent-encoded. */
function filesUrl(base: string, path: string): string {
  const p = path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/");
  return `${base.replace(/\/$/, "")}/files/${p}`;
}

/** problemOf reads a failed answer's body as a ToolError. */
async function problemOf(response: Response): Promise<ToolError> {
  const body = await response.text().catch(() => "");
  let problem: unknown = body;
  try { problem = JSON.parse(body); } catch { /* not JSON */ }
  return toolError(problem, response);
}

/** textOf is a 2xx answer's body as text, else its ToolError. */
async function textOf(response: Response): Promise<string> {
  if (!response.ok) throw await problemOf(response);
  return response.text();
}

/** createToolfsClient returns a client that sends the token and session headers on every call. */
export function createToolfsClient(o: ToolfsOptions): ToolfsClient {
  const headers: Record<string, string> = {};
  if (o.token !== undefined) headers["Authorization"] = `Bearer ${o.token}`;
  if (o.sessionId !== undefined) headers["X-Session-ID"] = o.sessionId;
  if (o.sessionCwd !== undefined) headers["X-Session-Cwd"] = o.sessionCwd;
  const api = createClient<paths>({ baseUrl: o.baseUrl, headers, fetch: o.fetch });
  // The tool routes' query: the dialect, when one is set.
  const params = { query: o.dialect === undefined ? {} : { dialect: o.dialect } };
  const doFetch = o.fetch ?? globalThis.fetch;
  const base = o.baseUrl.replace(/\/$/, "");

  // unwrap returns the body of a 2xx answer or throws its ToolError.
  const unwrap = <T>(r: { data?: T; error?: unknown; response: Response }): T => {
    if (!r.response.ok || r.data === undefined) throw toolError(r.error, r.response);
    return r.data;
  };

  return {
    api,
    async read(body, opts) {
      const r = await api.POST("/tools/read", { params, body, signal: opts?.signal });
      const data = unwrap(r);
      // The 200 also lists text/plain (the streamed form); JSON was asked for.
      if (typeof data === "string") throw new ToolError("HTTP_ERROR", r.response.status, "Error: expected a JSON body");
      return data;
    },
    write: async (body, opts) => unwrap(await api.POST("/tools/write", { params, body, signal: opts?.signal })),
    listApprovals: async (opts = {}) =>
      unwrap(await api.GET("/approvals", { params: { query: { wait: opts.wait, after: opts.after } }, signal: opts.signal })),
    async decide(id, decision, opts) {
      const r = await api.POST("/approvals/{id}", { params: { path: { id } }, body: { decision }, signal: opts?.signal });
      if (r.response.status !== 204) throw toolError(r.error, r.response);
    },
    edit: async (body, opts) => unwrap(await api.POST("/tools/edit", { params, body, signal: opts?.signal })),
    editLines: async (body, opts) => unwrap(await api.POST("/tools/edit_lines", { params, body, signal: opts?.signal })),
    applyPatch: async (body, opts) => unwrap(await api.POST("/tools/apply_patch", { params, body, signal: opts?.signal })),
    glob: async (body, opts) => unwrap(await api.POST("/tools/glob", { params, body, signal: opts?.signal })),
    grep: async (body, opts) => unwrap(await api.POST("/tools/grep", { params, body, signal: opts?.signal })),
    async model(tool, body, opts) {
      const query = o.dialect === undefined ? "" : `?dialect=${encodeURIComponent(o.dialect)}`;
      const response = await doFetch(`${base}/model/${encodeURIComponent(tool)}${query}`, {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/json" },
        body: JSON.stringify(body),
        signal: opts?.signal,
      });
      return { status: response.status, text: await response.text() };
    },
    async catalog(opts) {
      const data = unwrap(await api.GET("/tools", { params, signal: opts?.signal }));
      return data as Catalog;
    },
    catalogAs: async (format, opts) =>
      unwrap(await api.GET("/tools", { params: { query: { ...params.query, format } }, signal: opts?.signal })) as unknown,
    async forgetSession(id, opts) {
      const r = await api.DELETE("/sessions/{id}", { params: { path: { id } }, signal: opts?.signal });
      if (r.response.status !== 204) throw toolError(r.error, r.response);
    },
    health: async (opts) => unwrap(await api.GET("/healthz", { signal: opts?.signal })),
    ready: async (opts) => unwrap(await api.GET("/readyz", { signal: opts?.signal })),
    metrics: async (opts) => textOf(await doFetch(`${base}/metrics`, { headers, signal: opts?.signal })),
    openapi: async (opts) => textOf(await doFetch(`${base}/openapi.yaml`, { headers, signal: opts?.signal })),
    async openapiTools(opts) {
      const query = o.dialect === undefined ? "" : `?dialect=${encodeURIComponent(o.dialect)}`;
      const response = await doFetch(`${base}/openapi.json${query}`, { headers, signal: opts?.signal });
      if (!response.ok) throw await problemOf(response);
      return (await response.json()) as unknown;
    },
    move: async (body, opts) => unwrap(await api.POST("/tools/move", { params, body, signal: opts?.signal })),
    deleteTool: async (body, opts) => unwrap(await api.POST("/tools/delete", { params, body, signal: opts?.signal })),
    mkdir: async (body, opts) => unwrap(await api.POST("/tools/mkdir", { params, body, signal: opts?.signal })),
    list: async (path = "", opts = {}) =>
      unwrap(await api.GET("/files", {
        params: { query: { path, depth: opts.depth, ignore: opts.ignoreGit ? "git" : undefined } },
        signal: opts.signal,
      })),
    async download(path, opts = {}) {
      const h: Record<string, string> = { ...headers };
      if (opts.ifNoneMatch !== undefined) h["If-None-Match"] = opts.ifNoneMatch;
      const response = await doFetch(filesUrl(o.baseUrl, path), { headers: h, signal: opts.signal });
      if (response.status === 304) return undefined;
      if (!response.ok || !response.body) throw await problemOf(response);
      const d: Download = {
        etag: response.headers.get("ETag") ?? "",
        contentType: response.headers.get("Content-Type") ?? "",
        size: Number(response.headers.get("Content-Length") ?? "-1"),
      };
      if (opts.stream) d.stream = response.body;
      else d.blob = await response.blob();
      return d;
    },
    async upload(path, data, opts = {}) {
      const h: Record<string, string> = { ...headers, "Content-Type": "application/octet-stream" };
      if (opts.ifMatch !== undefined) h["If-Match"] = opts.ifMatch;
      if (opts.createOnly) h["If-None-Match"] = "*";
      const blob = data instanceof Blob ? data : new Blob([data as BlobPart]);
      const url = filesUrl(o.baseUrl, path);
      const done = async (status: number, etag: string, text: string, response?: Response) => {
        let body: unknown = text;
        try { body = JSON.parse(text); } catch { /* not JSON */ }
        if (status !== 200 && status !== 201) {
          throw toolError(body, response ?? new Response(null, { status }));
        }
        return { ...(body as FileUpload), etag };
      };
      if (typeof XMLHttpRequest !== "undefined" && o.fetch === undefined) {
        return new Promise((resolve, reject) => {
          const x = new XMLHttpRequest();
          x.open("PUT", url);
          for (const [k, v] of Object.entries(h)) x.setRequestHeader(k, v);
          x.upload.onprogress = (e) => opts.onProgress?.(e.loaded, e.lengthComputable ? e.total : blob.size);
          x.onload = () => done(x.status, x.getResponseHeader("ETag") ?? "", x.responseText).then(resolve, reject);
          x.onerror = () => reject(new ToolError("HTTP_ERROR", 0, "Error: the upload failed"));
          x.onabort = () => reject(new DOMException("aborted", "AbortError"));
          opts.signal?.addEventListener("abort", () => x.abort(), { once: true });
          x.send(blob);
        });
      }
      const response = await doFetch(url, { method: "PUT", headers: h, body: blob, signal: opts.signal });
      opts.onProgress?.(blob.size, blob.size);
      return done(response.status, response.headers.get("ETag") ?? "", await response.text(), response);
    },
    async remove(path, etag, opts) {
      const response = await doFetch(filesUrl(o.baseUrl, path), {
        method: "DELETE",
        headers: { ...headers, "If-Match": etag },
        signal: opts?.signal,
      });
      if (response.status !== 204) throw await problemOf(response);
    },
    changes: async (id, opts) =>
      unwrap(await api.GET("/sessions/{id}/changes", { params: { path: { id } }, signal: opts?.signal })),
    revert: async (id, body, opts) =>
      unwrap(await api.POST("/sessions/{id}/revert", { params: { path: { id } }, body, signal: opts?.signal })),
    async *readLines(body, opts) {
      const r = await api.POST("/tools/read", {
        params,
        body,
        headers: { Accept: "text/plain" },
        parseAs: "stream",
        signal: opts?.signal,
      });
      if (!r.response.ok || !r.data) throw toolError(r.error, r.response);
      const type = r.response.headers.get("Content-Type") ?? "";
      if (!type.startsWith("text/plain")) {
        await r.data.cancel();
        throw new ToolError("HTTP_ERROR", r.response.status, `Error: expected text/plain, got "${type}"`);
      }
      yield* lines(r.data);
    },
    async *events(opts = {}) {
      const query = new URLSearchParams();
      for (const s of [opts.session ?? []].flat()) query.append("session", s);
      for (const p of [opts.path ?? []].flat()) query.append("path", p);
      const url = `${o.baseUrl.replace(/\/$/, "")}/events${query.size > 0 ? `?${query}` : ""}`;
      let lastId = opts.lastEventId;
      let retry = opts.retryMs ?? 2000;
      const signal = opts.signal;
      while (!signal?.aborted) {
        const h: Record<string, string> = { Accept: "text/event-stream" };
        if (o.token !== undefined) h["Authorization"] = `Bearer ${o.token}`;
        if (lastId !== undefined) h["Last-Event-ID"] = lastId;
        let response: Response;
        try {
          response = await doFetch(url, { headers: h, signal });
        } catch (err) {
          if (signal?.aborted) return;
          await sleep(retry, signal); // the server is away: try again
          continue;
        }
        if (!response.ok || !response.body) {
          const body = await response.text().catch(() => "");
          let problem: unknown = body;
          try { problem = JSON.parse(body); } catch { /* not JSON */ }
          const e = toolError(problem, response);
          if (response.status !== 503) throw e;
          await sleep(Number(response.headers.get("Retry-After") ?? "5") * 1000 || retry, signal);
          continue;
        }
        let id: string | undefined;
        let data: string[] = [];
        try {
          for await (const raw of lines(response.body)) {
            const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
            if (line === "") {
              if (data.length > 0) {
                if (id !== undefined) lastId = id;
                yield { ...(JSON.parse(data.join("\n")) as ChangeEvent), id: id ?? "" };
              }
              data = [];
              continue;
            }
            if (line.startsWith(":")) continue; // a heartbeat
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "id") id = value;
            else if (field === "data") data.push(value);
            else if (field === "retry" && /^\d+$/.test(value) && opts.retryMs === undefined) retry = Number(value);
          }
        } catch (err) {
          if (signal?.aborted) return;
          // A broken transfer: reconnect like after an end.
        }
        await sleep(retry, signal);
      }
    },
  };
}

/** sleep waits ms, or less when signal aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * lines yields the UTF-8 text of stream split on "\n", without the "\n";
 * a final "\n" starts no extra line. Invalid UTF-8 rejects. Returning early
 * cancels the stream.
 */
export async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string, void, undefined> {
  const reader = stream
    .pipeThrough(new TextDecoderStream("utf-8", { fatal: true }) as TransformStream<Uint8Array, string>)
    .getReader();
  let rest = "";
  let done = false;
  try {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      const text = rest + chunk.value;
      let start = 0;
      for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
        yield text.slice(start, nl);
        start = nl + 1;
      }
      rest = text.slice(start);
    }
    done = true;
    if (rest !== "") yield rest;
  } finally {
    // Cancelling tells the server to stop; after a clean end it is a no-op.
    if (!done) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}
