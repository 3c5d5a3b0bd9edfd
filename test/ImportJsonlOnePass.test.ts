// The one-pass import into a JSONL workspace with no ledger (src/Workspace/ImportJsonlOnePass.ts; docs/stores.md "JSONL"):
// it writes what the two-pass import writes, a file refused late leaves nothing behind (no folder, no file) and leaves an
// existing workspace untouched, and a real SIGKILL mid-pass leaves no ledger, only a partial file the next import removes.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { DRAFT_PATTERN } from "../src/Layers/internal/jsonlImportDraft.js"
import * as NodeCliPlatform from "../src/Layers/NodeCliPlatform.js"
import { importFreshJsonl } from "../src/Workspace/ImportJsonlOnePass.js"
import { cli, expectCode, jsonOf, ROOT, describeRun } from "./support/cliProcess.js"

const CHILD = fileURLToPath(new URL("./support/onePassImportChild.ts", import.meta.url))

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)
const listing = (dir: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(Effect.map((names) => [...names].sort()))

const linesOf = (events: ReadonlyArray<RuntimeEvent>) => events.map((e) => `${Either.getOrThrow(canonicalText(e))}\n`).join("")

// Two runs, the first over 1 MiB (more than one chunk of the file is checked and written before a late line).
const sample = () => {
  const a = EventBuilder.make("run-a", 7)
  const b = EventBuilder.make("run-b", 9)
  return [
    a.opened(),
    ...Array.from({ length: 4_000 }, (_, i) => a.user(`${i} ${"x".repeat(300)}`)),
    a.terminated("completed"),
    b.opened(),
    b.user("hello"),
    b.terminated("completed")
  ]
}

// The file's lines with line `at` (1-based; negative from the end) replaced by `f` of it.
const edit = (text: string, at: number, f: (line: string) => string) => {
  const lines = text.split("\n")
  const last = lines[lines.length - 1] === "" ? lines.length - 2 : lines.length - 1
  const i = at > 0 ? at - 1 : last + 1 + at
  lines[i] = f(lines[i]!)
  return lines.join("\n")
}

describe("one-pass import into a fresh JSONL workspace (docs/stores.md)", () => {
  it.scopedLive("writes byte for byte what the two-pass import writes, in both input forms, and leaves no partial file", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-" })
      yield* fs.writeFileString(`${dir}/bare.jsonl`, linesOf(sample()))
      const first = yield* cli("import", "--json", "--store", "jsonl", `${dir}/one`, `${dir}/bare.jsonl`)
      expectCode(first, 0)
      assert.deepStrictEqual([jsonOf(first).added, jsonOf(first).runs.length], [sample().length, 2])
      // The two-pass way: a workspace whose ledger exists (empty) is imported through the store.
      yield* fs.makeDirectory(`${dir}/two`, { mode: 0o700 })
      yield* fs.writeFileString(`${dir}/two/runtime-events.jsonl`, "")
      expectCode(yield* cli("import", "--json", "--store", "jsonl", `${dir}/two`, `${dir}/bare.jsonl`), 0)
      const ledger = yield* fs.readFileString(`${dir}/one/runtime-events.jsonl`)
      assert.strictEqual(ledger, yield* fs.readFileString(`${dir}/two/runtime-events.jsonl`))
      // The store-format form (a version 2 export of it) gives the same ledger again.
      expectCode(yield* cli("export", "--store", "jsonl", `${dir}/one`, `${dir}/export.jsonl`), 0)
      expectCode(yield* cli("import", "--json", "--store", "jsonl", `${dir}/three`, `${dir}/export.jsonl`), 0)
      assert.strictEqual(yield* fs.readFileString(`${dir}/three/runtime-events.jsonl`), ledger)
      expectCode(yield* cli("verify", "--store", "jsonl", `${dir}/three`), 0)
      // A file of one run (the count of its lines is the whole first read) gives what the two-pass way gives too.
      const single = sample().slice(0, 4_002)
      yield* fs.writeFileString(`${dir}/single.jsonl`, linesOf(single))
      // (In process, to see that the one pass wrote it, for one run and for two, and did not hand it to the two passes.)
      const onePass = yield* importFreshJsonl(`${dir}/single.jsonl`, `${dir}/four`).pipe(Effect.provide(NodeCliPlatform.layer))
      assert.strictEqual(Option.getOrThrow(onePass).added, single.length)
      const twoRuns = yield* importFreshJsonl(`${dir}/bare.jsonl`, `${dir}/six`).pipe(Effect.provide(NodeCliPlatform.layer))
      assert.deepStrictEqual(Option.getOrThrow(twoRuns).runs.map((r) => r.added), [4_002, 3])
      assert.strictEqual(yield* fs.readFileString(`${dir}/six/runtime-events.jsonl`), ledger)
      yield* fs.makeDirectory(`${dir}/five`, { mode: 0o700 })
      yield* fs.writeFileString(`${dir}/five/runtime-events.jsonl`, "")
      expectCode(yield* cli("import", "--json", "--store", "jsonl", `${dir}/five`, `${dir}/single.jsonl`), 0)
      assert.strictEqual(
        yield* fs.readFileString(`${dir}/four/runtime-events.jsonl`),
        yield* fs.readFileString(`${dir}/five/runtime-events.jsonl`)
      )
      for (const ws of ["one", "three", "four"]) {
        assert.isFalse((yield* listing(`${dir}/${ws}`)).some((n) => DRAFT_PATTERN.test(n)), ws)
        assert.strictEqual((yield* fs.stat(`${dir}/${ws}/runtime-events.jsonl`)).mode & 0o777, 0o600)
      }
    })), 120_000)

  it.scopedLive("a file refused late leaves nothing in a fresh target, an empty folder empty, and an existing workspace untouched", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-refused-" })
      const bare = linesOf(sample())
      yield* fs.writeFileString(`${dir}/bare.jsonl`, bare)
      // An existing workspace, and the store-format form of the file.
      expectCode(yield* cli("import", "--store", "jsonl", `${dir}/existing`, `${dir}/bare.jsonl`), 0)
      expectCode(yield* cli("export", "--store", "jsonl", `${dir}/existing`, `${dir}/export.jsonl`), 0)
      const rows = yield* fs.readFileString(`${dir}/export.jsonl`)
      const existingLedger = yield* fs.readFileString(`${dir}/existing/runtime-events.jsonl`)
      const existingNames = yield* listing(`${dir}/existing`)
      const total = bare.split("\n").length - 1
      const cases = [
        { name: "bad row near the end", text: edit(bare, -2, (l) => l.replace(`"_tag":"UserMessage"`, `"_tag":"UserMesage"`)), reason: "schema_invalid", line: total - 1 },
        { name: "tampered digest", text: edit(rows, -3, (l) => l.replace(/"sha256:([0-9a-f])/, (_m, c: string) => `"sha256:${c === "0" ? "1" : "0"}`)), reason: "digest_mismatch", line: total },
        { name: "torn last line", text: bare.slice(0, bare.length - 40), reason: "invalid_json", line: total },
        { name: "trailing garbage", text: `${rows}not json\n`, reason: "invalid_json", line: total + 3 }
      ]
      for (const [i, c] of cases.entries()) {
        const file = `${dir}/case-${i}.jsonl`
        yield* fs.writeFileString(file, c.text)
        const fresh = yield* cli("import", "--json", "--store", "jsonl", `${dir}/fresh-${i}`, file)
        expectCode(fresh, 2)
        const error = jsonOf(fresh).error
        assert.deepStrictEqual([error.reason, error.line], [c.reason, c.line], `${c.name}: ${describeRun(fresh)}`)
        assert.isFalse(yield* fs.exists(`${dir}/fresh-${i}`), `${c.name}: no folder is left behind`)
        yield* fs.makeDirectory(`${dir}/empty-${i}`, { mode: 0o700 })
        expectCode(yield* cli("import", "--json", "--store", "jsonl", `${dir}/empty-${i}`, file), 2)
        assert.deepStrictEqual(yield* listing(`${dir}/empty-${i}`), [], `${c.name}: the folder stays empty`)
        expectCode(yield* cli("import", "--json", "--store", "jsonl", `${dir}/existing`, file), 2)
        assert.strictEqual(yield* fs.readFileString(`${dir}/existing/runtime-events.jsonl`), existingLedger, c.name)
        assert.deepStrictEqual(yield* listing(`${dir}/existing`), existingNames, c.name)
      }
    })), 300_000)

  it.scopedLive("a real SIGKILL mid-pass leaves no ledger; the next import removes the partial file and completes", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-kill-" })
      const file = `${dir}/bare.jsonl`
      yield* fs.writeFileString(file, linesOf(sample()))
      const workspace = `${dir}/ws`
      const outcome = yield* Effect.scoped(Effect.gen(function*() {
        const proc = yield* Command.make(process.execPath, "--import", "tsx", CHILD, file, workspace, "1")
          .pipe(Command.workingDirectory(ROOT), Command.start)
        const lines: Array<string> = []
        yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runForEach((l) => Effect.sync(() => lines.push(l))), Effect.forkScoped)
        yield* proc.stderr.pipe(Stream.decodeText(), Stream.runForEach((t) => Effect.sync(() => lines.push(t))), Effect.forkScoped)
        while (!lines.includes("PAUSED") && (yield* proc.isRunning)) yield* Effect.sleep("5 millis")
        const names = yield* listing(workspace)
        yield* proc.kill("SIGKILL").pipe(Effect.ignore)
        yield* proc.exitCode.pipe(Effect.ignore)
        return { lines, names }
      }))
      assert.include(outcome.lines, "PAUSED", outcome.lines.join("\n"))
      const partial = outcome.names.filter((n) => DRAFT_PATTERN.test(n))
      assert.strictEqual(partial.length, 1, outcome.names.join(","))
      assert.isAbove(Number((yield* fs.stat(`${workspace}/${partial[0]}`)).size), 0, "the pass had written lines when it was killed")
      // Killed: no ledger, nothing a store reads; `verify` says so, and the next import completes and tidies up.
      assert.isFalse(yield* fs.exists(`${workspace}/runtime-events.jsonl`))
      const verify = yield* cli("verify", "--json", "--store", "jsonl", workspace)
      expectCode(verify, 2)
      // It names what was left and the command that clears it, which the next step types.
      const said = String(jsonOf(verify).error?.message)
      assert.include(said, partial[0]!, said)
      assert.include(said, `runtime-resume import --store jsonl ${workspace} FILE`, said)
      const again = yield* cli("import", "--json", "--store", "jsonl", workspace, file)
      expectCode(again, 0)
      assert.strictEqual(jsonOf(again).added, sample().length)
      assert.isFalse((yield* listing(workspace)).some((n) => DRAFT_PATTERN.test(n)), "the dead import's partial file is removed")
      expectCode(yield* cli("verify", "--store", "jsonl", workspace), 0)
    })), 120_000)
})
