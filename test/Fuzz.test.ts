// Fuzzes everything that reads bytes: the event decoder, the JSONL reader, `import` and `planResume`. Every input must
// give a result or a typed error (never a defect, interruption or hang), leave files unchanged, and give the same answer twice.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Effect, Either, Equal, Exit, FastCheck as fc, Layer, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import * as Errors from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import type { ResumePlan } from "../src/Domain/ResumePlan.js"
import * as RE from "../src/Domain/RuntimeEvent.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { importLedger } from "../src/Programs/ImportLedger.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as Gen from "./support/fuzzGenerators.js"

// The number of cases over all targets (a test may read it from the environment); `npm run fuzz` sets 100,000.
const TOTAL = Number(process.env["RR_FUZZ_RUNS"] ?? 2000)
const SEED = Number(process.env["RR_FUZZ_SEED"] ?? 20_250_601)
const SHARE = { decoder: 0.4, plan: 0.4, jsonl: 0.12, import: 0.08 } as const
const countOf = (target: keyof typeof SHARE) => Math.max(50, Math.round(TOTAL * SHARE[target]))
// Oversized (> 16 MiB) events cost ~0.5 s each: always a few, more only in long runs.
const OVERSIZED = TOTAL >= 10_000
const CASE_TIMEOUT = "60 seconds"
const BATCH = 100

const TYPED: ReadonlyArray<abstract new(...args: never) => unknown> = [
  Errors.LedgerCorruption,
  Errors.AppendRejected,
  Errors.RuntimeOffsetMismatch,
  Errors.RunSealed,
  Errors.RunNotFound,
  Errors.WorkspaceNotFound,
  Errors.WorkspaceAmbiguous,
  Errors.WorkspaceLocked,
  Errors.StoreWriteFailed,
  Errors.StoreReadFailed,
  Errors.ImportInvalid,
  Errors.ExportFailed
]

/** Raised inside a case when an invariant breaks; collected, reported together at the end of the target. */
class Broken extends Error {}

/** The outcome of one effect: `ok` with a short summary, or a typed error's tag, reason, seq and line. */
interface Outcome {
  readonly key: string
  readonly error?: { readonly _tag: string; readonly reason?: string; readonly seq?: number; readonly line?: number; readonly runId?: string; readonly message: string }
}

/** Judges an exit: a typed failure or a success; a defect, an interruption or an untyped failure is `Broken`. */
const judge = <A>(what: string, exit: Exit.Exit<A, unknown>, summarize: (a: A) => string): Outcome => {
  if (Exit.isSuccess(exit)) return { key: `ok ${summarize(exit.value)}` }
  const cause = exit.cause
  if (Cause.isDie(cause)) throw new Broken(`${what}: defect: ${Cause.pretty(cause).slice(0, 2000)}`)
  if (Cause.isInterrupted(cause)) throw new Broken(`${what}: interrupted`)
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) throw new Broken(`${what}: a failure with no error: ${Cause.pretty(cause).slice(0, 500)}`)
  const e = failure.value
  if (!TYPED.some((cls) => e instanceof cls)) {
    throw new Broken(`${what}: an untyped error: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`)
  }
  const err = e as NonNullable<Outcome["error"]>
  return {
    key: `${err._tag}${err.reason !== undefined ? `(${err.reason})` : ""}${err.seq !== undefined ? ` seq ${err.seq}` : ""}${
      err.line !== undefined ? ` line ${err.line}` : ""
    }`,
    error: err
  }
}

const tagOf = (o: Outcome): string => o.error === undefined ? "ok" : `${o.error._tag}${o.error.reason !== undefined ? `(${o.error.reason})` : ""}`

