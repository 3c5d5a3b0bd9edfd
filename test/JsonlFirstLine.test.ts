// A JSONL ledger whose FIRST line is well-formed JSON but no ledger row (docs/spec/01-ledger.md, "torn_row" and "schema_invalid";
// docs/recovery.md, states torn_tail and unreadable_file) never reads as "no runs": inspect, verify, the Promise facade
// and the writer's open all fail closed with a LedgerCorruption that names the line, whatever the JSON value is and
// whether or not whole groups follow it; and the advice inspect prints, followed through the real CLI, ends in a clean
// workspace with the bad bytes kept.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as fc from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import { RecoveryResolver, RuntimeEventStore as Facade } from "runtime-resume/promise"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { layerStore, layerWorkspace } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { inspectionExitCode, inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { verificationOk, verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const ROOT = fileURLToPath(new URL("..", import.meta.url))
const LEDGER = "runtime-events.jsonl"
const SEED = 20261207

const platform = Layer.mergeAll(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)
const readOnly = (workspace: string) => Layer.provide(layerWorkspace({ workspace, readOnly: true }), platform)
const writer = (workspace: string) => Layer.provide(layerStore("jsonl", { workspace, readOnly: false }), platform)

// Two runs in two writes (whole groups): the valid part a bad first line may sit in front of.
const seed = (workspace: string) =>
  Effect.gen(function*() {
    const ledger = yield* RuntimeEventStore
    const a = EventBuilder.make("run-a", 5)
    const b = EventBuilder.make("run-b", 6)
    yield* ledger.appendBatch([
      { runId: RunId.make("run-a"), events: [a.opened(), a.user("hello")] },
      { runId: RunId.make("run-b"), events: [b.opened()] }
    ], { mode: "restore" })
    yield* ledger.appendBatch([{ runId: RunId.make("run-a"), events: [a.model("done")] }], { mode: "restore" })
  }).pipe(Effect.provide(writer(workspace)), Effect.scoped, Effect.orDie)

/** A JSON value that is no ledger row, as one line's text (no newline). */
const notARow: fc.Arbitrary<string> = fc.oneof(
  // Objects missing the row's fields (seq, end, event), or with none of them.
  fc.dictionary(fc.string({ maxLength: 6 }).filter((k) => !["seq", "end", "event", "digest"].includes(k)), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 })
    .map((o) => JSON.stringify(o)),
  fc.record({ seq: fc.integer({ min: 1, max: 9 }), end: fc.integer({ min: 1, max: 9 }) }, { requiredKeys: [] }).map((o) => JSON.stringify(o)),
  // Arrays, numbers, strings, booleans and null.
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }).map((a) => JSON.stringify(a)),
  fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })).map((n) => JSON.stringify(n)),
  fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s)),
  fc.constantFrom("null", "true", "false", "{}", "[]", "0", "\"\""),
  // Row-shaped objects with a field of the wrong type.
  fc.constantFrom(
    `{"digest":"sha256:${"0".repeat(64)}","end":"1","event":{"runId":"run-a"},"seq":1}`,
    `{"digest":"sha256:${"0".repeat(64)}","end":1,"event":{"runId":"run-a"},"seq":1.5}`,
    `{"digest":"sha256:${"0".repeat(64)}","end":1,"event":{"runId":7},"seq":1}`,
    `{"digest":"sha256:${"0".repeat(64)}","end":1,"event":"run-a","seq":1}`,
    `{"digest":7,"end":1,"event":{"runId":"run-a"},"seq":1}`,
    `{"digest":"sha256:${"0".repeat(64)}","end":0,"event":{"runId":"run-a"},"seq":0}`,
    `{"digest":"sha256:${"0".repeat(64)}","end":1,"event":{"runId":"run-a"},"seq":2}`
  )
)

/** Where the bad line goes: the whole file, or in front of a valid ledger's whole groups. */
type Placement = "alone" | "before a valid ledger"

interface Verdict {
  readonly name: string
  readonly ok: ReadonlyArray<string>
  readonly messages: ReadonlyArray<string>
}

