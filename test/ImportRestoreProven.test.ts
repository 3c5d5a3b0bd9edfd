// `import` writes the runs its check pass checked in restore mode through `restoreProven` (docs/benchmarks.md; SQLite and JSONL):
// the store does not decode or check each event again, but still chains every event's text, checks what only it can
// see, and writes the rows and derived rows. These tests hold it to `restoreStream`: the same tables (SQLite) and the
// same file (JSONL) byte for byte on generated ledgers, the same tail state, the same refusals, and a file changed
// between the passes fails closed, writing nothing.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { existsSync, readFileSync } from "node:fs"
import * as Digest from "../src/Domain/Digest.js"
import type { ImportInvalid } from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine, UserMessage } from "../src/Domain/RuntimeEvent.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { importLedger, importPrepared, prepareImport } from "../src/Programs/ImportLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as Gen from "./support/fuzzGenerators.js"

const textOf = (e: RuntimeEvent) => Either.getOrThrow(canonicalText(e))
const bareLines = (events: ReadonlyArray<RuntimeEvent>) => events.map((e) => `${textOf(e)}\n`).join("")

// Store-format lines of one run, as one group (what `export` writes for a run appended at once).
const rowLines = (events: ReadonlyArray<RuntimeEvent>) => {
  let digest = Digest.genesis(events[0]!.runId)
  return events.map((e, i) => {
    digest = LedgerRules.nextDigest(digest, i + 1, textOf(e))
    return jsonlLine(i + 1, events.length, digest, textOf(e))
  }).join("")
}

type Kind = "sqlite" | "jsonl"
const KINDS: ReadonlyArray<Kind> = ["sqlite", "jsonl"]

// The store, with `restoreProven` counted (`proven`) or taken away (the `restoreStream` path).
const storeLayer = (kind: Kind, workspace: string, path: "proven" | "stream", calls = { proven: 0 }) =>
  Layer.effect(
    RuntimeEventStore,
    Effect.map(RuntimeEventStore, (store) => {
      const restoreProven = store.restoreProven
      if (path === "stream" || restoreProven === undefined) {
        const { restoreProven: _, ...rest } = store
        return rest
      }
      return {
        ...store,
        restoreProven: ((plans, events) => {
          calls.proven++
          return restoreProven(plans, events)
        }) as typeof restoreProven
      }
    })
  ).pipe(Layer.provide(layerStore(kind, { workspace, readOnly: false, importing: true }).pipe(Layer.provide(NodeWorkspaceLock.layer))))

// Every row of the SQLite ledger's tables, in a fixed order.
const tables = (workspace: string) => {
  const db = new Sqlite(`${workspace}/runtime.sqlite`, { readonly: true })
  try {
    return {
      events: db.prepare("SELECT * FROM events ORDER BY pos").raw(true).all(),
      runs: db.prepare("SELECT * FROM runs ORDER BY run_id").raw(true).all(),
      calls: db.prepare("SELECT * FROM calls ORDER BY run_id, call_id").raw(true).all()
    }
  } finally {
    db.close()
  }
}

// What a store holds on disk: its tables (SQLite); the ledger's bytes and whether a marker is left (JSONL).
const writtenIn = (kind: Kind, workspace: string): unknown => {
  if (kind === "sqlite") return tables(workspace)
  const ledger = `${workspace}/runtime-events.jsonl`
  return {
    ledger: existsSync(ledger) ? readFileSync(ledger).toString("base64") : null,
    marker: existsSync(`${workspace}/runtime-events.import-pending`)
  }
}

// What the store's tail state says after the import, in the same open store (JSONL: its in-memory index): every run's
// high-water and unsettled calls, each call's state, the reconcile candidates; then what it answers to an append that
// reuses an imported event id, and to a new run opened with an imported run's invocation.
const stateAfter = (runs: ReadonlyArray<ReadonlyArray<RuntimeEvent>>) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const out: Array<unknown> = [(yield* store.listRuns()).map(String), yield* store.unsettledOperations()]
    for (const events of runs) {
      const runId = RunId.make(events[0]!.runId)
      out.push(yield* store.highWater(runId), yield* store.unsettledCalls(runId))
      for (const e of events) if (e.body._tag === "FunctionCall") out.push(yield* store.toolCallState(runId, e.body.callId))
    }
    const first = runs[0]![0]!
    const last = runs[runs.length - 1]!
    const probe = EventBuilder.make("probe-run", 99)
    out.push(yield* Effect.either(store.append(RunId.make("probe-run"), [probe.opened()])))
    out.push(
      yield* Effect.either(store.append(RunId.make("probe-run"), [probe.custom(new UserMessage({ text: "dup" }), { id: last[last.length - 1]!.id })]))
    )
    const intruder = EventBuilder.make({ ...EventBuilder.idsFor("intruder-run"), invocationId: first.invocationId }, 98)
    out.push(yield* Effect.either(store.append(RunId.make("intruder-run"), [intruder.opened()])))
    return out
  })

