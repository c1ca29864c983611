// Interop with OAuth (SPEC §19; docs/mcp.md, "Connecting with OAuth"): the
// official TypeScript MCP SDK clients, v1 (@modelcontextprotocol/sdk) and v2
// (@modelcontextprotocol/client), against toolfs-api started with
// --oauth-issuer, get their access token themselves from a real Ory Hydra
// v2.3.0 with the SDK's own client-credentials provider
// (ClientCredentialsProvider): the 401's WWW-Authenticate names the protected
// resource metadata, that names Hydra, Hydra's OpenID discovery names its token
// endpoint, and the SDK asks it for a token and retries. Then, on files of
// their own: read -> edit -> edit of a file never read (refused with the exact
// FS_NOT_OBSERVED text), the file on disk checked after each step. A client
// registered for toolfs:read alone is refused a write (403 insufficient_scope)
// and one without credentials is refused (401), with what each SDK makes of
// it. Every request the SDK sends (to the server and to Hydra) is read off
// its fetch.
//
// What the SDK's provider does not do for Hydra, found here and pinned by the
// "as shipped" tests: Hydra v2.3.0 takes a token's audience only from the
// `audience` parameter and ignores RFC 8707's `resource`, which is all the SDK
// sends, so its token has "aud": [] and the server refuses it; and the v2 SDK
// asks for every scope the metadata lists (scopes_supported, the MCP scope
// selection strategy) rather than its provider's `scope`, which Hydra refuses
// (invalid_scope) for a client not registered for all four. withAudience
// below is the few lines that fix both.
//
// Run: npm ci && node --test oauth.test.mjs (Hydra: $TOOLFS_HYDRA_BIN, else
// bash ../hydra/build.sh, which builds it once, a few minutes, and caches it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { freePort, start, texts, TOKEN } from "./harness.mjs";
import { startHydra } from "./hydra.mjs";

import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
  ClientCredentialsProvider as ProviderV2,
} from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider as ProviderV1 } from "@modelcontextprotocol/sdk/client/auth-extensions.js";

let hydra, h, pub, rw, ro;

before(async () => {
  hydra = await startHydra();
  // The server's URL is in its flags (--public-url: the audience and the
  // metadata's URLs), so its port is chosen first.
  const port = await freePort();
  pub = `http://127.0.0.1:${port}`;
  h = await start(["--oauth-issuer", hydra.issuer, "--public-url", pub], { port });
  // Registered with the audiences the server accepts by default, and for
  // client_secret_basic: the SDK's first choice when the authorization server
  // lists it, as Hydra does, and Hydra refuses (invalid_client) any method
  // but the one a client was registered with.
  const audience = [pub, `${pub}/mcp`];
  rw = await hydra.createClient({ scope: "toolfs:read toolfs:write", audience });
  ro = await hydra.createClient({ scope: "toolfs:read", audience });
}, { timeout: 600000 });

after(async () => {
  await h?.stop();
  await hydra?.stop();
});

// withAudience is the SDK's ClientCredentialsProvider, told two things for
// Hydra: the audience, which it takes from the protected resource metadata the
// SDK discovered (saveDiscoveryState, which both SDKs call before asking for a
// token), sent as `audience` beside the SDK's own `resource`; and the scope it
// was configured with, whatever scope the SDK passes (v2 passes the
// metadata's whole scopes_supported, or on a 403 the union with the scope the
// challenge names).
const withAudience = (Provider) =>
  class extends Provider {
    saveDiscoveryState(state) {
      this.audience = state.resourceMetadata?.resource;
    }
    prepareTokenRequest() {
      const params = new URLSearchParams({ grant_type: "client_credentials", scope: this.clientMetadata.scope });
      if (this.audience) params.set("audience", this.audience);
      return params;
    }
  };

const sdks = {
  v1: {
    Provider: ProviderV1,
    connect: async (transportOptions) => {
      const client = new ClientV1({ name: "toolfs-mcpclients-oauth", version: "0.0.0" });
      const transport = new TransportV1(new URL(`${pub}/mcp`), transportOptions);
      await client.connect(transport);
      return { client, transport };
    },
  },
  v2: {
    Provider: ProviderV2,
    connect: async (transportOptions) => {
      // versionNegotiation auto: 2026-07-28, no MCP session (clients.test.mjs).
      const client = new ClientV2({ name: "toolfs-mcpclients-oauth", version: "0.0.0" }, { versionNegotiation: { mode: "auto" } });
      const transport = new TransportV2(new URL(`${pub}/mcp`), transportOptions);
      await client.connect(transport);
      return { client, transport };
    },
  },
};

const provider = (Provider, creds, scope) =>
  new Provider({ clientId: creds.id, clientSecret: creds.secret, scope, expectedIssuer: hydra.issuer });

