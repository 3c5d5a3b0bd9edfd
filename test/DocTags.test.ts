// Every export under src/ has a doc comment with `@since` and `@category` (scripts/doc-tags.mjs --check; run the
// script without --check to add the missing tags).
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("..", import.meta.url))

describe("doc tags", () => {
  it("every export has a doc comment with @since and @category", () => {
    const run = spawnSync(process.execPath, ["scripts/doc-tags.mjs", ROOT, "--check"], { cwd: ROOT, encoding: "utf8" })
    assert.strictEqual(run.status, 0, run.stdout + run.stderr)
  })
})