/** Outcome counts of one target, by case kind and by tag/reason. */
class Tally {
  cases = 0
  readonly byKind = new Map<string, number>()
  readonly byOutcome = new Map<string, number>()
  readonly failures: Array<string> = []
  add(kind: string, outcome: string) {
    this.cases++
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1)
    this.byOutcome.set(outcome, (this.byOutcome.get(outcome) ?? 0) + 1)
  }
  summary(target: string) {
    const sorted = (m: Map<string, number>) => Object.fromEntries([...m].sort((a, b) => b[1] - a[1]))
    return { target, cases: this.cases, failures: this.failures.length, byOutcome: sorted(this.byOutcome), byKind: sorted(this.byKind) }
  }
}

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

const describeBytes = (bytes: Uint8Array) =>
  bytes.length <= 4096 ? `bytes (base64) ${Buffer.from(bytes).toString("base64")}` : `${bytes.length} bytes, sha256 ${sha(bytes)}`

/**
 * Runs `count` cases of `arb` in batches (seeded: the same seed gives the same cases), each bounded in time; every
 * `Broken` invariant is collected with the case's description, and the target fails listing them.
 */
const fuzz = <A, R>(
  target: string,
  arb: fc.Arbitrary<A>,
  count: number,
  check: (a: A, tally: Tally) => Effect.Effect<void, Broken, R>,
  describeCase: (a: A) => string
) =>
  Effect.gen(function*() {
    const tally = new Tally()
    for (let done = 0, batch = 0; done < count; batch++) {
      const n = Math.min(BATCH, count - done)
      const cases = fc.sample(arb, { numRuns: n, seed: SEED + batch * 7919 + target.length })
      for (let k = 0; k < cases.length; k++) {
        const c = cases[k]!
        const exit = yield* Effect.exit(check(c, tally).pipe(Effect.timeout(CASE_TIMEOUT)))
        if (Exit.isFailure(exit)) {
          const f = Cause.failureOption(exit.cause)
          const d = Cause.dieOption(exit.cause)
          const why = Option.isSome(f)
            ? f.value instanceof Broken ? f.value.message : `timed out after ${CASE_TIMEOUT}`
            : Option.isSome(d) && d.value instanceof Broken
            ? d.value.message
            : Cause.pretty(exit.cause).slice(0, 2000)
          tally.failures.push(`${target} batch ${batch} case ${k} (seed ${SEED}): ${why}\n  input: ${describeCase(c).slice(0, 6000)}`)
          tally.add("failed", "FAILED")
        }
      }
      done += n
      // Let the event loop breathe between batches (vitest's worker RPC times out if it is starved for long).
      yield* Effect.sleep("1 millis")
      // Progress of long runs (`npm run fuzz`), every 2,000 cases.
      if (count >= 5000 && done % 2000 === 0) {
        console.log(`${target}: ${done}/${count} cases, ${tally.failures.length} failing; ${JSON.stringify(tally.summary(target).byOutcome)}`)
      }
    }
    console.log(JSON.stringify(tally.summary(target), null, 1))
    assert.deepStrictEqual(tally.failures.slice(0, 5), [], `${tally.failures.length} failing ${target} cases`)
    assert.strictEqual(tally.cases, count)
  })

const check = (condition: boolean, message: string) => {
  if (!condition) throw new Broken(message)
}

/** Runs a synchronous check inside an effect: a `Broken` becomes the typed failure, anything else stays a defect. */
const invariant = (f: () => void): Effect.Effect<void, Broken> =>
  Effect.try({ try: f, catch: (e) => e instanceof Broken ? e : new Broken(`unexpected exception: ${String(e)}`) })

// ---------------------------------------------------------------------------------------------------------------------
// The event decoder

