// The README's usage example must be examples/usage.ts, the code the e2e test
// runs, less its first comment line.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

test("README usage block is examples/usage.ts", () => {
  const readme = fs.readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const block = readme.match(/## Usage\n[\s\S]*?```ts\n([\s\S]*?)```/);
  assert.ok(block, "README has no ts block under ## Usage");
  const example = fs.readFileSync(new URL("../examples/usage.ts", import.meta.url), "utf8");
  assert.equal(block[1], example.replace(/^\/\/.*\n/, ""));
});

test("the top-level README's frontend example is examples/usage.ts too", () => {
  const readme = fs.readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
  const block = readme.match(/## From a browser frontend\n[\s\S]*?```ts\n([\s\S]*?)```/);
  assert.ok(block, "README has no ts block under ## From a browser frontend");
  const example = fs.readFileSync(new URL("../examples/usage.ts", import.meta.url), "utf8");
  assert.equal(block[1], example.replace(/^\/\/.*\n/, ""));
});