const importInto = (kind: Kind, workspace: string, file: string, path: "proven" | "stream", calls = { proven: 0 }) =>
  Effect.either(importLedger(file).pipe(Effect.provide(storeLayer(kind, workspace, path, calls)), Effect.scoped))

/** `importInto` a SQLite workspace (the form this file's SQLite-only tests use). */
export const importWith = (workspace: string, file: string, path: "proven" | "stream", calls = { proven: 0 }) =>
  importInto("sqlite", workspace, file, path, calls)

// `importInto`, then, in the same open store: the tables or file as the import left them, and `stateAfter`.
const importAndProbe = (
  kind: Kind,
  workspace: string,
  file: string,
  path: "proven" | "stream",
  runs: ReadonlyArray<ReadonlyArray<RuntimeEvent>>,
  calls = { proven: 0 }
) =>
  Effect.gen(function*() {
    const result = yield* Effect.either(importLedger(file))
    const written = writtenIn(kind, workspace)
    const state = Either.isRight(result) ? yield* stateAfter(runs) : []
    return { result, written, state }
  }).pipe(Effect.provide(storeLayer(kind, workspace, path, calls)), Effect.scoped)

describe("restoreProven writes what restoreStream writes (docs/benchmarks.md)", () => {
  for (const kind of KINDS) {
    it.scopedLive(`${kind}: generated ledgers (calls, dispatches, responses, hidden events, terminals), bare and store-format: identical ${kind === "jsonl" ? "file and tail state" : "tables"}`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: `rr-import-proven-eq-${kind}-` })
        const samples = fc.sample(
          fc.gen().map((g) => {
            const n = g(() => fc.integer({ min: 1, max: 3 }))
            return Array.from({ length: n }, (_, i) => Gen.grow(g, Gen.startRun(g, i), 0, 40, true).events)
          }),
          { numRuns: 24, seed: 1414 }
        )
        let provenUsed = 0
        let sawRecoveryFact = 0
        for (const [i, runs] of samples.entries()) {
          for (const format of ["events", "rows"] as const) {
            const file = `${dir}/${i}-${format}.jsonl`
            yield* fs.writeFileString(file, runs.map((events) => format === "events" ? bareLines(events) : rowLines(events)).join(""))
            const calls = { proven: 0 }
            const viaProven = yield* importAndProbe(kind, `${dir}/${i}-${format}-proven`, file, "proven", runs, calls)
            const viaStream = yield* importAndProbe(kind, `${dir}/${i}-${format}-stream`, file, "stream", runs)
            assert.deepStrictEqual(viaProven.result, viaStream.result, `sample ${i} (${format}): the same outcome`)
            assert.isTrue(Either.isRight(viaProven.result), `sample ${i} (${format}) imports`)
            assert.deepStrictEqual(viaProven.written, viaStream.written, `sample ${i} (${format}): the same ${kind === "jsonl" ? "file" : "tables"}`)
            assert.deepStrictEqual(viaProven.state, viaStream.state, `sample ${i} (${format}): the same tail state`)
            provenUsed += calls.proven
            // Bare events are always checked in restore mode, so they always take restoreProven; store-format lines are
            // checked by the read-side verifier, which leaves out a check of restore mode on recovery facts: a file with
            // one is written by restoreStream, whose store checks it.
            const recoveryFact = runs.some((events) => events.some((e) => e.body._tag === "FunctionResponse" && e.body.operationId !== undefined))
            assert.strictEqual(calls.proven, format === "rows" && recoveryFact ? 0 : 1, `sample ${i} (${format}): the path taken`)
            if (format === "rows" && recoveryFact) sawRecoveryFact++
          }
        }
        assert.isAbove(provenUsed, samples.length)
        assert.isAbove(sawRecoveryFact, 0, "some samples hold a recovery fact")
      }).pipe(Effect.provide(NodeContext.layer)), 300_000)
  }
})

