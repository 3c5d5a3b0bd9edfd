// A JSONL reader (readRun, exportRows, scanRuns) holds at most `readerTuning.spanBytes` of an append group: an import
// writes a run as ONE group, and holding it until its last line cost the whole run. Past the budget the scanner keeps
// the group's byte range (a `SpanItem`) and the reader reads it again once the group completes. This must never change
// a verdict (every read gives what it gives with the whole group held), and a region that changed between the first
// read and the re-read is refused (`StoreReadFailed`), never accepted.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Effect, Either, Exit, FastCheck as fc, Layer, Stream } from "effect"
import { readFileSync, truncateSync, writeFileSync } from "node:fs"
import * as NodePath from "node:path"
import * as Digest from "../src/Domain/Digest.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import { readerTuning } from "../src/Layers/internal/jsonlFiles.js"
import { LineScanner } from "../src/Layers/internal/jsonlScan.js"
import type { ScannedItem } from "../src/Layers/internal/jsonlScan.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"

const TestLayer = Layer.merge(NodeContext.layer, NodeWorkspaceLock.layerNode)
const text = (e: RuntimeEvent) => Either.getOrThrow(canonicalText(e))

// The lines of one append group of `events`, continuing `from`; `breakAt` (0-based) gets a wrong digest.
const group = (from: { seq: number; digest: string }, runId: string, events: ReadonlyArray<RuntimeEvent>, breakAt?: number) => {
  let { seq, digest } = from
  const end = seq + events.length
  const lines: Array<string> = []
  events.forEach((e, i) => {
    seq += 1
    digest = Digest.next(digest, seq, text(e))
    lines.push(jsonlLine(seq, end, i === breakAt ? Digest.genesis(`${runId}-other`) : digest, text(e)))
  })
  return { lines, tail: { seq, digest } }
}

// Run a: one big group (an import's), then a small one; run b: a small group in between.
const ledger = (size: number, breakAt?: number) => {
  const a = EventBuilder.make("run-a")
  const b = EventBuilder.make("run-b")
  const big = group({ seq: 0, digest: Digest.genesis("run-a") }, "run-a", [
    a.opened(),
    ...Array.from({ length: size }, (_, i) => a.user(`u${1000 + i}`))
  ], breakAt)
  const other = group({ seq: 0, digest: Digest.genesis("run-b") }, "run-b", [b.opened(), b.user("hello")])
  const after = group(big.tail, "run-a", [a.model("done")])
  return { big: big.lines, other: other.lines, after: after.lines }
}

const workspaceWith = (bytes: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-span-" })
    yield* fs.writeFile(NodePath.join(workspace, JsonlRuntimeEventStore.FILE_NAME), Buffer.from(bytes, "utf8"), { mode: 0o600 })
    return workspace
  })

// What each reader gives, as comparable text: its rows (seq, digest) or its failure (tag, reason, line, message).
const outcome = (exit: Exit.Exit<unknown, unknown>): string =>
  Exit.match(exit, {
    onSuccess: (value) => JSON.stringify(value),
    onFailure: (cause) =>
      `failure ${
        JSON.stringify(Chunk.toReadonlyArray(Cause.failures(cause)).map((e) => {
          const f = e as { _tag?: string; reason?: string; line?: number; message?: string }
          return [f._tag, f.reason, f.line, f.message]
        }))
      } defects ${Chunk.size(Cause.defects(cause))}`
  })

