// The call index compared in pages (docs/benchmarks.md): `callIndexComparison`, fed the table's rows page by page in key order,
// says exactly what `compareRows` says over the whole table (duplicates, then the first call in call order missing or
// differing, then the first extra row); and a SQLite run whose call index spans several pages is proven as a whole
// (a row changed, missing or added on a later page is found and named).
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodePath from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { type CallEntry, DEFERRED_ARGS_HASH } from "../src/Domain/Rules/LedgerRules.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import { argsHashOfEventText as argsHashFromText } from "../src/Domain/Rules/CallArgsText.js"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"
import { FastCheck as fc } from "effect"
import * as Either from "effect/Either"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { layerStore, layerWorkspace } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import {
  ArgsHashes,
  CALLS_PAGE,
  CALLS_TABLE,
  callIndexComparison,
  callsTableOf,
  compareRows,
  expectedCallRows,
  type RawRow
} from "../src/Layers/internal/sqlDerived.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { verificationOk, verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

// A small deterministic generator (mulberry32), so a failing case can be replayed by its seed.
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const HASH = `sha256:${"ab".repeat(32)}`

// A call index of `n` calls at increasing seqs, ids in no particular key order (as calls are made).
const callIndex = (next: () => number, n: number): Map<string, CallEntry> => {
  const calls = new Map<string, CallEntry>()
  let seq = 2
  for (let i = 0; i < n; i++) {
    seq += 1 + Math.floor(next() * 3)
    const callId = `c${Math.floor(next() * 1e6).toString(36)}-${i}`
    const answered = next() < 0.8
    const dispatched = next() < 0.3
    calls.set(callId, {
      callId,
      name: next() < 0.5 ? "Bash" : "Read",
      argsHash: HASH,
      callSeq: seq,
      hidden: next() < 0.05,
      ...(dispatched ? { dispatchSeq: seq + 1, operationId: `op_${"0".repeat(31)}${i % 10}`, recoveryMode: "idempotent" as const } : {}),
      ...(answered ? { responseSeq: seq + 2, isError: next() < 0.1 } : {})
    })
  }
  return calls
}

// The table's rows as the store's query gives them: in key (call_id) order.
const byKey = (rows: Array<RawRow>): Array<RawRow> =>
  rows.sort((a, b) => {
    const x = String(a["call_id"])
    const y = String(b["call_id"])
    return x < y ? -1 : x > y ? 1 : 0
  })

const paged = (
  table: typeof CALLS_TABLE,
  runId: string,
  calls: Map<string, CallEntry>,
  lastSeq: number,
  rows: ReadonlyArray<RawRow>,
  pageSize: number
): string | undefined => {
  const comparison = callIndexComparison(table, runId, calls, lastSeq)
  for (let i = 0; i < rows.length; i += pageSize) {
    if (comparison.page(rows.slice(i, i + pageSize))) break
  }
  return comparison.finish()
}

const COLUMNS_TO_BREAK = ["name", "args_hash", "call_seq", "hidden", "dispatch_seq", "operation_id", "response_seq", "is_error", "recovery_mode"]