const checkDecoder = (c: Gen.DecoderCase, tally: Tally) =>
  invariant(() => {
    const run = () => {
      let result: Either.Either<RE.RuntimeEvent, RE.StoredEventFailure>
      try {
        result = RE.decodeStoredText(c.text)
      } catch (e) {
        throw new Broken(`decodeStoredText threw: ${String(e)}`)
      }
      if (Either.isRight(result)) {
        const again = RE.canonicalText(result.right)
        check(Either.isRight(again) && again.right === c.text, "a decoded event does not re-encode to its own text")
        return "ok"
      }
      check(["invalid_json", "non_canonical", "schema_invalid"].includes(result.left.reason), `unknown reason ${result.left.reason}`)
      return result.left.reason
    }
    const first = run()
    check(first === run(), "decoding twice gave two answers")
    if (c.valid) check(first === "ok", `a canonical valid event failed to decode: ${first}`)
    // The plain strict decode never throws on any parsed value.
    try {
      const parsed = JSON.parse(c.text) as unknown
      RE.decodeEvent(parsed)
    } catch (e) {
      if (!(e instanceof SyntaxError)) throw new Broken(`decodeEvent threw: ${String(e)}`)
    }
    tally.add(c.kind, first)
  })

// ---------------------------------------------------------------------------------------------------------------------
// planResume

const checkPlan = (c: Gen.PlanCase, tally: Tally) =>
  Effect.gen(function*() {
    const rows: Array<RE.PrefixRow> = []
    for (const r of c.rows) {
      const decoded = RE.decodeStoredText(r.text)
      if (Either.isLeft(decoded)) throw new Broken(`generator: a plan row does not decode: ${decoded.left.message}`)
      rows.push({ seq: r.seq, digest: r.digest, event: decoded.right })
    }
    const options = c.expectedHighWater !== undefined ? { expectedHighWater: c.expectedHighWater } : {}
    const plans: Array<ResumePlan> = []
    const summarize = (p: ResumePlan) => {
      plans.push(p)
      return `${p.decision} ${p.highWater.seq}`
    }
    const a = judge("planResume(iterable)", yield* Effect.exit(planResume(rows, options)), summarize)
    const b = judge("planResume(iterable) again", yield* Effect.exit(planResume(rows, options)), summarize)
    const s = judge("planResume(stream)", yield* Effect.exit(planResume(Stream.fromIterable(rows).pipe(Stream.rechunk(3)), options)), summarize)
    yield* invariant(() => {
      check(a.key === b.key && a.key === s.key, `three runs disagree: ${a.key} / ${b.key} / ${s.key}`)
      if (plans.length === 3) check(Equal.equals(plans[0], plans[1]) && Equal.equals(plans[0], plans[2]), "the plans are not Equal")
      if (a.error !== undefined) check(a.error._tag === "LedgerCorruption" || a.error._tag === "RuntimeOffsetMismatch", `unexpected ${a.key}`)
      if (c.reason !== undefined) {
        check(a.error?._tag === "LedgerCorruption" && a.error.reason === c.reason, `expected ${c.reason}, got ${a.key}: ${a.error?.message}`)
        check(a.error?.seq === c.seq, `expected seq ${c.seq}, got ${a.key}`)
      }
      if (c.kind === "valid run") {
        const last = c.rows[c.rows.length - 1]!
        const expected = c.expectedHighWater
        const matches = expected === undefined || (expected.seq === last.seq && (expected.digest === undefined || expected.digest === last.digest))
        if (matches) {
          check(a.error === undefined, `a valid run failed to plan: ${a.key} ${a.error?.message}`)
          check(plans[0]!.highWater.seq === last.seq && plans[0]!.highWater.digest === last.digest, "the plan's high-water is not the last row's")
        } else {
          check(a.error?._tag === "RuntimeOffsetMismatch", `expected RuntimeOffsetMismatch, got ${a.key}`)
        }
      }
    })
    tally.add(c.kind.split(":")[0]!, tagOf(a))
  })

// ---------------------------------------------------------------------------------------------------------------------
// The JSONL reader

const JsonlLayer = Layer.merge(NodeFileSystem.layer, NodeWorkspaceLock.layerNode)