const readAll = (workspace: string) =>
  Effect.gen(function*() {
    const store = yield* JsonlRuntimeEventStore.make({ workspace, readOnly: true })
    const pick = (rows: ReadonlyArray<{ readonly seq: number; readonly digest: string; readonly event: { readonly runId: string } }>) =>
      rows.map((r) => `${r.event.runId}:${r.seq}:${r.digest.slice(7, 15)}`)
    return {
      readA: outcome(yield* Effect.exit(Effect.map(store.readRun(RunId.make("run-a")), pick))),
      readB: outcome(yield* Effect.exit(Effect.map(store.readRun(RunId.make("run-b")), pick))),
      exportRows: outcome(yield* Effect.exit(Effect.map(Stream.runCollect(store.exportRows()), (c) => pick(Chunk.toReadonlyArray(c))))),
      scanRuns: outcome(
        yield* Effect.exit(Effect.map(Stream.runCollect(store.scanRuns!(100)), (c) =>
          Chunk.toReadonlyArray(c).map((i) =>
            i._tag === "Row" ? `${i.row.event.runId}:${i.row.seq}` : `Failed ${i.runId} ${i.error.reason} ${i.error.line} ${i.error.message}`
          )))
      )
    }
  })

// Reads with a span budget of `spanBytes`, recording the most line bytes any scan held.
const readWithBudget = (workspace: string, spanBytes: number) =>
  Effect.gen(function*() {
    const saved = { ...readerTuning }
    let peak = 0
    let spans = 0
    readerTuning.spanBytes = spanBytes
    readerTuning.onScanEnd = (scanner) => {
      peak = Math.max(peak, scanner.peakHeldBytes)
    }
    readerTuning.beforeReread = () => {
      spans++
    }
    const result = yield* readAll(workspace).pipe(Effect.ensuring(Effect.sync(() => Object.assign(readerTuning, saved))))
    return { result, peak, spans }
  })

describe("JSONL scanner: a reader's span budget", () => {
  it("keeps a group past the budget as a byte range, never holding more than the budget", () => {
    const { big, after } = ledger(300)
    const bytes = Buffer.from([...big, ...after].join(""), "utf8")
    const total = big.reduce((n, l) => n + Buffer.byteLength(l), 0)

    const lean = new LineScanner(true, false, 2000)
    const out: Array<ScannedItem> = []
    lean.push(bytes, out)
    assert.isUndefined(lean.end())
    assert.isAtMost(lean.peakHeldBytes, 2000)
    assert.deepStrictEqual(out.map((i) => i._tag), ["Span", "Row"])
    const span = out[0]!
    assert.strictEqual(span._tag, "Span")
    if (span._tag === "Span") {
      assert.deepStrictEqual([span.line, span.lines, span.firstSeq, span.lastSeq, span.end, span.offset, span.endOffset], [1, 301, 1, 301, 301, 0, total])
    }

    // Without a budget (the old reader) the whole group is held.
    const holding = new LineScanner(true)
    const held: Array<ScannedItem> = []
    holding.push(bytes, held)
    assert.strictEqual(holding.peakHeldBytes, total - 301, "every line of the group, without newlines")
    assert.strictEqual(held.length, 302)
  })
})

describe("JSONL readers: a large append group in bounded memory, the same verdicts", () => {
  // The name, the file, and whether a big group commits (a torn one is never read again: it is the tail).
  const cases: ReadonlyArray<readonly [string, () => string, boolean?]> = [
    ["a sound ledger", () => {
      const l = ledger(300)
      return [...l.big, ...l.other, ...l.after].join("")
    }],
    ["a chain break inside the big group", () => {
      const l = ledger(300, 150)
      return [...l.big, ...l.other, ...l.after].join("")
    }],
    ["the big group torn at the end of the file", () => {
      const l = ledger(300)
      return [...l.other, ...l.big.slice(0, 250)].join("")
    }, false],
    ["the big group torn mid-line", () => {
      const l = ledger(300)
      return [...l.other, ...l.big.slice(0, 250), l.big[250]!.slice(0, 40)].join("")
    }, false],
    ["the big group cut, complete groups after it", () => {
      const l = ledger(300)
      return [...l.big.slice(0, 250), ...l.other].join("")
    }],
    ["garbage inside the big group, complete groups after it", () => {
      const l = ledger(300)
      return [...l.big.slice(0, 200), "not json\n", ...l.big.slice(200), ...l.other].join("")
    }],
    ["garbage after the last complete group", () => {
      const l = ledger(300)
      return [...l.big, ...l.other, "{\"seq\":1,\n"].join("")
    }]
  ]
  for (const [name, bytes, commits] of cases) {
    it.scopedLive(`${name}: every reader gives what it gives holding the whole group`, () =>
      Effect.gen(function*() {
        const workspace = yield* workspaceWith(bytes())
        const held = yield* readWithBudget(workspace, 1 << 30)
        const lean = yield* readWithBudget(workspace, 2000)
        assert.strictEqual(held.spans, 0)
        assert.isAbove(held.peak, 30_000, "the old reader holds the group")
        if (commits !== false) assert.isAbove(lean.spans, 0, "the budget was exceeded: the group was read again")
        assert.isAtMost(lean.peak, 2000)
        assert.deepStrictEqual(lean.result, held.result)
      }).pipe(Effect.provide(TestLayer)))
  }
})