describe("callIndexComparison", () => {
  it("says what compareRows says over the whole table, page size 1 to 1,000, for sound and broken tables alike", () => {
    let broken = 0
    for (let seed = 1; seed <= 400; seed++) {
      const next = random(seed)
      const runId = "run-p"
      const calls = callIndex(next, 1 + Math.floor(next() * 60))
      const lastSeq = Math.max(...[...calls.values()].map((c) => c.callSeq)) + 3
      const table = next() < 0.2 ? callsTableOf(2) : CALLS_TABLE
      const rows = expectedCallRows(runId, calls.values()).map((row) => ({ ...row }))
      // Up to three damages, of any kind, anywhere.
      const damages = Math.floor(next() * 4)
      for (let d = 0; d < damages && rows.length > 0; d++) {
        const at = Math.floor(next() * rows.length)
        const kind = Math.floor(next() * 4)
        if (kind === 0) rows.splice(at, 1)
        else if (kind === 1) rows.push({ ...rows[at]!, call_id: `zz-extra-${d}-${seed}` })
        else if (kind === 2) rows.push({ ...rows[at]! })
        else {
          const column = COLUMNS_TO_BREAK[Math.floor(next() * COLUMNS_TO_BREAK.length)]!
          rows[at] = { ...rows[at]!, [column]: column === "hidden" ? 7 : "forged" }
        }
      }
      const sorted = byKey(rows)
      const whole = compareRows(table, expectedCallRows(runId, calls.values()), sorted)
      if (whole !== undefined) broken++
      for (const pageSize of [1, 2, 7, 1000]) {
        assert.strictEqual(paged(table, runId, calls, lastSeq, sorted, pageSize), whole, `seed ${seed}, page ${pageSize}`)
      }
    }
    // The cases cover both sides.
    assert.isAbove(broken, 150)
    assert.isBelow(broken, 400)
  })

  it("with a deferring reader's entries and the hashes recorded apart (ArgsHashes), says what the full entries say", () => {
    for (let seed = 1; seed <= 200; seed++) {
      const next = random(seed * 7919)
      const runId = "run-h"
      const full = callIndex(next, 1 + Math.floor(next() * 60))
      // Each call its own hash, as the verifier would have given it.
      for (const [id, call] of full) {
        full.set(id, { ...call, argsHash: `sha256:${Math.floor(next() * 2 ** 32).toString(16).padStart(8, "0").repeat(8)}` })
      }
      const hashes = new ArgsHashes()
      const deferred = new Map<string, CallEntry>()
      for (const [id, call] of full) {
        hashes.add(call.callSeq, call.argsHash)
        // A dispatched call's entry holds the hash its dispatch computed; any other holds none.
        deferred.set(id, call.dispatchSeq !== undefined ? call : { ...call, argsHash: DEFERRED_ARGS_HASH })
      }
      const lastSeq = Math.max(...[...full.values()].map((c) => c.callSeq)) + 3
      const rows = expectedCallRows(runId, full.values()).map((row) => ({ ...row }))
      if (rows.length > 0 && next() < 0.7) {
        const at = Math.floor(next() * rows.length)
        rows[at] = { ...rows[at]!, args_hash: next() < 0.5 ? `sha256:${"0".repeat(64)}` : "forged" }
      }
      const sorted = byKey(rows)
      const whole = compareRows(CALLS_TABLE, expectedCallRows(runId, full.values()), sorted)
      for (const pageSize of [1, 3, 1000]) {
        const comparison = callIndexComparison(CALLS_TABLE, runId, deferred, lastSeq, hashes)
        for (let i = 0; i < sorted.length; i += pageSize) if (comparison.page(sorted.slice(i, i + pageSize))) break
        assert.strictEqual(comparison.finish(), whole, `seed ${seed}, page ${pageSize}`)
      }
    }
  })

  it("ArgsHashes gives back each hash at its call seq, and nothing at any other seq", () => {
    const hashes = new ArgsHashes()
    const next = random(99)
    const held = new Map<number, string>()
    let seq = 0
    for (let i = 0; i < 5000; i++) {
      seq += 1 + Math.floor(next() * 5)
      const hash = `sha256:${[0, 1, 2, 3, 4, 5, 6, 7].map(() => Math.floor(next() * 2 ** 32).toString(16).padStart(8, "0")).join("")}`
      hashes.add(seq, hash)
      held.set(seq, hash)
    }
    for (let s = 0; s <= seq + 2; s++) assert.strictEqual(hashes.of(s), held.get(s))
    assert.throws(() => hashes.add(seq, `sha256:${"1".repeat(64)}`))
    assert.throws(() => hashes.add(seq + 1, "sha256:XYZ"))
  })

  it("names a missing call before a later differing one, and a differing one before a later missing one", () => {
    const calls = callIndex(random(7), 5)
    const rows = byKey(expectedCallRows("r", calls.values()).map((row) => ({ ...row })))
    const [first, second] = [...calls.keys()]
    const withoutSecond = rows.filter((row) => row["call_id"] !== second)
    const firstBroken = withoutSecond.map((row) => row["call_id"] === first ? { ...row, name: "X" } : row)
    assert.strictEqual(paged(CALLS_TABLE, "r", calls, 100, firstBroken, 2), `calls row (run_id r, call_id ${first}): column name differs from what the events give`)
    const withoutFirst = rows.filter((row) => row["call_id"] !== first)
    const secondBroken = withoutFirst.map((row) => row["call_id"] === second ? { ...row, name: "X" } : row)
    assert.strictEqual(paged(CALLS_TABLE, "r", calls, 100, secondBroken, 2), `calls row (run_id r, call_id ${first}) is missing`)
  })
})