// wire is a fetch for the SDK's transport (its `fetch` option, which the SDK
// also uses for discovery and the token request) that records each request:
// "METHOD URL STATUS", the Authorization header, the WWW-Authenticate
// challenge, and a form body (the token request) as an object.
function wire() {
  const log = [];
  const fetchFn = async (url, init = {}) => {
    const res = await fetch(url, init);
    const headers = new Headers(init.headers);
    log.push({
      line: `${init.method ?? "GET"} ${url} ${res.status}`,
      authorization: headers.get("authorization"),
      challenge: res.headers.get("www-authenticate"),
      form: init.body instanceof URLSearchParams ? Object.fromEntries(init.body) : undefined,
    });
    return res;
  };
  return { fetch: fetchFn, log };
}

// The SDK's way to a token, from the first 401 (the server's metadata, then
// Hydra's: it has no RFC 8414 document, only OpenID discovery).
const discovery = () => [
  `${pub}/.well-known/oauth-protected-resource 200`,
  `${hydra.issuer}/.well-known/oauth-authorization-server 404`,
  `${hydra.issuer}/.well-known/openid-configuration 200`,
].map((l) => `GET ${l}`);

const challenge401 = () => `Bearer resource_metadata="${pub}/.well-known/oauth-protected-resource"`;
const challenge403 = 'Bearer error="insufficient_scope", scope="toolfs:write"';
const problem401 = {
  type: "about:blank",
  title: "Unauthorized",
  status: 401,
  detail: "missing or invalid access token",
  code: "UNAUTHORIZED",
  output: "Error: missing or invalid access token",
};
const problem403 = {
  type: "about:blank",
  title: "Forbidden",
  status: 403,
  detail: "the access token lacks the scope toolfs:write",
  code: "INSUFFICIENT_SCOPE",
  output: "Error: the access token lacks the scope toolfs:write",
};

// What the v1 SDK throws for an HTTP answer it gives up on (its class leaves
// `name` as "Error").
const v1Error = (code, message) => (e) => {
  assert.ok(e instanceof StreamableHTTPError, e);
  assert.equal(e.code, code);
  assert.equal(e.message, message);
  return true;
};

const basic = (c) => `Basic ${Buffer.from(`${c.id}:${c.secret}`).toString("base64")}`;
const claims = (jwt) => JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString("utf8"));

const onlyText = (result) => {
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, "text");
  return { text: result.content[0].text, isError: result.isError === true };
};

// The token request the SDK sent: client_secret_basic, the form as given.
function tokenRequest(entry, creds, form) {
  assert.equal(entry.line, `POST ${hydra.issuer}/oauth2/token 200`);
  assert.equal(entry.authorization, basic(creds));
  assert.deepEqual(entry.form, form);
}

