// Sign-in with the authorization-code flow and PKCE (RFC 7636) against
// --oauth-issuer, as the client --ui-client-id, redirecting back to this
// page (docs/console.md, "Signing in"). The verifier and state live in
// this tab's session storage for the round trip only.
const store = window.sessionStorage;

function b64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
const random = (n) => b64url(crypto.getRandomValues(new Uint8Array(n)));
const redirectURI = () => location.origin + location.pathname;

async function metadata(issuer) {
  const base = issuer.replace(/\/+$/, "");
  for (const p of ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"]) {
    try {
      const res = await fetch(base + p);
      if (res.ok) return res.json();
    } catch { /* try the other */ }
  }
  throw new Error(`the issuer ${issuer} published no metadata this page could read`);
}

// signInWithOAuth sends the person to the issuer's authorization endpoint.
export async function signInWithOAuth(cfg) {
  if (!cfg.clientId) throw new Error("sign-in is not configured: the server needs --ui-client-id");
  const meta = await metadata(cfg.issuer);
  const verifier = random(32), state = random(16);
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  store.setItem("toolfs.pkce", JSON.stringify({ verifier, state }));
  const q = new URLSearchParams({
    response_type: "code", client_id: cfg.clientId, redirect_uri: redirectURI(), scope: cfg.scope,
    state, code_challenge: challenge, code_challenge_method: "S256",
  });
  if (cfg.resource) { q.set("resource", cfg.resource); q.set("audience", cfg.resource); }
  location.assign(`${meta.authorization_endpoint}?${q}`);
}

// finishOAuth trades the code the issuer sent back for an access token,
// or returns null when this load is not a redirect back.
export async function finishOAuth(cfg) {
  const q = new URLSearchParams(location.search);
  if (!q.has("code") && !q.has("error")) return null;
  history.replaceState(null, "", redirectURI());
  const pending = JSON.parse(store.getItem("toolfs.pkce") ?? "null");
  store.removeItem("toolfs.pkce");
  if (q.has("error")) throw new Error(`sign-in failed: ${q.get("error")} ${q.get("error_description") ?? ""}`);
  if (!pending || q.get("state") !== pending.state) throw new Error("sign-in failed: the answer does not belong to this tab's request");
  const meta = await metadata(cfg.issuer);
  const body = new URLSearchParams({
    grant_type: "authorization_code", code: q.get("code"), redirect_uri: redirectURI(),
    client_id: cfg.clientId, code_verifier: pending.verifier,
  });
  if (cfg.resource) body.set("resource", cfg.resource);
  const res = await fetch(meta.token_endpoint, { method: "POST", body });
  const tok = await res.json().catch(() => ({}));
  if (!res.ok || !tok.access_token) throw new Error(`sign-in failed: ${tok.error ?? res.status} ${tok.error_description ?? ""}`);
  try {
    const claims = JSON.parse(atob(tok.access_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    if (claims.sub) store.setItem("toolfs.subject", claims.sub);
  } catch { /* an opaque token: no name to show */ }
  return tok.access_token;
}