describe("JSONL readers: any budget, any damage, the same verdicts (property)", () => {
  // Two runs in groups of random sizes (some large), then one mutation: a cut at any byte, a byte changed anywhere,
  // a line dropped or garbage put in. Every reader must give with a small budget exactly what it gives holding all.
  const damaged = fc.record({
    sizes: fc.array(fc.integer({ min: 1, max: 120 }), { minLength: 1, maxLength: 4 }),
    mutation: fc.oneof(
      fc.record({ kind: fc.constant("none" as const) }),
      fc.record({ kind: fc.constant("cut" as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
      fc.record({ kind: fc.constant("flip" as const), at: fc.double({ min: 0, max: 1, noNaN: true }), byte: fc.integer({ min: 0, max: 255 }) }),
      fc.record({ kind: fc.constant("drop" as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
      fc.record({ kind: fc.constant("garbage" as const), at: fc.double({ min: 0, max: 1, noNaN: true }) })
    ),
    budget: fc.integer({ min: 1, max: 6000 })
  })

  const build = (sizes: ReadonlyArray<number>): Array<string> => {
    const a = EventBuilder.make("run-a")
    const b = EventBuilder.make("run-b")
    const lines: Array<string> = []
    let tailA = { seq: 0, digest: Digest.genesis("run-a") }
    let tailB = { seq: 0, digest: Digest.genesis("run-b") }
    sizes.forEach((n, i) => {
      const ga = group(tailA, "run-a", tailA.seq === 0 ? [a.opened(), ...Array.from({ length: n }, (_, k) => a.user(`a${i}-${k}`))] : Array.from({ length: n }, (_, k) => a.user(`a${i}-${k}`)))
      tailA = ga.tail
      lines.push(...ga.lines)
      const gb = group(tailB, "run-b", tailB.seq === 0 ? [b.opened()] : [b.model(`b${i}`)])
      tailB = gb.tail
      lines.push(...gb.lines)
    })
    return lines
  }

  type Sample = typeof damaged extends fc.Arbitrary<infer T> ? T : never
  const mutate = (lines: Array<string>, m: Sample["mutation"]): Buffer => {
    const whole = Buffer.from(lines.join(""), "utf8")
    switch (m.kind) {
      case "none":
        return whole
      case "cut":
        return whole.subarray(0, Math.floor(m.at * whole.length))
      case "flip": {
        const copy = Buffer.from(whole)
        copy[Math.min(copy.length - 1, Math.floor(m.at * copy.length))] = m.byte
        return copy
      }
      case "drop": {
        const i = Math.min(lines.length - 1, Math.floor(m.at * lines.length))
        return Buffer.from([...lines.slice(0, i), ...lines.slice(i + 1)].join(""), "utf8")
      }
      case "garbage": {
        const i = Math.floor(m.at * (lines.length + 1))
        return Buffer.from([...lines.slice(0, i), "garbage\n", ...lines.slice(i)].join(""), "utf8")
      }
    }
  }

  it.scopedLive("readRun, exportRows and scanRuns agree with and without a budget", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-span-prop-" })
      const file = NodePath.join(workspace, JsonlRuntimeEventStore.FILE_NAME)
      const samples = fc.sample(damaged, { numRuns: 60, seed: 914 })
      let reread = 0
      for (const sample of samples) {
        writeFileSync(file, mutate(build(sample.sizes), sample.mutation), { mode: 0o600 })
        const held = yield* readWithBudget(workspace, 1 << 30)
        const lean = yield* readWithBudget(workspace, sample.budget)
        reread += lean.spans
        // Damage holds what follows it until the region resolves, as before; a sound file never holds more than the budget.
        if (sample.mutation.kind === "none") assert.isAtMost(lean.peak, sample.budget, JSON.stringify(sample))
        assert.deepStrictEqual(lean.result, held.result, JSON.stringify(sample))
      }
      assert.isAbove(reread, 20, "the samples exercise re-reads")
    }).pipe(Effect.provide(TestLayer)))
})

describe("JSONL readers: a region that changed between the scan and its re-read is refused", () => {
  const withHook = <A, E, R>(hook: (span: { readonly offset: number; readonly endOffset: number }) => void, effect: Effect.Effect<A, E, R>) =>
    Effect.suspend(() => {
      const saved = { ...readerTuning }
      readerTuning.spanBytes = 2000
      readerTuning.beforeReread = hook
      return effect.pipe(Effect.ensuring(Effect.sync(() => Object.assign(readerTuning, saved))))
    })

  const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<E, never, R> =>
    Effect.flatMap(Effect.either(effect), Either.match({
      onLeft: (e) => Effect.succeed(e),
      onRight: () => Effect.dieMessage("expected a failure, but the effect succeeded")
    }))

  const setup = Effect.gen(function*() {
    const l = ledger(300)
    const workspace = yield* workspaceWith([...l.big, ...l.other, ...l.after].join(""))
    const path = NodePath.join(workspace, JsonlRuntimeEventStore.FILE_NAME)
    const store = yield* JsonlRuntimeEventStore.make({ workspace, readOnly: true })
    return { path, store }
  })

  // Rewrites the file with `u1100` (run a's row 102) replaced by `u1199`: same length, still a row, seqs unchanged.
  const rewriteText = (path: string) => () => {
    const before = readFileSync(path, "utf8")
    assert.include(before, "\"u1100\"")
    writeFileSync(path, before.replace("\"u1100\"", "\"u1199\""))
  }

  it.scopedLive("another run's rows changed (not verified by readRun of run b): StoreReadFailed, not a silent accept", () =>
    Effect.gen(function*() {
      const { path, store } = yield* setup
      const error = yield* failureOf(withHook(rewriteText(path), store.readRun(RunId.make("run-b"))))
      assert.strictEqual(error._tag, "StoreReadFailed")
      assert.include((error as { message: string }).message, "changed while it was read")
      // Read again now, it reads as it is: the change happened before this read.
      assert.strictEqual((yield* store.readRun(RunId.make("run-b"))).length, 2)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a line of the region no longer a row: StoreReadFailed at that line", () =>
    Effect.gen(function*() {
      const { path, store } = yield* setup
      const breakLine = () => {
        const before = readFileSync(path)
        const at = before.indexOf("\"u1100\"")
        before[at] = 0x7b // `{`: the line is no longer JSON
        writeFileSync(path, before)
      }
      const error = yield* failureOf(withHook(breakLine, Stream.runDrain(store.exportRows())))
      assert.strictEqual(error._tag, "StoreReadFailed")
      assert.include((error as { message: string }).message, "line 102 is no longer the row of seq 102")
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("the file cut inside the region: StoreReadFailed", () =>
    Effect.gen(function*() {
      const { path, store } = yield* setup
      const error = yield* failureOf(withHook((span) => truncateSync(path, span.endOffset - 10), Stream.runDrain(store.scanRuns!(100))))
      assert.strictEqual(error._tag, "StoreReadFailed")
      assert.include((error as { message: string }).message, "changed while it was read")
    }).pipe(Effect.provide(TestLayer)))
})
