// The console's one script (docs/console.md). It calls the REST API on its
// own origin with the person's bearer token, kept in this tab's session
// storage and sent only in the Authorization header. No inline script: the
// page's Content-Security-Policy allows this file alone.
import { signInWithOAuth, finishOAuth } from "./oauth.js";

const $ = (sel) => document.querySelector(sel);
const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k === "data") Object.assign(e.dataset, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e[k] = v;
  }
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
};

const store = window.sessionStorage;
const KEY = { token: "toolfs.token", approver: "toolfs.approver" };
let config = { auth: "none" };

// ApiError is a problem+json answer: its status, code and message, and a
// refused revert's paths.
class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
    this.status = status;
    this.code = problem.code ?? "";
    this.paths = problem.paths ?? [];
  }
  toString() { return `${this.status} ${this.code}: ${this.message}`; }
}

function authHeader(approver = false) {
  const t = (approver && store.getItem(KEY.approver)) || store.getItem(KEY.token);
  return t ? { Authorization: `Bearer ${t}` } : {};
}

async function failure(res) {
  let problem = {};
  try { problem = await res.json(); } catch { /* not JSON */ }
  if (res.status === 401 && config.auth !== "none") signOut("Your sign-in was refused (401): sign in again.");
  return new ApiError(res.status, problem);
}

// api calls a JSON route; a failure throws an ApiError.
async function api(path, { method = "GET", body, approver = false, signal } = {}) {
  const headers = { Accept: "application/json", ...authHeader(approver) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal, cache: "no-store" });
  if (!res.ok) throw await failure(res);
  return res.status === 204 ? null : res.json();
}

// lineDiff turns an {oldText, newText} pair into -/+ lines: the common
// head and tail are dropped, and the middle is matched line by line (a
// longest common subsequence, bounded to 4M cells, else shown whole).
function lineDiff(oldText, newText) {
  const split = (t) => { const l = (t ?? "").split("\n"); if (l[l.length - 1] === "") l.pop(); return l; };
  let a = split(oldText), b = split(newText);
  while (a.length && b.length && a[0] === b[0]) { a = a.slice(1); b = b.slice(1); }
  while (a.length && b.length && a[a.length - 1] === b[b.length - 1]) { a = a.slice(0, -1); b = b.slice(0, -1); }
  if (a.length * b.length > 4_000_000) return [...a.map((l) => "-" + l), ...b.map((l) => "+" + l)];
  const n = a.length, m = b.length, L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) { out.push(" " + a[i]); i++; j++; }
    else if (i < n && (j === m || L[i + 1][j] >= L[i][j + 1])) out.push("-" + a[i++]);
    else out.push("+" + b[j++]);
  }
  return out;
}

// diffView shows unified diff text, or a list of {path, oldText, newText}.
// A feed card names its file already: one diff there has no header.
function diffView(diff) {
  const pre = el("pre", { class: "diff" });
  const lines = typeof diff === "string" ? diff.split("\n") : diff.flatMap((d) => [
    ...(d.path && diff.length > 1 ? [`--- ${d.path}`] : []), ...lineDiff(d.oldText, d.newText)]);
  for (const line of lines) {
    const cls = line.startsWith("+++") || line.startsWith("---") ? "file" : line.startsWith("@@") ? "hunk"
      : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    pre.append(el("span", { class: cls }, line + "\n"));
  }
  return pre;
}

const when = (t) => (t ? new Date(t).toLocaleTimeString() : "");

// ---- tabs ----
function show(tab) {
  for (const s of document.querySelectorAll("section.tab")) s.hidden = s.id !== tab;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === tab);
  if (location.hash !== "#" + tab) history.replaceState(null, "", "#" + tab);
  if (tab === "files") listFolder(folder);
  if (tab === "server") loadServer();
}

// ---- approvals: a long poll of GET /approvals ----
const decided = new Set();
let approvalsCursor = 0;
let approvalsWake = null;

let lastApprovals = [];

function setBadge() {
  const n = lastApprovals.filter((a) => !decided.has(a.id)).length;
  const badge = $("#approvals-count");
  badge.textContent = String(n);
  badge.hidden = n === 0;
}