/** Opens the workspace read-only and reads everything: listRuns, readRun and highWater of each run, exportRows. */
const readEverything = (workspace: string, runIds: ReadonlyArray<string>, full: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const outcomes = new Map<string, Outcome>()
    const opened = yield* Effect.exit(JsonlRuntimeEventStore.make({ workspace, readOnly: true }))
    const open = judge("open", opened, () => "")
    outcomes.set("open", open)
    if (Exit.isFailure(opened)) return outcomes
    const store = opened.value
    const listed = yield* Effect.exit(store.listRuns())
    outcomes.set("listRuns", judge("listRuns", listed, (runs) => runs.join(",")))
    const all = new Set([...runIds, ...(Exit.isSuccess(listed) ? listed.value : [])])
    for (const runId of all) {
      const rid = RunId.make(runId, true)
      outcomes.set(
        `readRun ${runId}`,
        judge(`readRun ${runId}`, yield* Effect.exit(store.readRun(rid)), (rows) => `${rows.length} ${rows[rows.length - 1]?.digest}`)
      )
      if (!full) continue
      outcomes.set(
        `readRunPages ${runId}`,
        judge(`readRunPages ${runId}`, yield* Effect.exit(Stream.runCollect(store.readRunPages(rid, 2))), (rows) => `${Chunk.size(rows)}`)
      )
      outcomes.set(`highWater ${runId}`, judge(`highWater ${runId}`, yield* Effect.exit(store.highWater(rid)), (hw) => `${hw.seq} ${hw.digest}`))
    }
    outcomes.set(
      "exportRows",
      judge("exportRows", yield* Effect.exit(Stream.runCollect(store.exportRows())), (rows) => `${Chunk.size(rows)}`)
    )
    return outcomes
  }))

const render = (outcomes: Map<string, Outcome>) => [...outcomes].map(([k, o]) => `${k}: ${o.key}`).join("\n")

const IMPORT_REASONS_OF_SCHEMA = ["schema_invalid", "too_deep", "too_large"]

/** Checks what reading a case must report, beyond being typed and deterministic. */
const expectRead = (c: Gen.LedgerCase, outcomes: Map<string, Outcome>) => {
  if (c._tag === "Valid") {
    for (const run of c.runs) {
      const rows = c.built.rows.filter((r) => r.runId === run.ids.runId)
      const last = rows[rows.length - 1]!
      const o = outcomes.get(`readRun ${run.ids.runId}`)!
      check(o.key === `ok ${rows.length} ${last.digest}`, `a valid run read as ${o.key}`)
    }
    check(outcomes.get("exportRows")!.key === `ok ${c.built.rows.length}`, `a valid ledger exported as ${outcomes.get("exportRows")!.key}`)
  }
  if (c._tag === "Reason") {
    const keys = [`readRun ${c.target}`, `readRunPages ${c.target}`, `highWater ${c.target}`, "exportRows"]
    for (const k of keys) {
      const e = outcomes.get(k)!.error
      check(e?._tag === "LedgerCorruption" && e.reason === c.reason, `${k}: expected ${c.reason} (${c.variant}), got ${outcomes.get(k)!.key} ${e?.message ?? ""}`)
      check(e?.line === c.line, `${k}: expected line ${c.line}, got ${outcomes.get(k)!.key}`)
      if (c.seq !== undefined && k !== "exportRows") check(e?.seq === c.seq, `${k}: expected seq ${c.seq}, got ${outcomes.get(k)!.key}`)
    }
    if (c.fileLevel) {
      for (const runId of c.runIds) {
        const e = outcomes.get(`readRun ${runId}`)!.error
        check(e?._tag === "LedgerCorruption" && e.reason === c.reason, `run ${runId}: expected ${c.reason}, got ${outcomes.get(`readRun ${runId}`)!.key}`)
      }
    }
  }
}

const kindOf = (c: Gen.LedgerCase) =>
  c._tag === "Valid" ? "valid" : c._tag === "Mutated" ? c.mutation : `reason ${c.reason}`

