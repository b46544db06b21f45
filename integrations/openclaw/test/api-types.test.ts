import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

// dist-test/test/ → the package root
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const GENERATED = "src/api-types.ts";

/** The arguments of `npm run generate:api-types`, writing to `out` instead of src/api-types.ts. */
function generatorArgs(out: string): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const [bin, ...args] = String(pkg.scripts["generate:api-types"]).split(/\s+/);
  assert.equal(bin, "openapi-typescript");
  assert.equal(args[args.indexOf("-o") + 1], GENERATED);
  return args.map((a) => (a === GENERATED ? out : a));
}

describe("api types", () => {
  it("src/api-types.ts is what openapi-typescript makes of openapi.json", () => {
    const dir = mkdtempSync(join(tmpdir(), "tr-api-types-"));
    try {
      const out = join(dir, "api-types.ts");
      execFileSync(process.execPath, [join(ROOT, "node_modules/openapi-typescript/bin/cli.js"),
        ...generatorArgs(out)], { cwd: ROOT, stdio: "pipe" });
      assert.equal(readFileSync(join(ROOT, GENERATED), "utf8"), readFileSync(out, "utf8"),
        `${GENERATED} is stale: run \`npm run generate:api-types\` (after `
        + "`python scripts/openapi_schema.py` at the repository root when the API changed)");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