const platform = Layer.mergeAll(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)
const reader = (workspace: string) => Layer.provide(layerWorkspace({ workspace, readOnly: true }), platform)
const append = (workspace: string, runId: string, events: ReadonlyArray<RuntimeEvent>) =>
  Effect.flatMap(RuntimeEventStore, (s) => s.append(RunId.make(runId), events)).pipe(
    Effect.provide(Layer.provide(layerStore("sqlite", { workspace, readOnly: false }), platform)),
    Effect.scoped
  )

describe("SQLite call index over several pages", () => {
  it.scopedLive("a row changed, deleted or added past the first page is found and named; the sound table verifies", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-calls-pages-" })
      const x = EventBuilder.make("run-p")
      const n = CALLS_PAGE * 2 + 345
      const events: Array<RuntimeEvent> = [x.opened(), x.user("go")]
      for (let i = 0; i < n; i++) {
        const id = `call-${String(i).padStart(5, "0")}`
        events.push(x.call(id, "Bash", { i }))
        if (i % 5 !== 0) events.push(x.response(id, "Bash", { ok: i }))
      }
      yield* append(ws, "run-p", events)
      const check = Effect.gen(function*() {
        const verified = yield* verifyWorkspace().pipe(Effect.provide(reader(ws)))
        const inspected = yield* inspectWorkspace().pipe(Effect.provide(reader(ws)))
        const error = verified.runs[0]?.error
        const shown = inspected.runs[0]?.error
        assert.strictEqual(shown?._tag === "LedgerCorruption" ? shown.message : undefined, error?.message ?? undefined)
        return verificationOk(verified) ? undefined : error
      })
      assert.isUndefined(yield* check)

      const file = NodePath.join(ws, "runtime.sqlite")
      const tamper = (sql: string, undo: string) =>
        Effect.gen(function*() {
          const db = new Sqlite(file)
          db.exec(sql)
          db.close()
          const error = yield* check
          const restore = new Sqlite(file)
          restore.exec(undo)
          restore.close()
          assert.isUndefined(yield* check, `restored after: ${sql}`)
          assert.strictEqual(error?.reason, "derived_mismatch")
          return error?.message ?? ""
        })
      // A column on the second page.
      const original = new Sqlite(file, { readonly: true })
      const responseSeq = (original.prepare("SELECT response_seq FROM calls WHERE call_id = 'call-01501'").get() as { response_seq: number }).response_seq
      original.close()
      assert.include(
        yield* tamper(
          "UPDATE calls SET response_seq = 1 WHERE call_id = 'call-01501'",
          `UPDATE calls SET response_seq = ${responseSeq} WHERE call_id = 'call-01501'`
        ),
        "calls row (run_id run-p, call_id call-01501): column response_seq differs from what the events give"
      )
      // A row of the last page deleted, then put back.
      const db = new Sqlite(file, { readonly: true })
      const saved = db.prepare("SELECT * FROM calls WHERE call_id = 'call-02300'").get() as Record<string, unknown>
      db.close()
      const columns = Object.keys(saved)
      const values = columns.map((c) => saved[c] === null ? "NULL" : typeof saved[c] === "string" ? `'${String(saved[c])}'` : String(saved[c]))
      assert.include(
        yield* tamper("DELETE FROM calls WHERE call_id = 'call-02300'", `INSERT INTO calls (${columns.join(", ")}) VALUES (${values.join(", ")})`),
        "calls row (run_id run-p, call_id call-02300) is missing"
      )
      // An args hash on the second page (the reader defers the hashes; the check records its own).
      const argsHash = (db2: Sqlite.Database) =>
        (db2.prepare("SELECT args_hash FROM calls WHERE call_id = 'call-01777'").get() as { args_hash: string }).args_hash
      const before = new Sqlite(file, { readonly: true })
      const hash = argsHash(before)
      before.close()
      assert.include(
        yield* tamper(
          `UPDATE calls SET args_hash = 'sha256:${"0".repeat(64)}' WHERE call_id = 'call-01777'`,
          `UPDATE calls SET args_hash = '${hash}' WHERE call_id = 'call-01777'`
        ),
        "calls row (run_id run-p, call_id call-01777): column args_hash differs from what the events give"
      )
      // A row no call accounts for, after the last call in key order.
      assert.include(
        yield* tamper(
          `INSERT INTO calls (${columns.join(", ")}) SELECT 'run-p', 'call-99999', ${columns.slice(2).join(", ")} FROM calls WHERE call_id = 'call-00001'`,
          "DELETE FROM calls WHERE call_id = 'call-99999'"
        ),
        "calls row (run_id run-p, call_id call-99999) has no event behind it"
      )
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("argsHashFromText", () => {
  it("gives LedgerRules.argsHash of the call's name and args, from any FunctionCall event's canonical text", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.string(), fc.string({ minLength: 1 }), fc.boolean(), (args, name, callId, hidden) => {
        const event = EventBuilder.make("run-t").call(callId.replace(/[\ud800-\udfff]/g, "x"), name.replace(/[\ud800-\udfff]/g, "x"), args, hidden ? { hidden: true } : undefined)
        const text = Either.getOrThrow(canonicalText(event))
        const want = Either.getOrThrow(LedgerRules.argsHash(event.body._tag === "FunctionCall" ? event.body.name : "", event.body._tag === "FunctionCall" ? event.body.args : null))
        assert.strictEqual(argsHashFromText(text), want)
      }),
      { numRuns: 1500 }
    )
  })

  it("gives nothing for any other text (the encoder then hashes the args)", () => {
    const x = EventBuilder.make("run-t")
    for (const event of [x.opened(), x.user("a"), x.response("c", "n", { r: 1 }), x.dispatched("c", "n", { a: 1 })]) {
      assert.isUndefined(argsHashFromText(Either.getOrThrow(canonicalText(event))))
    }
    for (const text of ['{"body":{"_tag":"FunctionCall","args":', '{"body":{"_tag":"FunctionCall","args":[1,"]}', '{"body":{"_tag":"FunctionCall","args":1,"name":"n"}}']) {
      assert.isUndefined(argsHashFromText(text))
    }
  })
})