const checkJsonl = (workspace: string) => (c: Gen.LedgerCase, tally: Tally) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = NodePath.join(workspace, JsonlRuntimeEventStore.FILE_NAME)
    const bytes = Gen.bytesOf(c)
    yield* Effect.orDie(fs.writeFile(path, bytes))
    const before = sha(bytes)
    // Every read method for the generated corruptions; the cheaper set (readRun, listRuns, exportRows) for the rest.
    const full = c._tag === "Reason"
    const first = yield* readEverything(workspace, Gen.runIdsOf(c), full)
    const second = yield* readEverything(workspace, Gen.runIdsOf(c), full)
    const after = sha(yield* Effect.orDie(fs.readFile(path)))
    const listing = yield* Effect.orDie(fs.readDirectory(workspace))
    yield* invariant(() => {
      check(after === before, "reading changed the file")
      check(listing.length === 1 && listing[0] === JsonlRuntimeEventStore.FILE_NAME, `reading created files: ${listing.join(", ")}`)
      check(render(first) === render(second), `two reads disagree:\n${render(first)}\n---\n${render(second)}`)
      expectRead(c, first)
    })
    const target = c._tag === "Reason" ? c.target : Gen.runIdsOf(c)[0]!
    tally.add(kindOf(c), tagOf(first.get(`readRun ${target}`) ?? first.get("open")!))
  })

// ---------------------------------------------------------------------------------------------------------------------
// import

/** Imports `file` into a fresh store, reads every run back, and imports it again (which must add nothing). */
const importOnce = (file: string) =>
  Effect.gen(function*() {
    const result = judge("import", yield* Effect.exit(importLedger(file)), (r) => `${r.added}+${r.skipped} ${r.runs.map((x) => `${x.runId}@${x.highWater.seq}:${x.highWater.digest}`).join(",")}`)
    if (result.error !== undefined) return { result, readBack: "" }
    const store = yield* RuntimeEventStore
    const runs = yield* Effect.exit(store.listRuns())
    const parts: Array<string> = []
    for (const runId of Exit.isSuccess(runs) ? runs.value : []) {
      const o = judge(`read back ${runId}`, yield* Effect.exit(store.readRun(runId)), (rows) => `${rows.length} ${rows[rows.length - 1]?.digest}`)
      if (o.error !== undefined) throw new Broken(`an imported run does not read back: ${o.key} ${o.error.message}`)
      parts.push(`${runId}: ${o.key}`)
    }
    const again = judge("import again", yield* Effect.exit(importLedger(file)), (r) => `${r.added}`)
    if (again.key !== "ok 0") throw new Broken(`importing the same file twice added events or failed: ${again.key} ${again.error?.message ?? ""}`)
    return { result, readBack: parts.join("\n") }
  })

const IMPORT_RULE_REASONS = new Set<string>(Gen.REASONS.filter((r) => !["torn_row", "invalid_json", "non_canonical"].includes(r)))