test("the server's side: the 401 and its challenge, the metadata it names, the static --token beside", async () => {
  const res = await fetch(`${pub}/mcp`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  assert.equal(res.status, 401);
  assert.equal(res.headers.get("www-authenticate"), challenge401());
  assert.deepEqual(await res.json(), problem401);

  const metadata = (resource) => ({
    resource,
    authorization_servers: [hydra.issuer],
    scopes_supported: ["toolfs:read", "toolfs:write", "toolfs:approve", "toolfs:admin"],
    bearer_methods_supported: ["header"],
  });
  assert.deepEqual(await (await fetch(`${pub}/.well-known/oauth-protected-resource`)).json(), metadata(pub));
  assert.deepEqual(await (await fetch(`${pub}/.well-known/oauth-protected-resource/mcp`)).json(), metadata(`${pub}/mcp`));

  // The harness's --token is still a credential (every scope).
  const { client } = await sdks.v1.connect({ requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
  try {
    assert.deepEqual((await client.listTools()).tools.map((x) => x.name).slice(0, 5), ["read", "write", "edit", "glob", "grep"]);
  } finally {
    await client.close();
  }
});

test("@modelcontextprotocol/sdk 1.x ClientCredentialsProvider as shipped: Hydra ignores `resource`, the token has no audience, refused", async () => {
  const w = wire();
  const p = provider(sdks.v1.Provider, rw, "toolfs:read toolfs:write");
  await assert.rejects(sdks.v1.connect({ authProvider: p, fetch: w.fetch }), v1Error(401, "Streamable HTTP error: Server returned 401 after successful authentication"));
  assert.deepEqual(w.log.map((e) => e.line), [
    `POST ${pub}/mcp 401`,
    ...discovery(),
    `POST ${hydra.issuer}/oauth2/token 200`,
    `POST ${pub}/mcp 401`,
  ]);
  tokenRequest(w.log[4], rw, { grant_type: "client_credentials", scope: "toolfs:read toolfs:write", resource: pub });
  const token = p.tokens().access_token;
  assert.equal(w.log[5].authorization, `Bearer ${token}`);
  assert.deepEqual(claims(token).aud, []);
  assert.deepEqual(claims(token).scp, ["toolfs:read", "toolfs:write"]);
});

test("@modelcontextprotocol/client 2.x ClientCredentialsProvider as shipped: asks for every scope the metadata lists, Hydra refuses", async () => {
  const w = wire();
  const p = provider(sdks.v2.Provider, rw, "toolfs:read toolfs:write");
  await assert.rejects(sdks.v2.connect({ authProvider: p, fetch: w.fetch }), {
    name: "OAuthError",
    code: "invalid_scope",
    message: "The requested scope is invalid, unknown, or malformed. The OAuth 2.0 Client is not allowed to request scope 'toolfs:approve'.",
  });
  assert.deepEqual(w.log.map((e) => e.line), [`POST ${pub}/mcp 401`, ...discovery(), `POST ${hydra.issuer}/oauth2/token 400`]);
  assert.deepEqual(w.log[4].form, {
    grant_type: "client_credentials",
    scope: "toolfs:read toolfs:write toolfs:approve toolfs:admin",
    resource: pub,
  });
});

// The SDK gets its token after the first 401, then every request carries it.
async function authorized(t, sdk, name) {
  const w = wire();
  const p = provider(withAudience(sdks[sdk].Provider), rw, "toolfs:read toolfs:write");
  const { client, transport } = await sdks[sdk].connect({ authProvider: p, fetch: w.fetch });
  try {
    if (sdk === "v2") {
      assert.equal(client.getNegotiatedProtocolVersion(), "2026-07-28");
      assert.equal(transport.sessionId, undefined);
    } else {
      assert.equal(transport.protocolVersion, "2025-11-25");
      assert.ok(transport.sessionId);
    }
    const token = p.tokens().access_token;
    assert.deepEqual(w.log.slice(0, 6).map((e) => e.line), [
      `POST ${pub}/mcp 401`,
      ...discovery(),
      `POST ${hydra.issuer}/oauth2/token 200`,
      `POST ${pub}/mcp 200`,
    ]);
    assert.equal(w.log[0].authorization, null);
    assert.equal(w.log[0].challenge, challenge401());
    tokenRequest(w.log[4], rw, { grant_type: "client_credentials", scope: "toolfs:read toolfs:write", audience: pub, resource: pub });
    const c = claims(token);
    assert.deepEqual(
      { iss: c.iss, aud: c.aud, sub: c.sub, client_id: c.client_id, scp: c.scp },
      { iss: hydra.issuer, aud: [pub], sub: rw.id, client_id: rw.id, scp: ["toolfs:read", "toolfs:write"] },
    );

    const call = async (tool, args) => onlyText(await client.callTool({ name: tool, arguments: args }));
    const file = h.file(`${name}.txt`, "alpha\nbeta\ngamma\n");
    const unread = h.file(`${name}-unread.txt`, "one\n");

    await t.test("read", async () => {
      assert.deepEqual(await call("read", { file_path: `${name}.txt` }), { text: texts.read(file, ["alpha", "beta", "gamma"]), isError: false });
      assert.equal(h.disk(`${name}.txt`), "alpha\nbeta\ngamma\n");
    });
    await t.test("edit after the read", async () => {
      assert.deepEqual(await call("edit", { file_path: `${name}.txt`, old_string: "alpha", new_string: "ALPHA" }), { text: texts.edited(file), isError: false });
      assert.equal(h.disk(`${name}.txt`), "ALPHA\nbeta\ngamma\n");
    });
    await t.test("edit of a file never read is refused", async () => {
      assert.deepEqual(await call("edit", { file_path: `${name}-unread.txt`, old_string: "one", new_string: "two" }), {
        text: texts.notObserved(unread),
        isError: true,
      });
      assert.equal(h.disk(`${name}-unread.txt`), "one\n");
    });

    // One token for the whole connection: every request to the server after
    // the first carried it, and none was refused.
    const rest = w.log.slice(5);
    for (const e of rest) {
      assert.match(e.line, new RegExp(`^(POST|GET) ${pub}/mcp 20[02]$`));
      assert.equal(e.authorization, `Bearer ${token}`);
    }
    assert.equal(w.log.filter((e) => e.line.includes("/oauth2/token")).length, 1);
  } finally {
    await client.close();
  }
}

test("@modelcontextprotocol/sdk 1.x gets its token from Hydra and reads, then edits", (t) => authorized(t, "v1", "oauth-sdk-v1"));

test("@modelcontextprotocol/client 2.x gets its token from Hydra and reads, then edits", (t) => authorized(t, "v2", "oauth-sdk-v2"));

// A client registered for toolfs:read alone reads; its write is refused with
// 403 and the challenge. Each SDK then tries a new token (step-up), gets the
// same scope from Hydra, is refused again and gives up.
async function readOnly(sdk, name, transportOptions = {}) {
  const w = wire();
  const p = provider(withAudience(sdks[sdk].Provider), ro, "toolfs:read");
  const { client } = await sdks[sdk].connect({ authProvider: p, fetch: w.fetch, ...transportOptions });
  const file = h.file(`${name}.txt`, "ro\n");
  try {
    const r = onlyText(await client.callTool({ name: "read", arguments: { file_path: `${name}.txt` } }));
    assert.deepEqual(r, { text: texts.read(file, ["ro"]), isError: false });
    assert.deepEqual(claims(p.tokens().access_token).scp, ["toolfs:read"]);
    const before = w.log.length;
    let refusal;
    await client.callTool({ name: "write", arguments: { file_path: `${name}-new.txt`, content: "x\n" } }).catch((e) => (refusal = e));
    assert.ok(refusal, "the write was not refused");
    const refused = w.log.slice(before).filter((e) => e.line === `POST ${pub}/mcp 403`);
    assert.ok(refused.length >= 1);
    for (const e of refused) assert.equal(e.challenge, challenge403);
    assert.equal(h.disk(`${name}.txt`), "ro\n");
    assert.throws(() => h.disk(`${name}-new.txt`), { code: "ENOENT" });
    // v1 opens its GET stream without waiting for it after the initialized
    // notification; its answer may be recorded after `before`.
    return { refusal, log: w.log.slice(before).filter((e) => !e.line.startsWith(`GET ${pub}/mcp `)) };
  } finally {
    await client.close();
  }
}

const stepUp = () => [
  `POST ${pub}/mcp 403`,
  ...discovery(),
  `POST ${hydra.issuer}/oauth2/token 200`,
  `POST ${pub}/mcp 403`,
];

test("@modelcontextprotocol/sdk 1.x with toolfs:read alone: a write is refused (403 insufficient_scope)", async () => {
  const { refusal, log } = await readOnly("v1", "oauth-ro-v1");
  v1Error(403, "Streamable HTTP error: Server returned 403 after trying upscoping")(refusal);
  assert.deepEqual(log.map((e) => e.line), stepUp());
  tokenRequest(log[4], ro, { grant_type: "client_credentials", scope: "toolfs:read", audience: pub, resource: pub });
});

test("@modelcontextprotocol/client 2.x with toolfs:read alone: a write is refused (403 insufficient_scope)", async (t) => {
  await t.test("by default it re-authorizes once, then gives up", async () => {
    const { refusal, log } = await readOnly("v2", "oauth-ro-v2");
    assert.equal(refusal.name, "SdkHttpError");
    assert.equal(refusal.code, "CLIENT_HTTP_FORBIDDEN");
    assert.equal(refusal.message, "Server returned 403 insufficient_scope after step-up re-authorization (retry limit 1 reached)");
    assert.equal(refusal.data.status, 403);
    assert.deepEqual(JSON.parse(refusal.data.text), problem403);
    assert.deepEqual(log.map((e) => e.line), stepUp());
    tokenRequest(log[4], ro, { grant_type: "client_credentials", scope: "toolfs:read", audience: pub, resource: pub });
  });
  await t.test("with onInsufficientScope: 'throw' it says which scope", async () => {
    const { refusal, log } = await readOnly("v2", "oauth-ro-v2-throw", { onInsufficientScope: "throw" });
    assert.equal(refusal.name, "InsufficientScopeError");
    assert.equal(refusal.requiredScope, "toolfs:write");
    assert.equal(refusal.message, 'Insufficient scope: required "toolfs:write"');
    assert.deepEqual(log.map((e) => e.line), [`POST ${pub}/mcp 403`]);
  });
});

test("without credentials: 401, and no token asked for", async (t) => {
  await t.test("@modelcontextprotocol/sdk 1.x", async () => {
    const w = wire();
    await assert.rejects(sdks.v1.connect({ fetch: w.fetch }), v1Error(401, `Streamable HTTP error: Error POSTing to endpoint: ${JSON.stringify(problem401)}\n`));
    assert.deepEqual(w.log.map((e) => [e.line, e.challenge]), [[`POST ${pub}/mcp 401`, challenge401()]]);
  });
  await t.test("@modelcontextprotocol/client 2.x", async () => {
    const w = wire();
    await assert.rejects(sdks.v2.connect({ fetch: w.fetch }), (e) => {
      assert.equal(e.name, "SdkHttpError");
      assert.equal(e.code, "CLIENT_HTTP_AUTHENTICATION");
      assert.equal(e.message, "Version negotiation failed: the server requires authorization (HTTP 401)");
      assert.deepEqual(JSON.parse(e.data.text), problem401);
      return true;
    });
    assert.deepEqual(w.log.map((e) => [e.line, e.challenge]), [[`POST ${pub}/mcp 401`, challenge401()]]);
  });
});
