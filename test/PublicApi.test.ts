// The public surface as a user imports it: the package's three exports resolve by name, and the README's
// ten-line example runs as printed (in a child process, against a real SQLite workspace).
import { Command, FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Equal, Stream, String as Str } from "effect"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import * as Api from "runtime-resume"
import * as Testing from "runtime-resume/test"
import * as Mcp from "runtime-resume/mcp"

const ROOT = path.resolve(import.meta.dirname, "..")

describe("public surface", () => {
  it("runtime-resume/mcp resolves by name, an entry like ./ai (package.json exports, an optional peer)", () => {
    assert.strictEqual(typeof Mcp.McpToolset.load, "function")
    assert.strictEqual(typeof Mcp.McpAiToolkit.toAi, "function")
    assert.strictEqual(Mcp.McpRecoveryMode.fromHints({ readOnlyHint: true }), "read_only")
    const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"))
    assert.deepStrictEqual(pkg.exports["./mcp"], {
      "@runtime-resume/source": "./src/Mcp.ts",
      types: "./dist/dts/src/Mcp.d.ts",
      import: "./dist/esm/src/Mcp.js",
      require: "./dist/cjs/src/Mcp.js"
    })
    assert.strictEqual(pkg.peerDependencies["@modelcontextprotocol/sdk"], "^1.32.0")
    assert.deepStrictEqual(pkg.peerDependenciesMeta["@modelcontextprotocol/sdk"], { optional: true })
  })

  it.effect("runtime-resume/test plans the harness ledger through the memory layer, as the index does", () =>
    Effect.gen(function*() {
      const b = Testing.EventBuilder.make("t")
      const store = yield* Api.RuntimeEventStore.RuntimeEventStore
      yield* store.append(b.runId, Testing.HarnessLedger.prefixEvents("after_function_response", "t"))
      const plan = yield* Api.planResume(store.readRunPages(b.runId, 2))
      assert.strictEqual(Api.decide(plan), "safe_replay")
      assert.isTrue(Equal.equals(plan, yield* Api.planResume(yield* store.readRun(b.runId))))
      assert.strictEqual(Testing.RUNTIME_RESUME_FAILPOINTS.length, 12)
      assert.strictEqual(Api.RUNTIME_RESUME_FAILPOINTS, Testing.RUNTIME_RESUME_FAILPOINTS)
    }).pipe(Effect.provide(Testing.layerMemory)))

  it.scopedLive("the README's example prints 'blocked blocked indeterminate' and writes runtime.sqlite 0600", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-readme-" })
      const proc = yield* Command.make("node", "--import", "tsx", "test/fixtures/readme-example.ts", ws).pipe(
        Command.workingDirectory(ROOT),
        Command.start
      )
      const [out, err, code] = yield* Effect.all([
        proc.stdout.pipe(Stream.decodeText(), Stream.mkString),
        proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
        proc.exitCode
      ], { concurrency: 3 })
      assert.strictEqual(Number(code), 0, err)
      assert.strictEqual(Str.trim(out), "blocked blocked indeterminate")
      const info = yield* fs.stat(path.join(ws, "runtime.sqlite"))
      assert.strictEqual(info.mode & 0o777, 0o600)
    }).pipe(Effect.provide(NodeContext.layer)))
})