describe("restoreProven writes a call index larger than one statement (docs/benchmarks.md, session 9)", () => {
  // The store writes a run's call index in key order, a statement's worth (1,666 calls) at a time: a run of 1,800
  // calls whose ids are out of key order (some unanswered) spans two statements; every call row must be there, the
  // same as restoreStream's upserts leave them.
  it.scopedLive("1,800 calls out of key order, bare and store-format: identical tables through both paths", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-proven-calls-" })
      const a = EventBuilder.make("run-a", 5)
      const events: Array<RuntimeEvent> = [a.opened()]
      for (let i = 0; i < 1_800; i++) {
        const callId = `call_${((i * 7_919) % 10_007).toString(36)}_${i}`
        events.push(a.call(callId, "Read", { path: `/f/${i}` }))
        if (i % 7 !== 3) events.push(a.response(callId, "Read", `ok ${i}`))
      }
      for (const format of ["events", "rows"] as const) {
        const file = `${dir}/${format}.jsonl`
        yield* fs.writeFileString(file, format === "events" ? bareLines(events) : rowLines(events))
        const calls = { proven: 0 }
        const viaProven = yield* importWith(`${dir}/${format}-proven`, file, "proven", calls)
        const viaStream = yield* importWith(`${dir}/${format}-stream`, file, "stream")
        assert.strictEqual(calls.proven, 1, `${format}: written through restoreProven`)
        assert.isTrue(Either.isRight(viaProven), `${format} imports`)
        assert.deepStrictEqual(viaProven, viaStream, `${format}: the same outcome`)
        const proven = tables(`${dir}/${format}-proven`)
        assert.strictEqual(proven.calls.length, 1_800, `${format}: every call has its row`)
        assert.deepStrictEqual(proven, tables(`${dir}/${format}-stream`), `${format}: identical tables`)
      }
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)
})

describe("restoreProven refuses what only the store sees, as restoreStream does (docs/benchmarks.md)", () => {
  const stored = (kind: Kind, workspace: string, events: ReadonlyArray<RuntimeEvent>) =>
    Effect.gen(function*() {
      const store = yield* RuntimeEventStore
      yield* store.appendBatch([{ runId: RunId.make(events[0]!.runId), events }], { mode: "restore" })
    }).pipe(Effect.provide(layerStore(kind, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))), Effect.scoped)

  for (const kind of KINDS) {
    it.scopedLive(`${kind}: an event id or an invocation used by a stored run (at a run's first event, or in its second piece): the same ImportInvalid on both paths, nothing written`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: `rr-import-proven-refuse-${kind}-` })
        const s = EventBuilder.make("stored", 1)
        const storedRun = [s.opened(), s.custom(new UserMessage({ text: "x" }), { id: "taken" })]
        const a = EventBuilder.make("run-a", 2)
        const b = EventBuilder.make("run-b", 3)
        // The taken id is the 2,500th event of run-b: in its second piece, not its first.
        const bEvents = [b.opened(), ...Array.from({ length: 2_498 }, (_, i) => b.user(`u${i}`))]
        const cases = {
          id: bareLines([a.opened(), a.user("a")]) +
            bareLines([...bEvents, b.custom(new UserMessage({ text: "dup" }), { id: "taken" }), b.user("after")]),
          invocation: bareLines([a.opened()]) +
            bareLines([EventBuilder.make({ ...EventBuilder.idsFor("run-c"), invocationId: "inv-stored" }, 4).opened()]),
          firstInvocation: bareLines([EventBuilder.make({ ...EventBuilder.idsFor("run-d"), invocationId: "inv-stored" }, 4).opened()]),
          firstEventId: bareLines([a.custom(a.opened().body, { id: "taken" }), a.user("a")])
        }
        for (const [name, lines] of Object.entries(cases)) {
          const file = `${dir}/${name}.jsonl`
          yield* fs.writeFileString(file, lines)
          const outcomes: Array<ImportInvalid> = []
          const before: Array<unknown> = []
          const after: Array<unknown> = []
          for (const path of ["proven", "stream"] as const) {
            const workspace = `${dir}/${name}-${path}`
            yield* stored(kind, workspace, storedRun)
            before.push(writtenIn(kind, workspace))
            const calls = { proven: 0 }
            const result = yield* importInto(kind, workspace, file, path, calls)
            assert.isTrue(Either.isLeft(result), `${name} (${path}) is refused`)
            if (path === "proven") assert.strictEqual(calls.proven, 1)
            outcomes.push((result as Either.Left<ImportInvalid, unknown>).left)
            after.push(writtenIn(kind, workspace))
          }
          assert.deepStrictEqual(after, before, `${name}: only the stored run, on both paths`)
          assert.deepStrictEqual(
            outcomes.map((e) => [e.reason, e.line, e.runId, e.eventId, e.message]),
            [outcomes[1]!, outcomes[1]!].map((e) => [e.reason, e.line, e.runId, e.eventId, e.message]),
            name
          )
        }
        assert.deepStrictEqual([cases.id.split("\n").findIndex((l) => l.includes(`"id":"taken"`)) + 1], [2_502])
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)
  }
})

