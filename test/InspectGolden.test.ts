// `inspect` and `verify` documents kept byte-identical through the speed work of docs/benchmarks.md: on a small SQLite
// workspace with every kind of run they report (sealed, blocked by a dangling call, tool-boundary operations settled
// by T2, parked by a person and completed by the reconciler through recovery bundles, hidden events, awkward strings,
// a damaged call index), `inspect --json`, the `inspect` table, `verify --json` and the `verify` table are exactly
// the stored documents (made by the code before the changes: session 8, commit 5edc302; regenerated once when every
// run gained its recovery state and next steps, docs/recovery.md), and exit 2.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import { fillGoldenWorkspace } from "./support/inspectGoldenWorkspace.js"

const ROOT = fileURLToPath(new URL("../", import.meta.url))
const GOLDEN = `${ROOT}test/fixtures/inspect-golden/`

// The CLI from the sources (tsx), as `bin/cli.ts` runs it: stdout and the exit code.
const cli = (args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.start(
      Command.make(process.execPath, "--import", "tsx", "bin/cli.ts", ...args).pipe(Command.workingDirectory(ROOT), Command.env({ NO_COLOR: "1" }))
    )
    const [stdout, code] = yield* Effect.all([proc.stdout.pipe(Stream.decodeText(), Stream.mkString), proc.exitCode], { concurrency: 2 })
    return { stdout, code: Number(code) }
  }))

describe("inspect and verify documents", () => {
  it.scopedLive("are byte-identical to the stored ones on a workspace with every report kind", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-inspect-golden-" })
      yield* fillGoldenWorkspace(ws)
      const cases = [
        { args: ["inspect", "--json"], file: "inspect.json" },
        { args: ["inspect"], file: "inspect.txt" },
        { args: ["verify", "--json"], file: "verify.json" },
        { args: ["verify"], file: "verify.txt" }
      ]
      yield* Effect.forEach(cases, ({ args, file }) =>
        Effect.gen(function*() {
          const { code, stdout } = yield* cli([...args, "--store", "sqlite", ws])
          const expected = yield* fs.readFileString(`${GOLDEN}${file}`)
          assert.strictEqual(stdout.replaceAll(ws, "<WS>"), expected, `${args.join(" ")}`)
          assert.strictEqual(code, 2, `${args.join(" ")} exits 2 (a corrupt run)`)
        }), { concurrency: 2 })
    }).pipe(Effect.provide(NodeContext.layer)), 240_000)
})