// The table's rows as arrays under `names` (a permutation of the row objects' columns, some perhaps dropped or renamed),
// and the row objects those arrays give (what `SELECT *` gave as objects for such a table).
const asValues = (rows: ReadonlyArray<RawRow>, names: ReadonlyArray<string>, source: ReadonlyArray<string>) => ({
  arrays: rows.map((row) => source.map((column) => row[column])),
  objects: rows.map((row) => {
    const object: Record<string, unknown> = {}
    names.forEach((name, i) => object[name] = row[source[i]!])
    return object as RawRow
  })
})

describe("callIndexComparison.pageValues", () => {
  it("says what page says over the same rows as objects, whatever the columns' order, a column dropped or renamed", () => {
    let differing = 0
    for (let seed = 1; seed <= 300; seed++) {
      const next = random(seed * 104729)
      const runId = "run-v"
      const calls = callIndex(next, 1 + Math.floor(next() * 40))
      const lastSeq = Math.max(...[...calls.values()].map((c) => c.callSeq)) + 3
      const table = next() < 0.2 ? callsTableOf(2) : CALLS_TABLE
      const rows = expectedCallRows(runId, calls.values()).map((row) => ({ ...row }))
      if (rows.length > 0 && next() < 0.5) {
        const at = Math.floor(next() * rows.length)
        const column = COLUMNS_TO_BREAK[Math.floor(next() * COLUMNS_TO_BREAK.length)]!
        rows[at] = { ...rows[at]!, [column]: column === "hidden" ? 7 : "forged" }
      }
      // A call_seq that is another call's (the comparison finds a row's call by it, then confirms it by the id).
      if (rows.length > 1 && next() < 0.4) {
        const at = Math.floor(next() * rows.length)
        const other = (at + 1 + Math.floor(next() * (rows.length - 1))) % rows.length
        rows[at] = { ...rows[at]!, call_seq: rows[other]!["call_seq"] }
      }
      // The file's columns: the table's, shuffled; then perhaps one dropped, one renamed, or an extra one.
      const source = [...CALLS_TABLE.columns]
      for (let i = source.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1))
        ;[source[i], source[j]] = [source[j]!, source[i]!]
      }
      const names = [...source]
      const change = Math.floor(next() * 4)
      const victim = 2 + Math.floor(next() * (names.length - 2))
      const keep = (name: string) => name !== "run_id" && name !== "call_id"
      if (change === 1 && keep(names[victim]!)) {
        names.splice(victim, 1)
        source.splice(victim, 1)
      } else if (change === 2 && keep(names[victim]!)) names[victim] = `${names[victim]}_renamed`
      else if (change === 3) {
        names.push("extra_column")
        source.push("call_seq")
      }
      const { arrays, objects } = asValues(byKey(rows), names, source)
      for (const pageSize of [1, 5, 1000]) {
        const viaObjects = callIndexComparison(table, runId, calls, lastSeq)
        for (let i = 0; i < objects.length; i += pageSize) if (viaObjects.page(objects.slice(i, i + pageSize))) break
        const viaValues = callIndexComparison(table, runId, calls, lastSeq)
        for (let i = 0; i < arrays.length; i += pageSize) {
          // Each page with its own names array, as the store's statement gives them.
          if (viaValues.pageValues([...names], arrays.slice(i, i + pageSize))) break
        }
        const want = viaObjects.finish()
        assert.strictEqual(viaValues.finish(), want, `seed ${seed}, page ${pageSize}, names ${names.join(",")}`)
        assert.strictEqual(want, compareRows(table, expectedCallRows(runId, calls.values()), objects))
        if (want !== undefined && pageSize === 1) differing++
      }
    }
    assert.isAbove(differing, 100)
    assert.isBelow(differing, 300)
  })
})

