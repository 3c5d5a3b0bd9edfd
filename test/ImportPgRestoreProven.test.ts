// `import` into PostgreSQL streams the runs its check pass proved through the store's `restoreProven`
// (src/Layers/internal/sqlLedger/pgRestore.ts): one transaction, one piece of events at a time, each event chained by
// the store, never the whole file in memory. These tests hold it to the in-memory path it replaces (the whole file
// decoded, then one `appendBatch` in restore mode): the same tables byte for byte, the same tail state, and the same
// refusals, writing nothing; on the real server the test setup starts.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type pg from "pg"
import * as Digest from "../src/Domain/Digest.js"
import type { ImportInvalid } from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as LedgerRules from "../src/Domain/Rules/LedgerRules.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine, UserMessage } from "../src/Domain/RuntimeEvent.js"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import { importLedger } from "../src/Programs/ImportLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { pgUrl, rawClient } from "./support/pg.js"

const textOf = (e: RuntimeEvent) => Either.getOrThrow(canonicalText(e))
const bareLines = (events: ReadonlyArray<RuntimeEvent>) => events.map((e) => `${textOf(e)}\n`).join("")
const rowLines = (events: ReadonlyArray<RuntimeEvent>) => {
  let digest = Digest.genesis(events[0]!.runId)
  return events.map((e, i) => {
    digest = LedgerRules.nextDigest(digest, i + 1, textOf(e))
    return jsonlLine(i + 1, events.length, digest, textOf(e))
  }).join("")
}

const freshName = (tag: string) => `${tag}_${Math.random().toString(36).slice(2, 10)}`