// Every reader and the writer's open, in-process: the names of those that did NOT fail closed.
const judge = (workspace: string, name: string, expect: { readonly file: boolean; readonly byte: boolean }) =>
  Effect.gen(function*() {
    const ok: Array<string> = []
    const messages: Array<string> = []
    const verified = yield* Effect.exit(verifyWorkspace().pipe(Effect.provide(readOnly(workspace))))
    messages.push(JSON.stringify(verified))
    if (Exit.isFailure(verified) ? !JSON.stringify(verified).includes("LedgerCorruption") : verificationOk(verified.value)) {
      ok.push("verify")
    }
    const inspected = yield* Effect.exit(inspectWorkspace().pipe(Effect.provide(readOnly(workspace))))
    messages.push(JSON.stringify(inspected))
    if (Exit.isSuccess(inspected) ? inspectionExitCode(inspected.value) < 2 : !JSON.stringify(inspected).includes("LedgerCorruption")) {
      ok.push("inspect")
    }
    const word = yield* Effect.promise(() =>
      Facade.open(workspace).then((h) => new RecoveryResolver(h).computeResumePlan()).then(
        (w) => String(w),
        (e: unknown) => `rejected: ${String(e)}`
      )
    )
    messages.push(`facade: ${word}`)
    if (word !== "corruption") ok.push("facade")
    const appended = yield* Effect.exit(
      Effect.flatMap(RuntimeEventStore, (ledger) => ledger.append(RunId.make("run-z"), [EventBuilder.make("run-z", 9).opened()]))
        .pipe(Effect.provide(writer(workspace)), Effect.scoped)
    )
    messages.push(JSON.stringify(appended))
    if (!(Exit.isFailure(appended) && JSON.stringify(appended).includes("LedgerCorruption"))) ok.push("writer open")
    // What and where: the line of the damage is named, with its byte offset when it is no row (a row that names its
    // run is named by run and seq), and the file when the whole file is that line.
    const where = JSON.stringify(inspected)
    if (!/line 1\b/.test(where)) ok.push("inspect names no line 1")
    if (expect.byte && !/byte 0\b/.test(where)) ok.push("inspect names no byte offset 0")
    if (expect.file && !where.includes(LEDGER)) ok.push("inspect names no file")
    // A complete line that is no row is no torn tail (docs/spec/01-ledger.md): never `torn_row`, whose quarantine refuses it.
    if (where.includes(`"reason":"torn_row"`)) ok.push("inspect calls it a torn tail")
    return { name, ok, messages } satisfies Verdict
  })

