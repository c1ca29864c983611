// Regenerates the types from ../../api/openapi.yaml into a temporary file and
// fails when they differ from the committed src/schema.d.ts.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "toolfs-schema-"));
try {
  const fresh = join(dir, "schema.d.ts");
  execFileSync("npx", ["--no-install", "openapi-typescript", "../../api/openapi.yaml", "-o", fresh], { stdio: "inherit" });
  if (readFileSync(fresh, "utf8") !== readFileSync("src/schema.d.ts", "utf8")) {
    console.error("src/schema.d.ts is stale: run `npm run generate` and commit it");
    process.exitCode = 1;
  } else {
    console.log("src/schema.d.ts is fresh");
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