describe("SQLite restoreProven finds a taken event id by its insert, and refuses as a lookup before it would (docs/benchmarks.md, session 10)", () => {
  it.scopedLive("a stored id after an id repeated inside the piece: duplicate_event_id at the stored id; a repeat alone: StoreWriteFailed; nothing written", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-proven-ids-" })
      const workspace = `${dir}/ws`
      const s = EventBuilder.make("stored", 1)
      const a = EventBuilder.make("run-a", 2)
      const runOf = (ids: ReadonlyArray<string | undefined>) => [a.opened(), ...ids.map((id, i) => id === undefined ? a.user(`u${i}`) : a.custom(new UserMessage({ text: `u${i}` }), { id }))]
      const planOf = (events: ReadonlyArray<RuntimeEvent>) => {
        let tail = LedgerRules.emptyTail("run-a")
        for (const e of events) {
          const checked = LedgerRules.check(tail, { call: () => undefined, eventIdTaken: () => false, invocationOwner: () => undefined }, e, "restore")
          assert.strictEqual(checked._tag, "Accepted")
          if (checked._tag === "Accepted") tail = checked.tail
        }
        return { runId: RunId.make("run-a"), events: events.length, tail, calls: [] }
      }
      yield* Effect.gen(function*() {
        const store = yield* RuntimeEventStore
        yield* store.appendBatch([{ runId: RunId.make("stored"), events: [s.opened(), s.custom(new UserMessage({ text: "x" }), { id: "taken" })] }], { mode: "restore" })
        const before = tables(workspace)
        const restore = (events: ReadonlyArray<RuntimeEvent>) =>
          Effect.either(store.restoreProven!([planOf(events)], Stream.fromIterable(events.map((e) => ({ runId: e.runId, id: e.id, text: textOf(e) })))))
        // "dup" twice inside the piece (events 2 and 3), then the stored id (event 5): refused at the stored id.
        const both = yield* restore(runOf([undefined, "dup", "dup", undefined, "taken", undefined]))
        assert.isTrue(Either.isLeft(both) && both.left._tag === "AppendRejected", JSON.stringify(both))
        if (Either.isLeft(both) && both.left._tag === "AppendRejected") {
          assert.deepStrictEqual([both.left.reason, both.left.eventId], ["duplicate_event_id", "taken"])
        }
        // The stored id alone, late in the piece.
        const stored = yield* restore(runOf([undefined, undefined, "taken"]))
        assert.isTrue(Either.isLeft(stored) && stored.left._tag === "AppendRejected" && stored.left.eventId === "taken")
        // A repeat inside the piece alone: the UNIQUE constraint, as the plain insert fails.
        const repeat = yield* restore(runOf([undefined, "dup", undefined, "dup"]))
        assert.isTrue(Either.isLeft(repeat) && repeat.left._tag === "StoreWriteFailed", JSON.stringify(repeat))
        assert.deepStrictEqual(tables(workspace), before, "nothing written")
        // The same run with fresh ids is written whole.
        const fine = runOf([undefined, "fresh-1", undefined, "fresh-2"])
        const written = yield* restore(fine)
        assert.isTrue(Either.isRight(written))
        assert.strictEqual(tables(workspace).events.length, 2 + fine.length)
      }).pipe(Effect.provide(storeLayer("sqlite", workspace, "proven")), Effect.scoped)
    }).pipe(Effect.provide(NodeContext.layer)), 60_000)
})

