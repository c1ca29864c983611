// The console's OAuth sign-in (docs/console.md, "Signing in") in headless
// Chromium against the real binary and a real Ory Hydra: a person clicks
// Sign in, logs in at Hydra's login page (a small login and consent app
// here, as every Hydra deployment has one), comes back to /ui/ with a code,
// which the page trades with its PKCE verifier for an access token; the
// person then sees only their own subject's approvals, events and
// sessions, and approves their agent's escalation. Agents get their
// tokens through the same authorization-code flow, driven by fetch.
// Needs Hydra: $TOOLFS_HYDRA_BIN, else test/hydra/build.sh's cached one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import { once } from "node:events";
import path from "node:path";
import { artifacts, freePort, launchChromium, serverBinary, startServer, tempDir } from "../testing/harness.mjs";
import { startHydra } from "../../../test/mcpclients/hydra.mjs";

const shots = process.env.CONSOLE_SCREENSHOTS ?? path.join(artifacts, "console");
const pageErrors = []; // uncaught errors and CSP violations
let tmp, root, hydra, app, server, ctx, page, consoleClient, agentClient;

// The login and consent app Hydra sends people to: a login form (or, with
// a login_hint, the hinted subject at once, for the agents' fetch flow),
// and consent granted as asked.
async function loginApp(adminURL, port) {
  const admin = async (method, p, body) => {
    const res = await fetch(adminURL + p, { method, headers: { "Content-Type": "application/json" }, body: body && JSON.stringify(body) });
    const json = await res.json();
    if (!res.ok) throw new Error(`hydra ${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const accept = async (res, kind, challenge, body) => {
    const { redirect_to } = await admin("PUT", `/admin/oauth2/auth/requests/${kind}/accept?${kind}_challenge=${encodeURIComponent(challenge)}`, body);
    res.writeHead(302, { Location: redirect_to }).end();
  };
  const s = http.createServer(async (req, res) => {
    try {
      const u = new URL(req.url, "http://x");
      if (u.pathname === "/login" && req.method === "GET") {
        const challenge = u.searchParams.get("login_challenge");
        const lr = await admin("GET", `/admin/oauth2/auth/requests/login?login_challenge=${encodeURIComponent(challenge)}`);
        const hint = lr.oidc_context?.login_hint;
        if (hint) return accept(res, "login", challenge, { subject: hint, remember: false });
        res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" }).end(`<!doctype html><title>Log in</title>
<h1>Log in to the identity provider</h1><form method="post" action="/login">
<input type="hidden" name="challenge" value="${challenge}"><label>User <input id="user" name="user"></label>
<button id="login" type="submit">Log in</button></form>`);
      } else if (u.pathname === "/login" && req.method === "POST") {
        let body = "";
        for await (const c of req) body += c;
        const f = new URLSearchParams(body);
        await accept(res, "login", f.get("challenge"), { subject: f.get("user"), remember: false });
      } else if (u.pathname === "/consent") {
        const challenge = u.searchParams.get("consent_challenge");
        const cr = await admin("GET", `/admin/oauth2/auth/requests/consent?consent_challenge=${encodeURIComponent(challenge)}`);
        await accept(res, "consent", challenge, { grant_scope: cr.requested_scope, grant_access_token_audience: cr.requested_access_token_audience, remember: false });
      } else res.writeHead(404).end();
    } catch (e) { res.writeHead(500).end(String(e)); }
  }).listen(port, "127.0.0.1");
  await once(s, "listening");
  return { origin: `http://127.0.0.1:${port}`, close: () => { s.closeAllConnections(); s.close(); } };
}

// agentToken runs the authorization-code flow with PKCE by fetch, as
// subject, and returns the access token.
async function agentToken(subject, audience) {
  const verifier = crypto.randomBytes(32).toString("base64url");
  const challenge = crypto.createHash("sha256").update(verifier).digest("base64url");
  const redirect = "http://127.0.0.1:9/callback";
  const q = new URLSearchParams({ response_type: "code", client_id: agentClient, redirect_uri: redirect, scope: "toolfs:read toolfs:write",
    state: crypto.randomBytes(12).toString("hex"), code_challenge: challenge, code_challenge_method: "S256", login_hint: subject, audience });
  const jar = new Map();
  let url = `${hydra.issuer}/oauth2/auth?${q}`;
  for (let i = 0; i < 12; i++) {
    const res = await fetch(url, { redirect: "manual", headers: { Cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") } });
    for (const c of res.headers.getSetCookie()) { const [kv] = c.split(";"); const at = kv.indexOf("="); jar.set(kv.slice(0, at), kv.slice(at + 1)); }
    const loc = res.headers.get("location");
    assert.ok(loc, `no redirect from ${url}: ${res.status} ${await res.text()}`);
    if (loc.startsWith(redirect)) {
      const code = new URL(loc).searchParams.get("code");
      assert.ok(code, loc);
      const tok = await fetch(`${hydra.issuer}/oauth2/token`, { method: "POST",
        body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: redirect, client_id: agentClient, code_verifier: verifier }) });
      const json = await tok.json();
      assert.ok(json.access_token, JSON.stringify(json));
      return json.access_token;
    }
    url = new URL(loc, url).toString();
  }
  throw new Error("the authorization flow did not come back");
}

async function rest(token, tool, args, session, signal) {
  const res = await fetch(`${server.origin}/tools/${tool}`, { method: "POST", signal,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", "X-Session-ID": session, "X-Session-Cwd": "ws" },
    body: JSON.stringify(args) });
  return { status: res.status, body: await res.json() };
}

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  tmp = tempDir("toolfs-console-oauth-");
  root = path.join(tmp, "root");
  fs.mkdirSync(path.join(root, "ws"), { recursive: true });
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  // Hydra needs its login app's URL at start, and the app needs Hydra's
  // admin URL: the app's port is taken first and the app started after.
  const appPort = await freePort();
  hydra = await startHydra({ env: {
    URLS_LOGIN: `http://127.0.0.1:${appPort}/login`, URLS_CONSENT: `http://127.0.0.1:${appPort}/consent`,
    SERVE_PUBLIC_CORS_ENABLED: "true", SERVE_PUBLIC_CORS_ALLOWED_ORIGINS: origin,
  } });
  app = await loginApp(hydra.adminURL, appPort);
  const client = async (body) => {
    const res = await fetch(`${hydra.adminURL}/admin/clients`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    assert.equal(res.status, 201, await res.clone().text());
    return (await res.json()).client_id;
  };
  consoleClient = await client({ grant_types: ["authorization_code"], response_types: ["code"], token_endpoint_auth_method: "none",
    redirect_uris: [`${origin}/ui/`], scope: "toolfs:read toolfs:write toolfs:approve", audience: [origin], allowed_cors_origins: [origin] });
  agentClient = await client({ grant_types: ["authorization_code"], response_types: ["code"], token_endpoint_auth_method: "none",
    redirect_uris: ["http://127.0.0.1:9/callback"], scope: "toolfs:read toolfs:write", audience: [origin] });
  server = await startServer(await serverBinary(tmp), { dir: tmp, port, args: ["--root", root, "--oauth-issuer", hydra.issuer,
    "--public-url", origin, "--ui-client-id", consoleClient, "--sandbox-mode", "workspace-write", "--approval-timeout", "60s"] });
  ({ ctx, page } = await launchChromium(tmp, { width: 1100, height: 700 }));
  page.on("pageerror", (e) => { pageErrors.push(String(e)); console.error("page error:", e); });
  page.on("console", (m) => { if (/Content.Security.Policy/i.test(m.text())) pageErrors.push(m.text()); });
}, { timeout: 900_000 });

after(async () => {
  await ctx?.close().catch(() => {});
  await server?.stop();
  app?.close();
  await hydra?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}, { timeout: 60_000 });

test("a person signs in with the authorization code and PKCE, and sees only their own subject's work", async () => {
  await page.goto(`${server.origin}/ui/`);
  await page.locator("#oauth-button").waitFor({ timeout: 10_000 });
  assert.equal(await page.locator("#issuer").textContent(), hydra.issuer);
  assert.equal(await page.locator("#token-form").isVisible(), false, "no token is asked");
  assert.equal(await page.locator("#tabs").isVisible(), false, "nothing but the sign-in before it");
  await shot("oauth-signin");
  await page.click("#oauth-button");
  await page.locator("#user").waitFor({ timeout: 20_000 }).catch(async (e) => {
    throw new Error(`${e.message}\nat ${page.url()}: ${await page.locator("body").textContent()}`);
  });
  assert.ok(page.url().startsWith(app.origin + "/login?login_challenge="), page.url());
  await page.fill("#user", "alice");
  await page.click("#login");
  await page.waitForFunction(() => window.consoleReady === true, null, { timeout: 20_000 });
  assert.equal(page.url(), `${server.origin}/ui/#approvals`, "the code is gone from the address");
  assert.equal(await page.locator("#who").textContent(), "alice");
  const token = await page.evaluate(() => sessionStorage.getItem("toolfs.token"));
  const claims = JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString());
  assert.equal(claims.sub, "alice");
  assert.deepEqual([...claims.scp].sort(), ["toolfs:approve", "toolfs:read", "toolfs:write"]);
  assert.equal(await page.evaluate(() => localStorage.length), 0);

  const aliceAgent = await agentToken("alice", server.origin);
  const bobAgent = await agentToken("bob", server.origin);
  // Bob's agent escalates first; alice never sees it.
  const bobCall = new AbortController();
  const bobWaits = rest(bobAgent, "write", { file_path: path.join(root, "bob.txt"), content: "bob\n", sandbox_permissions: "danger-full-access", justification: "Bob's note." }, "b-1", bobCall.signal).catch(() => null);
  const aliceWaits = rest(aliceAgent, "write", { file_path: path.join(root, "alice.txt"), content: "alice\n", sandbox_permissions: "danger-full-access", justification: "Alice's note." }, "a-1");
  const card = page.locator("#approvals-list li.approval");
  await card.waitFor({ timeout: 20_000 });
  await page.waitForTimeout(1000); // bob's approval, were it shown, would be listed by now
  assert.equal(await card.count(), 1);
  assert.match(await card.textContent(), /alice\.txt.*Alice's note\..*session a-1, subject alice/s);
  await shot("oauth-approvals");
  await card.locator('button[data-decision="approve"]').click();
  assert.equal((await aliceWaits).status, 200);
  assert.equal(fs.readFileSync(path.join(root, "alice.txt"), "utf8"), "alice\n");
  bobCall.abort();
  await bobWaits;

  // The feed: alice's agent's edits arrive, bob's do not.
  await page.click('#tabs button[data-tab="feed"]');
  await page.locator("#feed-state.live").waitFor({ timeout: 10_000 });
  assert.equal((await rest(bobAgent, "write", { file_path: "bob-ws.txt", content: "bob's\n" }, "b-1")).status, 200);
  assert.equal((await rest(aliceAgent, "write", { file_path: "alice-ws.txt", content: "alice's\n" }, "a-2")).status, 200);
  await page.locator('#feed-list li[data-type="write"][data-path="ws/alice-ws.txt"]').waitFor({ timeout: 10_000 });
  assert.equal(await page.locator('#feed-list li[data-path="ws/bob-ws.txt"]').count(), 0);
  assert.deepEqual(await page.locator("#sessions-list button").evaluateAll((b) => b.map((x) => x.dataset.session)), ["a-1", "a-2"]);

  // Bob's session id names alice's own (empty) session, not bob's.
  await page.click('#tabs button[data-tab="changes"]');
  await page.fill("#session-id", "b-1");
  await page.click("#session-form button[type=submit]");
  await page.locator("#changes-table td.empty").waitFor({ timeout: 10_000 });
  await page.click('#sessions-list button[data-session="a-2"]');
  await page.locator('#changes-table tr[data-seq] >> text=ws/alice-ws.txt').waitFor({ timeout: 10_000 });
  await shot("oauth-changes");
});

const shot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });

test("nothing the page did broke its Content-Security-Policy or threw", () => {
  assert.deepEqual(pageErrors, []);
});