function renderApprovals(list) {
  lastApprovals = list;
  const pending = list.filter((a) => !decided.has(a.id));
  const ul = $("#approvals-list");
  ul.replaceChildren(...pending.map((a) => {
    const card = el("li", { class: "card approval", data: { id: a.id } },
      el("div", { class: "head" },
        el("strong", {}, a.tool), " ", el("code", { class: "path" }, a.path), " → ", el("span", { class: "mode" }, a.mode)),
      el("p", { class: "reason" }, a.reason),
      el("p", { class: "meta" }, `session ${a.session}` + (a.subject ? `, subject ${a.subject}` : "") + `, waiting since ${when(a.created)}, expires ${when(a.expires)}`),
      a.paths && a.paths.length > 1 ? el("p", { class: "meta" }, "files: " + a.paths.join(", ")) : null,
      diffView(a.diff || "(no diff)"),
      a.truncated ? el("p", { class: "meta" }, "The diff is longer than 64 KiB; its end is not shown.") : null,
      el("p", { class: "error" }));
    const decide = (decision) => async () => {
      for (const b of card.querySelectorAll("button")) b.disabled = true;
      try {
        await api(`/approvals/${encodeURIComponent(a.id)}`, { method: "POST", body: { decision }, approver: true });
        decided.add(a.id);
        setBadge();
        card.replaceChildren(el("p", { class: "decided" }, `${decision === "approve" ? "Approved" : "Rejected"}: ${a.tool} ${a.path}`));
        setTimeout(() => refreshApprovals(), 1500);
      } catch (e) {
        card.querySelector(".error").textContent = String(e);
        for (const b of card.querySelectorAll("button")) b.disabled = false;
      }
    };
    card.append(el("div", { class: "actions" },
      el("button", { class: "approve", data: { decision: "approve" }, onclick: decide("approve") }, "Approve"),
      el("button", { class: "reject", data: { decision: "reject" }, onclick: decide("reject") }, "Reject")));
    return card;
  }));
  $("#approvals-empty").hidden = pending.length > 0;
  setBadge();
}

async function refreshApprovals() {
  try {
    const { approvals } = await api("/approvals", { approver: true });
    renderApprovals(approvals);
  } catch (e) { $("#approvals-error").textContent = String(e); }
}

async function pollApprovals() {
  for (;;) {
    const ctl = new AbortController();
    approvalsWake = () => ctl.abort();
    try {
      const { approvals, cursor } = await api(`/approvals?wait=30s&after=${approvalsCursor}`, { approver: true, signal: ctl.signal });
      approvalsCursor = cursor ?? approvalsCursor;
      $("#approvals-error").textContent = "";
      renderApprovals(approvals);
    } catch (e) {
      if (e.name === "AbortError") continue;
      $("#approvals-error").textContent = String(e);
      if (e.status === 401 || e.status === 403) return;
      await new Promise((r) => setTimeout(r, 3000));
    }
  }
}

// ---- the change feed: GET /events read with fetch (EventSource cannot
// send the Authorization header) ----
const sessions = new Set();
const recent = []; // the latest events, for a refused revert's paths
let lastEventId = "";

// addSession lists a session seen on the feed; the tab remembers the
// last 100 across reloads, since the feed replays nothing to a new page.
function addSession(id) {
  if (!id || sessions.has(id)) return;
  sessions.add(id);
  store.setItem("toolfs.sessions", JSON.stringify([...sessions].slice(-100)));
  $("#sessions-seen").append(el("option", { value: id }));
  $("#sessions-list").append(el("li", {}, el("button", { class: "chip", data: { session: id }, onclick: () => openSession(id) }, id)));
}

function onEvent(ev) {
  recent.push(ev);
  if (recent.length > 500) recent.shift();
  addSession(ev.session);
  if (ev.type === "approval") refreshApprovals();
  const card = el("li", { class: `card event ${ev.type}`, data: { type: ev.type, path: ev.path ?? "" } },
    el("div", { class: "head" },
      el("span", { class: "time" }, new Date().toLocaleTimeString()), " ",
      el("strong", { class: "type" }, ev.type), " ",
      ev.path !== undefined ? el("code", { class: "path" }, ev.path) : null,
      ev.session ? el("span", { class: "who" }, ` by session ${ev.session}`) : ev.path !== undefined && !["approval"].includes(ev.type) && !["write", "edit", "revert", "upload", "delete"].includes(ev.type) ? el("span", { class: "who" }, " outside the API") : null),
    ev.type === "approval" ? el("p", { class: "reason" }, ev.approval?.reason ?? "") : null,
    ev.diffs && ev.diffs.length ? diffView(ev.diffs) : null,
    ev.diffsOmitted ? el("p", { class: "meta" }, "diff omitted (over 1 MiB)") : null,
    ev.type === "reset" || ev.type === "overflow" ? el("p", { class: "meta" }, "Some changes may be missing: reload what you look at.") : null);
  $("#feed-list").prepend(card);
  const list = $("#feed-list");
  while (list.children.length > 200) list.lastChild.remove();
}