const checkImport = (dir: string) => (input: { readonly c: Gen.LedgerCase; readonly bare: boolean; readonly sqlite: boolean }, tally: Tally) =>
  Effect.gen(function*() {
    const { c } = input
    const fs = yield* FileSystem.FileSystem
    const file = NodePath.join(dir, "import.jsonl")
    // Bare events: each row's event text, in file order (valid ledgers only).
    const bare = input.bare && c._tag === "Valid"
    const bytes = bare ? Buffer.from(c.built.rows.map((r) => `${r.text}\n`).join(""), "utf8") : Gen.bytesOf(c)
    yield* Effect.orDie(fs.writeFile(file, bytes))
    const run = input.sqlite
      ? Effect.scoped(Effect.flatMap(fs.makeTempDirectoryScoped({ directory: dir, prefix: "sq-" }), (workspace) =>
        importOnce(file).pipe(Effect.provide(SqliteRuntimeEventStore.layer({ workspace })), Effect.orDie)))
      : importOnce(file).pipe(Effect.provide(MemoryRuntimeEventStore.layer))
    const first = yield* Effect.suspend(() => run).pipe(Effect.catchAllDefect((d) => Effect.fail(d instanceof Broken ? d : new Broken(`defect: ${String(d)}`))))
    const second = yield* Effect.suspend(() => run).pipe(Effect.catchAllDefect((d) => Effect.fail(d instanceof Broken ? d : new Broken(`defect: ${String(d)}`))))
    const after = sha(yield* Effect.orDie(fs.readFile(file)))
    yield* invariant(() => {
      check(after === sha(bytes), "import changed its input file")
      check(first.result.key === second.result.key && first.readBack === second.readBack, `two imports disagree: ${first.result.key} / ${second.result.key}`)
      const e = first.result.error
      if (c._tag === "Valid") {
        check(e === undefined, `a valid ledger failed to import (${bare ? "bare" : "rows"}): ${first.result.key} ${e?.message ?? ""}`)
        for (const r of c.runs) {
          const rows = c.built.rows.filter((x) => x.runId === r.ids.runId)
          check(first.readBack.includes(`${r.ids.runId}: ok ${rows.length} ${rows[rows.length - 1]!.digest}`), `run ${r.ids.runId} imported with another high-water`)
        }
      }
      if (c._tag === "Reason" && IMPORT_RULE_REASONS.has(c.reason)) {
        const allowed = c.reason === "schema_invalid" ? IMPORT_REASONS_OF_SCHEMA : [c.reason]
        check(e?._tag === "ImportInvalid" && allowed.includes(e.reason ?? ""), `expected ImportInvalid(${allowed.join("|")}) for ${c.variant}, got ${first.result.key} ${e?.message ?? ""}`)
      }
    })
    tally.add(`${kindOf(c)}${bare ? " (bare events)" : ""}${input.sqlite ? " (sqlite)" : ""}`, tagOf(first.result))
  })

// ---------------------------------------------------------------------------------------------------------------------

const timeoutFor = (count: number, msPerCase: number) => Math.max(120_000, count * msPerCase)