describe("a file changed between the check and restoreProven fails closed (docs/benchmarks.md)", () => {
  for (const kind of KINDS) {
    it.scopedLive(`${kind}: an event's id, or its text, changed after the check (still a valid, canonical line): refused, nothing written`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: `rr-import-proven-changed-${kind}-` })
        const a = EventBuilder.make("run-a", 3)
        const events = [a.opened(), a.user("hello"), a.call("c1", "Read", { path: "/x" }), a.response("c1", "Read", "ok"), a.user("bye")]
        const changes = {
          id: (e: RuntimeEvent, i: number) => i === 1 ? a.custom(new UserMessage({ text: "hello" }), { id: "other-id" }) : e,
          text: (e: RuntimeEvent, i: number) => i === 4 ? a.custom(new UserMessage({ text: "BYE" }), { id: e.id }) : e,
          // Two events given one id: the check pass saw them apart, the store's own id check refuses them.
          twice: (e: RuntimeEvent, i: number) => i === 4 ? a.custom(new UserMessage({ text: "bye" }), { id: events[1]!.id }) : e
        }
        for (const format of ["events", "rows"] as const) {
          for (const [name, change] of Object.entries(changes)) {
            const file = `${dir}/${format}-${name}.jsonl`
            const write = (list: ReadonlyArray<RuntimeEvent>) =>
              fs.writeFileString(file, format === "events" ? bareLines(list) : rowLines(list))
            yield* write(events)
            const prepared = yield* prepareImport(file)
            assert.strictEqual(prepared._tag, "Stream")
            yield* write(events.map(change))
            const workspace = `${dir}/${format}-${name}-ws`
            const calls = { proven: 0 }
            const failed = yield* Effect.either(importPrepared(prepared).pipe(Effect.provide(storeLayer(kind, workspace, "proven", calls)), Effect.scoped))
            assert.strictEqual(calls.proven, 1, `${format} ${name}: written through restoreProven`)
            assert.isTrue(Either.isLeft(failed), `${format} ${name}: the import fails`)
            assert.deepStrictEqual(
              writtenIn(kind, workspace),
              kind === "jsonl" ? { ledger: "", marker: false } : { events: [], runs: [], calls: [] },
              `${format} ${name}: nothing written`
            )
          }
        }
      }).pipe(Effect.provide(NodeContext.layer)), 120_000)

    it.scopedLive(`${kind}: the store refuses a plan whose tail its own chain does not reach, writing nothing`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* fs.makeTempDirectoryScoped({ prefix: `rr-import-proven-plan-${kind}-` })
        const workspace = `${dir}/ws`
        const a = EventBuilder.make("run-a", 3)
        const events = [a.opened(), a.user("hello")]
        let tail = LedgerRules.emptyTail("run-a")
        for (const e of events) {
          const checked = LedgerRules.check(tail, { call: () => undefined, eventIdTaken: () => false, invocationOwner: () => undefined }, e, "restore")
          assert.strictEqual(checked._tag, "Accepted")
          if (checked._tag === "Accepted") tail = checked.tail
        }
        yield* Effect.gen(function*() {
          const store = yield* RuntimeEventStore
          const restore = store.restoreProven!
          const stream = (texts: ReadonlyArray<string>) =>
            Stream.fromIterable(events.map((e, i) => ({ runId: e.runId, id: e.id, text: texts[i]! })))
          const plan = { runId: RunId.make("run-a"), events: 2, tail, calls: [] }
          // A text other than the checked one: the chain ends elsewhere.
          const other = yield* Effect.either(restore([plan], stream([textOf(events[0]!), textOf(a.user("HELLO"))])))
          assert.isTrue(Either.isLeft(other) && other.left._tag === "StoreWriteFailed")
          // A tail whose digest is not where the chain ends.
          const wrong = yield* Effect.either(restore([{ ...plan, tail: { ...tail, digest: Digest.genesis("run-a") } }], stream(events.map(textOf))))
          assert.isTrue(Either.isLeft(wrong) && wrong.left._tag === "StoreWriteFailed")
          assert.deepStrictEqual((yield* store.listRuns()).map(String), [])
          if (kind === "jsonl") assert.deepStrictEqual(writtenIn(kind, workspace), { ledger: "", marker: false })
          // The checked texts with their tail: written.
          const reached = yield* restore([plan], stream(events.map(textOf)))
          assert.deepStrictEqual(reached, [{ seq: tail.seq, digest: tail.digest }])
          assert.deepStrictEqual((yield* store.listRuns()).map(String), ["run-a"])
        }).pipe(Effect.provide(storeLayer(kind, workspace, "proven")), Effect.scoped)
      }).pipe(Effect.provide(NodeContext.layer)), 60_000)
  }
})