async function followFeed() {
  for (;;) {
    const state = $("#feed-state");
    try {
      const headers = { Accept: "text/event-stream", ...authHeader() };
      if (lastEventId) headers["Last-Event-ID"] = lastEventId;
      const res = await fetch("/events", { headers, cache: "no-store" });
      if (!res.ok) throw await failure(res);
      state.textContent = "live";
      state.className = "state live";
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const frame = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let data = "", id = "";
          for (const line of frame.split("\n")) {
            if (line.startsWith("data:")) data += line.slice(5).trimStart();
            else if (line.startsWith("id:")) id = line.slice(3).trim();
          }
          if (id) lastEventId = id;
          if (data) { try { onEvent(JSON.parse(data)); } catch { /* not an event */ } }
        }
      }
    } catch (e) {
      state.textContent = `disconnected: ${e}`;
      state.className = "state down";
      if (e.status === 401 || e.status === 403 || e.status === 404) return;
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

// ---- sessions' changes and revert ----
let currentSession = "";

async function openSession(id) {
  currentSession = id;
  $("#session-id").value = id;
  $("#session-name").textContent = id;
  $("#session-view").hidden = false;
  show("changes");
  await loadChanges();
}

async function loadChanges() {
  const body = $("#changes-table tbody");
  try {
    const { changes } = await api(`/sessions/${encodeURIComponent(currentSession)}/changes`);
    body.replaceChildren(...changes.map((c) => el("tr", { data: { seq: String(c.seq) } },
      el("td", {}, String(c.seq)), el("td", {}, when(c.time)), el("td", {}, c.tool),
      el("td", {}, el("code", {}, c.path)), el("td", {}, `+${c.added} −${c.removed}`),
      el("td", {}, c.revertible
        ? el("button", { class: "revert-to", onclick: () => revert(c.seq - 1) }, "Revert from here")
        : el("span", { class: "meta" }, c.reason ?? "not revertible")))));
    if (!changes.length) body.replaceChildren(el("tr", {}, el("td", { colSpan: 6, class: "empty" }, "This session has no changes.")));
    $("#revert-all").disabled = $("#revert-preview").disabled = !changes.length;
  } catch (e) {
    body.replaceChildren(el("tr", {}, el("td", { colSpan: 6, class: "error" }, String(e))));
  }
}

// nowHolds shows what a file holds now (its first 64 KiB), or that it is
// gone, beside a refused revert.
async function nowHolds(p) {
  try {
    const { blob } = await fetchFile(p);
    const text = await blob.slice(0, 64 << 10).text();
    return el("div", { class: "now" }, el("p", { class: "meta" }, `It now holds (${blob.size} bytes):`), el("pre", { class: "content" }, text));
  } catch (e) {
    return el("p", { class: "meta" }, e.status === 404 ? "It is gone now." : String(e));
  }
}

// revert undoes the session's changes after seq to; a dry run shows what
// it would restore and writes nothing.
async function revert(to, dryRun = false) {
  const out = $("#revert-result");
  out.replaceChildren(el("p", { class: "meta" }, dryRun ? "Checking…" : "Reverting…"));
  try {
    const r = await api(`/sessions/${encodeURIComponent(currentSession)}/revert`, { method: "POST", body: dryRun ? { to, dry_run: true } : { to } });
    out.replaceChildren(el("p", { class: dryRun ? "ok preview" : "ok" }, (dryRun ? "Preview, nothing written: " : "") + r.output),
      ...(r.metadata?.restored ?? []).map((f) => el("div", {}, el("code", {}, f.path), diffView(f.diffs ?? []))));
  } catch (e) {
    const box = el("div", { class: "refused" }, el("p", { class: "error" }, String(e)));
    if (e.status === 409 && e.paths.length) {
      box.append(el("p", {}, "Nothing was restored. These files changed after this session's last change to them:"));
      const ul = el("ul");
      for (const p of e.paths) {
        const seen = recent.filter((ev) => ev.path === p && ev.session !== currentSession).pop();
        ul.append(el("li", {}, el("code", {}, p),
          seen ? ` — last change seen: ${seen.type}${seen.session ? " by session " + seen.session : seen.type === "upload" || seen.type === "delete" ? "" : " outside the API"}` : "",
          seen?.diffs?.length ? diffView(seen.diffs) : null,
          " ", el("button", { class: "open-file", onclick: () => { show("files"); preview({ path: p, type: "file" }); } }, "Open the file")));
        ul.lastChild.append(await nowHolds(p));
      }
      box.append(ul);
    }
    out.replaceChildren(box);
  }
  if (!dryRun) await loadChanges();
}

// ---- files ----
let folder = "";
const entries = new Map();

function parentOf(p) { const i = p.lastIndexOf("/"); return i < 0 ? "" : p.slice(0, i); }
const encodePath = (p) => p.split("/").map(encodeURIComponent).join("/");

async function listFolder(dir) {
  if (dir !== folder) filesNote("");
  folder = dir;
  $("#folder").textContent = "/" + dir;
  const body = $("#files-table tbody");
  try {
    const { entries: list, truncated } = await api(`/files?path=${encodeURIComponent(dir || "/")}&depth=1`);
    entries.clear();
    body.replaceChildren(...list.map((e) => {
      entries.set(e.path, e);
      const name = e.path.slice(dir ? dir.length + 1 : 0);
      const open = e.type === "dir"
        ? el("button", { class: "link", onclick: () => listFolder(e.path) }, name + "/")
        : el("button", { class: "link", onclick: () => preview(e) }, name);
      return el("tr", { data: { path: e.path } }, el("td", {}, open), el("td", {}, e.type), el("td", {}, e.type === "file" ? String(e.size) : ""),
        el("td", {}, e.mtime ? new Date(e.mtime).toLocaleString() : ""),
        el("td", {}, ...(e.type === "file" ? [el("button", { class: "download", onclick: () => download(e.path) }, "Download"), " ",
          el("button", { class: "delete", onclick: () => remove(e) }, "Delete")] : [])));
    }));
    if (truncated) body.append(el("tr", {}, el("td", { colSpan: 5, class: "meta" }, "The listing was cut at the server's --list-max-entries.")));
  } catch (e) { filesNote(String(e)); }
}

async function fetchFile(p) {
  const res = await fetch(`/files/${encodePath(p)}`, { headers: authHeader(), cache: "no-store" });
  if (!res.ok) throw await failure(res);
  return { blob: await res.blob(), etag: res.headers.get("ETag") };
}

async function download(p) {
  try {
    const { blob } = await fetchFile(p);
    const url = URL.createObjectURL(blob);
    const a = el("a", { href: url, download: p.split("/").pop() });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (e) { filesNote(String(e)); }
}

async function preview(e) {
  const box = $("#preview");
  box.replaceChildren(el("h3", {}, el("code", {}, e.path)));
  try {
    const { blob, etag } = await fetchFile(e.path);
    box.append(el("p", { class: "meta" }, `version ${etag ?? ""}, ${blob.size} bytes, ${blob.type}`));
    if (blob.type.startsWith("image/")) box.append(el("img", { src: URL.createObjectURL(blob), alt: e.path }));
    else if (blob.size <= 1 << 20) box.append(el("pre", { class: "content" }, await blob.text()));
    else box.append(el("p", {}, "Too large to show here: download it."));
  } catch (err) { box.append(el("p", { class: "error" }, String(err))); }
}

// filesNote says how the last action on the files went.
function filesNote(text, cls = "error") {
  const p = $("#files-error");
  p.textContent = text;
  p.className = cls;
}

const etagOf = (version) => (version.startsWith('"') ? version : `"${version}"`);

// remove deletes a file at the version the listing showed (If-Match), so
// a file changed since is not deleted (412), after the person confirms.
async function remove(e) {
  if (!confirm(`Delete ${e.path}?`)) return;
  try {
    const res = await fetch(`/files/${encodePath(e.path)}`, { method: "DELETE", headers: { ...authHeader(), "If-Match": etagOf(e.version ?? "") } });
    if (!res.ok) throw await failure(res);
    await listFolder(folder);
    filesNote(`Deleted ${e.path}`, "ok");
  } catch (err) {
    filesNote(String(err) + (err.status === 412 ? " — the file changed since this folder was listed: reload and try again." : ""));
  }
}

// upload PUTs the file with XMLHttpRequest, whose upload events drive the
// progress bar (fetch has none). A file that exists is replaced only at
// the version listed (If-Match); a new one only if still absent.
function upload(file) {
  const target = folder ? `${folder}/${file.name}` : file.name;
  const known = entries.get(target);
  const bar = $("#upload-progress");
  const out = $("#upload-result");
  bar.hidden = false; bar.value = 0; out.textContent = "";
  const xhr = new XMLHttpRequest();
  xhr.open("PUT", `/files/${encodePath(target)}`);
  for (const [k, v] of Object.entries(authHeader())) xhr.setRequestHeader(k, v);
  if (known && known.version) xhr.setRequestHeader("If-Match", etagOf(known.version));
  else xhr.setRequestHeader("If-None-Match", "*");
  xhr.upload.onprogress = (ev) => { if (ev.lengthComputable) bar.value = ev.loaded / ev.total; };
  xhr.onload = () => {
    if (xhr.status === 200 || xhr.status === 201) {
      bar.value = 1;
      out.textContent = `${xhr.status === 201 ? "Created" : "Replaced"} ${target} (${file.size} bytes)`;
      out.className = "ok";
    } else {
      let p = {};
      try { p = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      out.textContent = String(new ApiError(xhr.status, p)) + (xhr.status === 412 ? " — the file changed since this folder was listed: reload and try again." : "");
      out.className = "error";
    }
    listFolder(folder);
  };
  xhr.onerror = () => { out.textContent = "the upload failed: network error"; out.className = "error"; };
  xhr.send(file);
}

// ---- server state ----
async function loadServer() {
  const dl = $("#server-state");
  $("#server-error").textContent = "";
  try {
    const s = await api("/status");
    const rows = [["version", s.version], ["ready", s.ready ? "yes" : `no: ${s.reason ?? ""}`],
      ["sessions", s.sessions ?? "not counted by this session store"], ["profile", s.profile], ["edit dialect", s.dialect],
      ["sandbox mode", s.sandbox_mode], ["signed in with", config.auth === "oauth" ? "OAuth" : config.auth === "token" ? "a token" : "no credentials (loopback)"]];
    dl.replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { data: { key: k } }, String(v))]));
  } catch (e) { $("#server-error").textContent = String(e); }
}

