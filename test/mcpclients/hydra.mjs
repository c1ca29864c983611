// A real Ory Hydra v2.3.0 (docs/identity.md, "Running Hydra as the tests do";
// the Go tests' internal/hydratest does the same): `hydra serve all` on two
// free loopback ports, data in memory, JWT access tokens. The binary is
// $TOOLFS_HYDRA_BIN (.ci/run builds it before this suite and exports it), else
// the one test/hydra/build.sh caches, running the script when it is absent.
import { spawn, execFile } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { freePort, repo } from "./harness.mjs";

async function binary() {
  if (process.env.TOOLFS_HYDRA_BIN) return process.env.TOOLFS_HYDRA_BIN;
  const { stdout } = await promisify(execFile)("bash", [path.join(repo, "test/hydra/build.sh")], {
    env: { ...process.env, TOOLFS_HYDRA_VERSION: "v2.3.0" },
    timeout: 1800000,
  });
  return stdout.trim();
}

async function ready(url) {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(5000) })).ok;
  } catch {
    return false;
  }
}

// startHydra runs one Hydra and waits for its two APIs. Like hydratest, it
// then installs RSA-2048 signing keys: Hydra would generate RSA-4096 keys on
// first use, which on a busy machine outlasts its 10 s write timeout.
// env adds to Hydra's environment (the console's test sets its login and
// consent URLs and CORS).
export async function startHydra({ env = {} } = {}) {
  const bin = await binary();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "toolfs-hydra-"));
  const [pub, admin] = [await freePort(), await freePort()];
  const issuer = `http://127.0.0.1:${pub}`;
  const adminURL = `http://127.0.0.1:${admin}`;
  const log = fs.openSync(path.join(dir, "hydra.log"), "w");
  const proc = spawn(bin, ["serve", "all", "--dev", "--sqa-opt-out"], {
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      DSN: "memory",
      SECRETS_SYSTEM: crypto.randomBytes(24).toString("hex"),
      URLS_SELF_ISSUER: issuer,
      SERVE_PUBLIC_HOST: "127.0.0.1",
      SERVE_PUBLIC_PORT: String(pub),
      SERVE_ADMIN_HOST: "127.0.0.1",
      SERVE_ADMIN_PORT: String(admin),
      STRATEGIES_ACCESS_TOKEN: "jwt",
      LOG_LEVEL: "warn",
      ...env,
    },
    stdio: ["ignore", log, log],
  });
  fs.closeSync(log);
  let exited = false;
  proc.on("exit", () => (exited = true));
  const kill = () => proc.kill("SIGKILL");
  process.on("exit", kill);

  const stop = async () => {
    process.off("exit", kill);
    if (!exited) {
      const gone = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 10000);
      await gone;
      clearTimeout(t);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };

  const adminDo = async (method, p, body, want) => {
    const res = await fetch(`${adminURL}${p}`, {
      method,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30000),
    });
    const text = await res.text();
    if (res.status !== want) throw new Error(`hydra: ${method} ${p}: ${res.status} ${text}`);
    return JSON.parse(text);
  };

  try {
    for (const until = Date.now() + 60000; ; await new Promise((r) => setTimeout(r, 100))) {
      if (exited) throw new Error(`hydra exited at start-up: ${fs.readFileSync(path.join(dir, "hydra.log"), "utf8")}`);
      if ((await ready(`${adminURL}/health/ready`)) && (await ready(`${issuer}/health/ready`))) break;
      if (Date.now() > until) throw new Error(`hydra not ready within 60s: ${fs.readFileSync(path.join(dir, "hydra.log"), "utf8")}`);
    }
    for (const set of ["hydra.openid.id-token", "hydra.jwt.access-token"]) {
      const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
      const jwk = { ...privateKey.export({ format: "jwk" }), kid: `${set}-${crypto.randomBytes(8).toString("hex")}`, alg: "RS256", use: "sig" };
      await adminDo("PUT", `/admin/keys/${set}`, { keys: [jwk] }, 200);
    }
  } catch (e) {
    await stop();
    throw e;
  }

  return {
    issuer,
    adminURL,
    // createClient registers a client_credentials client (POST
    // /admin/clients) and returns {id, secret}.
    async createClient({ scope, audience, tokenEndpointAuthMethod = "client_secret_basic" }) {
      const c = await adminDo(
        "POST",
        "/admin/clients",
        { grant_types: ["client_credentials"], token_endpoint_auth_method: tokenEndpointAuthMethod, scope, audience },
        201,
      );
      return { id: c.client_id, secret: c.client_secret };
    },
    stop,
  };
}