describe("ArgsHashes.matchesAt", () => {
  it("is `value === of(seq)` for the hash itself and for near misses of every kind", () => {
    const hashes = new ArgsHashes()
    const next = random(4242)
    const held: Array<[number, string]> = []
    for (let i = 0; i < 300; i++) {
      const hash = `sha256:${[0, 1, 2, 3, 4, 5, 6, 7].map(() => Math.floor(next() * 2 ** 32).toString(16).padStart(8, "0")).join("")}`
      hashes.add(10 + i * 3, hash)
      held.push([10 + i * 3, hash])
    }
    for (const [seq, hash] of held) {
      const at = hashes.indexOf(seq)
      assert.isAtLeast(at, 0)
      const flip = 7 + Math.floor(next() * 64)
      const other = hash[flip] === "0" ? "1" : "0"
      const candidates: Array<unknown> = [
        hash,
        hash.toUpperCase(),
        `SHA256:${hash.slice(7)}`,
        hash.slice(0, flip) + other + hash.slice(flip + 1),
        hash.slice(0, flip) + hash[flip]!.toUpperCase() + hash.slice(flip + 1),
        hash.slice(0, 70),
        `${hash}0`,
        hash.slice(7),
        `sha256:${hash.slice(7, 39)}`,
        held[(held.indexOf(held.find(([s]) => s === seq)!) + 1) % held.length]![1],
        null,
        undefined,
        7,
        Buffer.from(hash),
        { toString: () => hash }
      ]
      for (const value of candidates) assert.strictEqual(hashes.matchesAt(at, value), value === hashes.of(seq), `${String(value)}`)
    }
    assert.strictEqual(hashes.indexOf(11), -1)
    assert.strictEqual(hashes.indexOf(0), -1)
  })
})

// Not SQL: `verdict` rebuilds the calls table with its columns in reverse order.
const REORDER = "-- reorder the calls table's columns"