describe("fuzz: everything that reads bytes gives a result or a typed error, the same twice, and changes nothing", () => {
  const decoderCount = countOf("decoder")
  it.live(`the event decoder (${decoderCount} cases)`, () =>
    fuzz("decoder", Gen.decoderCase({ oversized: OVERSIZED }), decoderCount, checkDecoder, (c) => `${c.kind}: ${JSON.stringify(c.text.slice(0, 3000))}`),
    timeoutFor(decoderCount, 80))

  const planCount = countOf("plan")
  it.live(`planResume (${planCount} cases)`, () =>
    fuzz("planResume", Gen.planCase, planCount, checkPlan, (c) => JSON.stringify(c).slice(0, 6000)), timeoutFor(planCount, 80))

  const jsonlCount = countOf("jsonl")
  it.live(`the JSONL reader (${jsonlCount} cases)`, () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fuzz-jsonl-" })
      yield* fuzz("jsonl", Gen.ledgerCase({ oversized: OVERSIZED }), jsonlCount, checkJsonl(workspace), (c) => `${kindOf(c)}: ${describeBytes(Gen.bytesOf(c))}`)
    }).pipe(Effect.scoped, Effect.provide(JsonlLayer)), timeoutFor(jsonlCount, 600))

  const importCount = countOf("import")
  it.live(`import into a fresh memory or SQLite store (${importCount} cases)`, () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fuzz-import-" })
      const arb = fc.record({ c: Gen.ledgerCase({ oversized: OVERSIZED }), bare: fc.boolean(), sqlite: fc.integer({ min: 0, max: 19 }).map((n) => n === 0) })
      yield* fuzz("import", arb, importCount, checkImport(dir), (i) => `${kindOf(i.c)} bare=${i.bare} sqlite=${i.sqlite}: ${describeBytes(Gen.bytesOf(i.c))}`)
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)), timeoutFor(importCount, 600))

  it.live("the fuzz checks can fail: a mislabelled corruption, a defect and an untyped error are caught", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fuzz-self-" })
      const c = fc.sample(fc.gen().map(Gen.reasonLedger("name_mismatch")), { numRuns: 1, seed: SEED })[0]!
      const tally = new Tally()
      yield* checkJsonl(workspace)(c, tally)
      const mislabelled = yield* Effect.flip(checkJsonl(workspace)({ ...c, reason: "duplicate_call" }, tally))
      assert.include(mislabelled.message, "expected duplicate_call")
      assert.throws(() => judge("x", Exit.die(new Error("boom")), () => ""), Broken)
      assert.throws(() => judge("x", Exit.fail(new Error("plain")), () => ""), Broken)
      assert.strictEqual(judge("x", Exit.fail(new Errors.RunNotFound({ runId: "r", message: "m" })), () => "").key, "RunNotFound")
    }).pipe(Effect.scoped, Effect.provide(JsonlLayer)))

  // Found by this fuzzing: SQLite stores ids and tool names as TEXT, and a lone surrogate does not survive the round trip
  // (written as WTF-8, read back as U+FFFD). A file with runs "a\ud800" and "a\udc00" imported "successfully" and then
  // read back as identity_mismatch; a response to a call named "t\ud800" was refused (name_mismatch) by SQLite only.
  // Ids and tool names must now be well-formed Unicode: such input is schema_invalid everywhere.
  it.live("regression: ids and tool names with a lone surrogate are refused as schema_invalid (import, decode)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fuzz-lone-" })
      const file = NodePath.join(dir, "in.jsonl")
      const event = (runId: string, id: string, body: unknown) =>
        JSON.stringify({ body, id, invocationId: `inv-${id}`, runId, sessionId: "s", ts: 0, turnId: "t" })
      yield* fs.writeFileString(file, [
        event("a\ud800", "e1", { _tag: "RunOpened", toolBoundary: "none" }),
        event("a\udc00", "e2", { _tag: "RunOpened", toolBoundary: "none" })
      ].join("\n") + "\n")
      const workspace = NodePath.join(dir, "ws")
      const refused = yield* Effect.flip(importLedger(file).pipe(Effect.provide(SqliteRuntimeEventStore.layer({ workspace }))))
      assert.strictEqual(refused._tag, "ImportInvalid")
      assert.strictEqual((refused as Errors.ImportInvalid).reason, "schema_invalid")
      assert.strictEqual((refused as Errors.ImportInvalid).line, 1)
      const call = event("r", "e3", { _tag: "FunctionCall", args: null, callId: "c1", name: "t\ud800" })
      const decoded = RE.decodeStoredText(call)
      assert.isTrue(Either.isLeft(decoded) && decoded.left.reason === "schema_invalid")
      // A lone surrogate in a text field is fine: it is escaped in the canonical bytes and round-trips.
      const text = event("r", "e4", { _tag: "UserMessage", text: "x\ud800" })
      assert.isTrue(Either.isRight(RE.decodeStoredText(text)))
    }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer)))

  // The > 16 MiB inputs, always, once per target (the random runs draw them only in long runs).
  it.live("an event over 16 MiB is schema_invalid to the decoder and the JSONL reader, and too_large to import", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fuzz-big-" })
      const c = fc.sample(fc.gen().map(Gen.oversizedLedger), { numRuns: 1, seed: SEED })[0]!
      const tally = new Tally()
      yield* checkJsonl(dir)(c, tally)
      assert.deepStrictEqual([...tally.byOutcome.keys()], ["LedgerCorruption(schema_invalid)"])
      const importDir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fuzz-big-import-" })
      yield* checkImport(importDir)({ c, bare: false, sqlite: false }, tally)
      assert.isTrue(tally.byOutcome.has("ImportInvalid(too_large)"), JSON.stringify([...tally.byOutcome]))
      const text = c.built.rows[1]!.text
      const decoded = RE.decodeStoredText(text)
      assert.isTrue(Either.isLeft(decoded) && decoded.left.reason === "schema_invalid")
    }).pipe(Effect.scoped, Effect.provide(JsonlLayer)), 120_000)
})