describe("a JSONL ledger whose first line is JSON but no row", () => {
  it.scopedLive("fails closed in verify, inspect, the Promise facade and the writer's open (generated)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "rr-firstline-" })
      const valid = NodePath.join(scratch, "valid")
      yield* seed(valid)
      const validBytes = yield* fs.readFileString(NodePath.join(valid, LEDGER))
      const [firstValid, ...restValid] = validBytes.split("\n")
      const lines = fc.sample(notARow, { numRuns: 24, seed: SEED })
      const cases: Array<{ name: string; text: string; file: boolean; byte: boolean }> = []
      for (const [i, line] of lines.entries()) {
        const placement: Placement = i % 2 === 0 ? "alone" : "before a valid ledger"
        // A row-shaped line that names its run and closes its group is that run's row: named by run, seq and line.
        const named = /"event":\{"runId":"run-a"\},"seq":1\}$/.test(line) && /"end":1,/.test(line)
        cases.push({
          name: `${placement}: ${line}`,
          text: placement === "alone" ? `${line}\n` : `${line}\n${validBytes}`,
          file: placement === "alone" && !named,
          byte: !named
        })
      }
      // A store-format line with a bad digest, alone and as the valid ledger's first line.
      const badDigest = firstValid!.replace(/"digest":"sha256:([0-9a-f])/, (_, c: string) => `"digest":"sha256:${c === "0" ? "1" : "0"}`)
      assert.notStrictEqual(badDigest, firstValid)
      // Alone, it closes its group (`end` 1): a committed row of run-a whose digest does not verify.
      const alone = badDigest.replace(/"end":\d+,/, `"end":1,`)
      cases.push({ name: "alone: a store-format line with a bad digest", text: `${alone}\n`, file: false, byte: false })
      // Alone and its group left open: a torn tail that quarantine refuses (it does not chain), so no torn_row.
      assert.notStrictEqual(alone, badDigest)
      cases.push({ name: "alone, group open: a store-format line with a bad digest", text: `${badDigest}\n`, file: false, byte: false })
      cases.push({ name: "valid first line, digest changed", text: [badDigest, ...restValid].join("\n"), file: false, byte: false })
      const failures: Array<Verdict> = []
      let n = 0
      for (const c of cases) {
        const ws = NodePath.join(scratch, `case-${n++}`)
        yield* fs.makeDirectory(ws)
        yield* fs.writeFileString(NodePath.join(ws, LEDGER), c.text)
        const v = yield* judge(ws, c.name, c)
        if (v.ok.length > 0) failures.push(v)
        // The file is never rewritten by any of them.
        assert.strictEqual(yield* fs.readFileString(NodePath.join(ws, LEDGER)), c.text, `${c.name}: the ledger is unchanged`)
      }
      assert.deepStrictEqual(
        failures.map((f) => `${f.name}: ${f.ok.join(", ")}`),
        [],
        failures.map((f) => `${f.name}\n${f.messages.join("\n").slice(0, 2000)}`).join("\n\n")
      )
    }).pipe(Effect.provide(NodeContext.layer)), 240_000)

  // Runs the real executable (the flag unset).
  const cli = (args: ReadonlyArray<string>) =>
    Effect.scoped(Effect.gen(function*() {
      const proc = yield* Command.make(BIN, ...args).pipe(
        Command.workingDirectory(ROOT),
        Command.env({ MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "", RUNTIME_RESUME_INVOKED_AS: "", npm_command: "" }),
        Command.start
      )
      const text = (s: typeof proc.stdout) => s.pipe(Stream.decodeText(), Stream.mkString)
      const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], { concurrency: "unbounded" })
      return { code: Number(code), stdout, stderr }
    }))

  it.scopedLive("the real CLI: the advice, followed, ends in a clean workspace with the bad bytes kept", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "rr-firstline-cli-" })
      for (const [i, first] of [`{"not":"a row"}`, "null", "bad digest, group open"].entries()) {
        const ws = NodePath.join(scratch, `ws-${i}`)
        let line = first
        if (i === 2) {
          // The first row of a two-row group, alone, its digest changed: a torn tail quarantine would refuse.
          yield* seed(ws)
          const row = (yield* fs.readFileString(NodePath.join(ws, LEDGER))).split("\n")[0]!
          line = row.replace(/"digest":"sha256:([0-9a-f])/, (_, c: string) => `"digest":"sha256:${c === "0" ? "1" : "0"}`)
          assert.notStrictEqual(line, row)
          yield* fs.writeFileString(NodePath.join(ws, LEDGER), `${line}\n`)
        } else if (i === 0) {
          yield* fs.makeDirectory(ws)
          yield* fs.writeFileString(NodePath.join(ws, LEDGER), `${line}\n`)
        } else {
          yield* seed(ws)
          const valid = yield* fs.readFileString(NodePath.join(ws, LEDGER))
          yield* fs.writeFileString(NodePath.join(ws, LEDGER), `${line}\n${valid}`)
        }
        const before = yield* fs.readFileString(NodePath.join(ws, LEDGER))
        const verified = yield* cli(["verify", ws])
        assert.strictEqual(verified.code, 2, `verify: ${verified.stdout} ${verified.stderr}`)
        assert.notMatch(verified.stdout + verified.stderr, /no runs/i)
        const seen = new Set<string>()
        let settled = false
        for (let step = 0; step < 4 && !settled; step++) {
          const inspected = yield* cli(["inspect", "--json", ws])
          if (inspected.code === 0) {
            settled = true
            break
          }
          assert.strictEqual(inspected.code, 2, `inspect: ${inspected.stdout} ${inspected.stderr}`)
          const doc = JSON.parse(inspected.stdout)
          const next = doc.next?.person ?? doc.runs?.find((run: any) => run.next?.person?.kind === "command")?.next.person
          assert.strictEqual(next?.kind, "command", `a command to type: ${inspected.stdout}`)
          const argv: ReadonlyArray<string> = next.argv
          const key = argv.join(" ")
          assert.isFalse(seen.has(key), `the same advice twice: ${key}`)
          seen.add(key)
          // A complete line that is no row is no torn tail: the file is moved aside whole (docs/recovery.md).
          assert.match(key, /^repair --quarantine-ledger /, `the advice is the unreadable-file exit: ${key}`)
          const ran = yield* cli(argv)
          assert.strictEqual(ran.code, 0, `${key}: ${ran.stdout} ${ran.stderr}`)
        }
        assert.isTrue(settled, "inspect ends clean")
        // Every byte of the bad file is kept in the workspace, beside the (clean) ledger.
        const kept: Array<string> = []
        for (const name of yield* fs.readDirectory(ws)) {
          if (name === LEDGER || !name.startsWith("runtime-events")) continue
          kept.push(yield* fs.readFileString(NodePath.join(ws, name)))
        }
        assert.isTrue(kept.some((k) => k.includes(before) || before.includes(k) && k.includes(line)), `the bad bytes are kept: ${JSON.stringify(kept)}`)
      }
    }).pipe(Effect.provide(NodeContext.layer)), 240_000)
})