describe("SQLite call index read as values (SELECT * by column name)", () => {
  // A fresh workspace of one run whose call index spans two pages, `alter` applied to its file, then verify and
  // inspect: both must give the verdict the row-object read gave (a column the file lacks compares as absent).
  const verdict = (alter: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-calls-values-" })
      const x = EventBuilder.make("run-c")
      const events: Array<RuntimeEvent> = [x.opened(), x.user("go")]
      for (let i = 0; i < CALLS_PAGE + 40; i++) {
        const id = `call-${String(i).padStart(5, "0")}`
        events.push(x.call(id, "Bash", { i }))
        if (i % 5 !== 0) events.push(x.response(id, "Bash", { ok: i }))
      }
      yield* append(ws, "run-c", events)
      const db = new Sqlite(NodePath.join(ws, "runtime.sqlite"))
      for (const statement of alter) {
        if (statement !== REORDER) {
          db.exec(statement)
          continue
        }
        // The calls table rebuilt with its columns in reverse order; the views and indexes over it put back as they were.
        const dependents = db.prepare(
          "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND (type = 'view' OR (type IN ('index', 'trigger') AND tbl_name = 'calls'))"
        ).all() as Array<{ type: string; name: string; sql: string }>
        for (const d of dependents) if (d.type === "view") db.exec(`DROP VIEW ${d.name}`)
        const reversed = [...CALLS_TABLE.columns].reverse()
        db.exec(`CREATE TABLE calls_new (${reversed.join(", ")}, PRIMARY KEY (run_id, call_id)) WITHOUT ROWID`)
        db.exec(`INSERT INTO calls_new (${reversed.join(", ")}) SELECT ${reversed.join(", ")} FROM calls`)
        db.exec("DROP TABLE calls")
        db.exec("ALTER TABLE calls_new RENAME TO calls")
        for (const d of dependents) db.exec(d.sql)
      }
      db.close()
      const verified = yield* verifyWorkspace().pipe(Effect.provide(reader(ws)))
      const inspected = yield* inspectWorkspace().pipe(Effect.provide(reader(ws)))
      const error = verified.runs[0]?.error
      const shown = inspected.runs[0]?.error
      assert.strictEqual(shown?._tag === "LedgerCorruption" ? shown.message : undefined, error?.message ?? undefined)
      assert.strictEqual(shown?._tag === "LedgerCorruption" ? shown.reason : undefined, error?.reason ?? undefined)
      return error === undefined || error === null ? "ok" : `${error.reason}: ${error.message}`
    }).pipe(Effect.scoped)

  it.scopedLive("a renamed, a dropped or a reordered column gives the verdict the row objects gave", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* verdict([]), "ok")
      // Renamed: `is_error` is absent, which compares as null: the first answered call (call-00001, `0`) differs.
      assert.include(
        yield* verdict(["ALTER TABLE calls RENAME COLUMN is_error TO is_err"]),
        "derived_mismatch: SQLite ledger "
      )
      assert.include(
        yield* verdict(["ALTER TABLE calls RENAME COLUMN is_error TO is_err"]),
        "calls row (run_id run-c, call_id call-00001): column is_error differs from what the events give"
      )
      // Dropped: `name` is absent, so the first call differs there.
      assert.include(
        yield* verdict(["ALTER TABLE calls DROP COLUMN name"]),
        "calls row (run_id run-c, call_id call-00000): column name differs from what the events give"
      )
      // Dropped, every value of it null: absent compares as null, as it did.
      assert.strictEqual(yield* verdict(["ALTER TABLE calls DROP COLUMN recovery_seq"]), "ok")
      // The same columns in another order: compared by name, so sound.
      assert.strictEqual(yield* verdict([REORDER]), "ok")
      // Reordered, and a value on the second page changed: named by its column.
      assert.include(
        yield* verdict([REORDER, "UPDATE calls SET call_seq = call_seq + 1 WHERE call_id = 'call-01020'"]),
        "calls row (run_id run-c, call_id call-01020): column call_seq differs from what the events give"
      )
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)
})