// ---- sign-in ----
function signOut(message = "") {
  store.removeItem("toolfs.sessions");
  store.removeItem(KEY.token);
  store.removeItem(KEY.approver);
  location.hash = "";
  $("#signin-error").textContent = message;
  if (message) store.setItem("toolfs.message", message);
  location.reload();
}

function askToSignIn() {
  $("#signin").hidden = false;
  $("#signin-error").textContent = store.getItem("toolfs.message") ?? "";
  store.removeItem("toolfs.message");
  if (config.auth === "oauth") {
    $("#oauth-signin").hidden = false;
    $("#issuer").textContent = config.issuer;
    $("#oauth-button").onclick = () => signInWithOAuth(config).catch((e) => { $("#signin-error").textContent = String(e); });
    return;
  }
  $("#token-form").hidden = false;
  $("#approver-label").hidden = !config.approver;
  $("#token-form").onsubmit = (ev) => {
    ev.preventDefault();
    store.setItem(KEY.token, $("#token").value.trim());
    if ($("#approver").value.trim()) store.setItem(KEY.approver, $("#approver").value.trim());
    start();
  };
}

function start() {
  $("#signin").hidden = true;
  $("#tabs").hidden = false;
  $("#sign-out").hidden = config.auth === "none";
  $("#who").textContent = store.getItem("toolfs.subject") ?? "";
  for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => show(b.dataset.tab);
  $("#sign-out").onclick = () => signOut();
  $("#session-form").onsubmit = (ev) => { ev.preventDefault(); openSession($("#session-id").value.trim()); };
  $("#revert-all").onclick = () => revert(0);
  $("#revert-preview").onclick = () => revert(0, true);
  $("#folder-up").onclick = () => listFolder(parentOf(folder));
  $("#folder-reload").onclick = () => listFolder(folder);
  $("#upload-form").onsubmit = (ev) => { ev.preventDefault(); const f = $("#upload-file").files[0]; if (f) upload(f); };
  try { for (const id of JSON.parse(store.getItem("toolfs.sessions") ?? "[]")) addSession(id); } catch { /* none kept */ }
  show((location.hash || "#approvals").slice(1));
  refreshApprovals();
  pollApprovals();
  followFeed();
  window.consoleReady = true;
}

async function main() {
  config = await (await fetch("config.json", { cache: "no-store" })).json();
  if (config.auth === "oauth") {
    const token = await finishOAuth(config).catch((e) => { store.setItem("toolfs.message", String(e)); return null; });
    if (token) store.setItem(KEY.token, token);
  }
  if (config.auth !== "none" && !store.getItem(KEY.token)) { askToSignIn(); return; }
  start();
}

main();