// The PostgreSQL store of `workspace`, with `restoreProven` counted (`proven`) or taken away (`memory`: the file is
// then held in memory and written by one `appendBatch`).
const storeLayer = (workspace: string, path: "proven" | "memory", calls = { proven: 0 }) =>
  Layer.scoped(
    RuntimeEventStore,
    Effect.map(PgRuntimeEventStore.make({ url: pgUrl(), workspace }), (store) => {
      const restoreProven = store.restoreProven
      if (path === "memory" || restoreProven === undefined) {
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
  )

// Every row of the workspace's ledger tables (the projection views follow the calls), in a fixed order.
const tables = (client: pg.Client, workspace: string) =>
  Effect.promise(async () => {
    const s = `"rr_${workspace}"`
    const out: Record<string, unknown> = {}
    for (const [table, order] of [["runs", "run_id"], ["calls", "run_id, call_id"], ["tool_operations", "operation_id"], ["tool_operation_journal", "journal_id"]]) {
      out[table] = (await client.query(`SELECT * FROM ${s}.${table} ORDER BY ${order}`)).rows
    }
    out["events"] = (await client.query(`SELECT pos, run_id, seq, end_seq, event_id, digest, encode(bytes, 'hex') AS bytes FROM ${s}.events ORDER BY pos`)).rows
    return out
  })

const importInto = (workspace: string, file: string, path: "proven" | "memory", calls = { proven: 0 }) =>
  Effect.either(importLedger(file).pipe(Effect.provide(storeLayer(workspace, path, calls))))

// A tool run of `n` calls (with `dispatch`, some dispatched and answered through the tool boundary; some answered
// plainly, some left unanswered), long enough for several pieces; and a plain chat run.
const toolRun = (n: number, dispatch: boolean): ReadonlyArray<RuntimeEvent> => {
  const t = EventBuilder.make("run-tool", 7)
  const events: Array<RuntimeEvent> = [t.opened("t1_after_preflight_v1"), t.user("go")]
  for (let i = 0; i < n; i++) {
    const callId = `call_${((i * 7_919) % 10_007).toString(36)}_${i}`
    events.push(t.call(callId, "Write", { path: `/f/${i}`, n: i }))
    if (dispatch && i % 5 === 0) {
      events.push(t.dispatched(callId, "Write", { path: `/f/${i}`, n: i }))
      events.push(t.response(callId, "Write", `ok ${i}`, { operationBound: true }))
    } else if (i % 7 !== 3) events.push(t.response(callId, "Write", `ok ${i}`))
  }
  events.push(t.model("done"), t.terminated("completed"))
  return events
}

describe("PostgreSQL restoreProven writes what the in-memory appendBatch writes", () => {
  it.scopedLive("a tool run over several pieces and a chat run, bare and store-format: identical tables, through restoreProven when every run is proven", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const client = yield* rawClient
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-pg-proven-" })
      const c = EventBuilder.make("run-chat", 8)
      const chat = [c.opened(), c.user("hi"), c.model("hello"), c.terminated("completed")]
      // Store-format lines are checked by the read-side verifier, which leaves out one check of restore mode on
      // recovery facts (a dispatched call's response): a file of them with a dispatch is written in memory.
      for (const [format, dispatch] of [["events", true], ["rows", false], ["rows", true]] as const) {
        const runs = [toolRun(2_400, dispatch), chat]
        const file = `${dir}/${format}-${dispatch}.jsonl`
        yield* fs.writeFileString(file, runs.map((events) => format === "events" ? bareLines(events) : rowLines(events)).join(""))
        const calls = { proven: 0 }
        const proven = freshName("pgp")
        const memory = freshName("pgm")
        const viaProven = yield* importInto(proven, file, "proven", calls)
        const viaMemory = yield* importInto(memory, file, "memory")
        assert.strictEqual(calls.proven, format === "rows" && dispatch ? 0 : 1, `${format} (${dispatch}): the path taken`)
        assert.isTrue(Either.isRight(viaProven), `${format} imports`)
        assert.deepStrictEqual(viaProven, viaMemory, `${format}: the same outcome`)
        const written = yield* tables(client, proven)
        assert.isAbove((written["events"] as ReadonlyArray<unknown>).length, 2 * 2_000, "more than two pieces")
        assert.deepStrictEqual(written, yield* tables(client, memory), `${format}: identical tables`)
      }
    }).pipe(Effect.provide(NodeContext.layer)), 180_000)
})

describe("PostgreSQL restoreProven refuses what only the store sees, as the in-memory path does", () => {
  it.scopedLive("an event id or an invocation used by a stored run, a run already stored: the same ImportInvalid on both paths, nothing written", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const client = yield* rawClient
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-import-pg-refuse-" })
      const s = EventBuilder.make({ ...EventBuilder.idsFor("stored"), invocationId: "inv-stored" }, 1)
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
        firstEventId: bareLines([a.custom(a.opened().body, { id: "taken" }), a.user("a")])
      }
      for (const [name, lines] of Object.entries(cases)) {
        const file = `${dir}/${name}.jsonl`
        yield* fs.writeFileString(file, lines)
        const outcomes: Array<ImportInvalid> = []
        for (const path of ["proven", "memory"] as const) {
          const workspace = freshName(`pgr_${path}`)
          yield* Effect.gen(function*() {
            const store = yield* RuntimeEventStore
            yield* store.appendBatch([{ runId: RunId.make("stored"), events: storedRun }], { mode: "restore" })
          }).pipe(Effect.provide(storeLayer(workspace, "memory")))
          const before = yield* tables(client, workspace)
          const calls = { proven: 0 }
          const result = yield* importInto(workspace, file, path, calls)
          assert.isTrue(Either.isLeft(result), `${name} (${path}) is refused`)
          if (path === "proven") assert.strictEqual(calls.proven, 1)
          outcomes.push((result as Either.Left<ImportInvalid, unknown>).left)
          assert.deepStrictEqual(yield* tables(client, workspace), before, `${name} (${path}): only the stored run`)
        }
        assert.deepStrictEqual(
          outcomes.map((e) => [e._tag, e.reason, e.line, e.runId, e.eventId, e.message]),
          [outcomes[1]!, outcomes[1]!].map((e) => [e._tag, e.reason, e.line, e.runId, e.eventId, e.message]),
          name
        )
      }
    }).pipe(Effect.provide(NodeContext.layer)), 180_000)
})
