// The derived rows of a PostgreSQL workspace (runs tails, call index, tool_operations, journal): `scanRuns` (what
// `verify` reads) proves them against the events and names the tampered row; `rebuildDerived` (`repair
// --rebuild-derived --store postgres`) rebuilds them, never touching an event; the catalog check finds a disabled
// append-only trigger. Nothing is rewritten unless asked.
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Redacted, Stream } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { RunId } from "../src/Domain/Ids.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import type { RunScanItem, RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import { pgUrl, rawClient } from "./support/pg.js"
import { killAllHosts, startHost } from "./support/pgHosts.js"

const bin = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))


const freshName = (tag: string) => `${tag}_${Math.random().toString(36).slice(2, 10)}`

// Two runs: a tool run (T1 and T2, so call index, operation and journal rows) and a plain chat run.
const seed = (store: RuntimeEventStoreShape) =>
  Effect.gen(function*() {
    const t = EventBuilder.make("run-tool")
    yield* store.append(RunId.make("run-tool"), [t.opened("t1_after_preflight_v1"), t.user("write it")])
    yield* store.appendDispatch(RunId.make("run-tool"), { call: t.call("c1", "Write", { p: 1 }), dispatch: t.dispatched("c1", "Write", { p: 1 }) })
    yield* store.appendOutcome(RunId.make("run-tool"), t.response("c1", "Write", "ok", { operationBound: true }))
    yield* store.appendDispatch(RunId.make("run-tool"), { call: t.call("c2", "Write", { p: 2 }), dispatch: t.dispatched("c2", "Write", { p: 2 }) })
    const c = EventBuilder.make("run-chat")
    yield* store.append(RunId.make("run-chat"), [c.opened(), c.user("hi"), c.model("hello"), c.terminated("completed")])
    return t
  })

const scan = (store: RuntimeEventStoreShape) =>
  Effect.map(Stream.runCollect(store.scanRuns!(100)), (items) => Chunk.toReadonlyArray(items))

const failures = (items: ReadonlyArray<RunScanItem>) =>
  items.flatMap((item) => item._tag === "Failed" ? [{ runId: item.runId, reason: item.error.reason, message: item.error.message }] : [])

// Every derived table's rows, in a stable order (to show nothing was rewritten, or that a rebuild restored them).
const derivedRows = (client: pg.Client, name: string) =>
  Effect.promise(async () => {
    const s = `"rr_${name}"`
    const out: Record<string, unknown> = {}
    for (const [table, order] of [["runs", "run_id"], ["calls", "run_id, call_id"], ["tool_operations", "operation_id"], ["tool_operation_journal", "journal_id"]]) {
      out[table] = (await client.query(`SELECT * FROM ${s}.${table} ORDER BY ${order}`)).rows
    }
    out.events = (await client.query(`SELECT pos, run_id, seq, digest, encode(bytes, 'hex') AS bytes FROM ${s}.events ORDER BY pos`)).rows
    return out
  })

describe("PostgreSQL derived rows", () => {
  afterEach(killAllHosts)

  it.scopedLive("scanRuns proves every derived row; each tampering is a derived_mismatch naming the table, row and column; nothing rewritten", () =>
    Effect.gen(function*() {
      const client = yield* rawClient
      const cases: ReadonlyArray<readonly [string, (s: string) => string, string, string]> = [
        ["runs first_pos", (s) => `UPDATE ${s}.runs SET first_pos = first_pos + 1000 WHERE run_id = 'run-chat'`, "run-chat", "runs row (run_id run-chat): column first_pos"],
        ["runs seal", (s) => `UPDATE ${s}.runs SET terminal_seq = NULL, terminal_status = NULL WHERE run_id = 'run-chat'`, "run-chat", "column terminal_seq"],
        ["call index", (s) => `UPDATE ${s}.calls SET response_seq = NULL WHERE run_id = 'run-tool' AND call_id = 'c1'`, "run-tool", "calls row (run_id run-tool, call_id c1): column response_seq"],
        ["call index row deleted", (s) => `DELETE FROM ${s}.calls WHERE call_id = 'c2'`, "run-tool", "calls row (run_id run-tool, call_id c2) is missing"],
        // The tool-operation projection and its journal are views over the call index and the events (format 3):
        // what can be tampered with is the call index row they are read from.
        ["operation id", (s) => `UPDATE ${s}.calls SET operation_id = 'op-forged' WHERE run_id = 'run-tool' AND call_id = 'c1'`, "run-tool", "calls row (run_id run-tool, call_id c1): column operation_id"],
        ["dispatch seq", (s) => `UPDATE ${s}.calls SET dispatch_seq = NULL WHERE run_id = 'run-tool' AND call_id = 'c1'`, "run-tool", "calls row (run_id run-tool, call_id c1): column dispatch_seq"]
      ]
      for (const [what, sql, runId, named] of cases) {
        const name = freshName("derived")
        const store = yield* PgRuntimeEventStore.make({ url: pgUrl(), workspace: name })
        yield* seed(store)
        assert.deepStrictEqual(failures(yield* scan(store)), [], `${what}: clean before`)
        yield* Effect.promise(() => client.query(sql(`"rr_${name}"`)))
        const before = yield* derivedRows(client, name)
        const found = failures(yield* scan(store))
        assert.strictEqual(found.length, 1, `${what}: ${JSON.stringify(found)}`)
        assert.strictEqual(found[0]!.runId, runId, what)
        assert.strictEqual(found[0]!.reason, "derived_mismatch", what)
        assert.include(found[0]!.message, named, what)
        assert.include(found[0]!.message, "repair --rebuild-derived --store postgres", what)
        assert.notInclude(found[0]!.message, new URL(Redacted.value(pgUrl())).password, what)
        // Reading changed nothing.
        assert.deepStrictEqual(yield* derivedRows(client, name), before, what)
        // Only that run: its own items carry the finding too.
        if (runId !== "run-ghost") {
          const only = failures(Chunk.toReadonlyArray(yield* Stream.runCollect(store.scanRuns!(100, RunId.make(runId)))))
          assert.strictEqual(only[0]?.reason, "derived_mismatch", `${what}: scanRuns of one run`)
        }
      }
    }))

  it.scopedLive("rebuildDerived restores every derived row from the events (events untouched); refuses corrupt events, changing nothing", () =>
    Effect.gen(function*() {
      const client = yield* rawClient
      const name = freshName("rebuild")
      const store = yield* PgRuntimeEventStore.make({ url: pgUrl(), workspace: name })
      const t = yield* seed(store)
      const good = yield* derivedRows(client, name)
      const s = `"rr_${name}"`
      yield* Effect.promise(() =>
        client.query(
          `UPDATE ${s}.runs SET tail_seq = 2 WHERE run_id = 'run-chat'; DELETE FROM ${s}.calls WHERE call_id = 'c1'; ` +
            `UPDATE ${s}.calls SET operation_id = 'op-forged', response_seq = NULL WHERE call_id = 'c2'`
        )
      )
      assert.isAbove(failures(yield* scan(store)).length, 1)
      const rebuilt = yield* store.rebuildDerived!()
      assert.deepStrictEqual(rebuilt, { runs: 2, tables: { runs: 2, calls: 2 } })
      assert.deepStrictEqual(yield* derivedRows(client, name), good)
      assert.deepStrictEqual(failures(yield* scan(store)), [])
      // Appends go on after it (the tails it wrote are the ones the write path locks).
      yield* store.appendOutcome(RunId.make("run-tool"), t.response("c2", "Write", "ok", { operationBound: true }))
      assert.deepStrictEqual(failures(yield* scan(store)), [])

      // An edited event (triggers off, as the superuser): the rebuild refuses, and no derived row changes.
      yield* Effect.promise(() =>
        client.query(
          `SET session_replication_role = replica; UPDATE ${s}.events SET bytes = replace(encode(bytes, 'escape'), 'hello', 'HELLO')::bytea ` +
            `WHERE run_id = 'run-chat' AND seq = 3; SET session_replication_role = origin; UPDATE ${s}.runs SET tail_seq = 1 WHERE run_id = 'run-tool'`
        )
      )
      const before = yield* derivedRows(client, name)
      const refused = yield* Effect.either(store.rebuildDerived!())
      assert.isTrue(Either.isLeft(refused))
      if (Either.isLeft(refused)) {
        assert.strictEqual(refused.left._tag, "LedgerCorruption")
        if (refused.left._tag === "LedgerCorruption") assert.strictEqual(refused.left.runId, "run-chat")
      }
      assert.deepStrictEqual(yield* derivedRows(client, name), before)
    }))

  it.scopedLive("the catalog check: ok on a sound workspace; a disabled append-only trigger or a dropped constraint fails it", () =>
    Effect.gen(function*() {
      const client = yield* rawClient
      const name = freshName("catalog")
      const store = yield* PgRuntimeEventStore.make({ url: pgUrl(), workspace: name })
      yield* seed(store)
      const ok = yield* store.integrityCheck!()
      assert.deepStrictEqual({ check: ok.check, ok: ok.ok, detail: ok.detail }, { check: "catalog_check", ok: true, detail: [] })
      const s = `"rr_${name}"`
      yield* Effect.promise(() => client.query(`ALTER TABLE ${s}.events DISABLE TRIGGER events_never_changed`))
      yield* Effect.promise(() => client.query(`ALTER TABLE ${s}.events DROP CONSTRAINT events_event_id_key`))
      const bad = yield* store.integrityCheck!()
      assert.isFalse(bad.ok)
      assert.deepStrictEqual([...bad.detail].sort(), [
        "constraint events_event_id_key is missing",
        "trigger events_never_changed is disabled: committed rows are not protected"
      ])
    }))

  it.live("CLI: verify --store postgres exits 2 naming the tampered row; repair --rebuild-derived --store postgres fixes it; the password never printed", () =>
    Effect.gen(function*() {
      const name = freshName("cli_derived")
      yield* Effect.scoped(Effect.flatMap(PgRuntimeEventStore.make({ url: pgUrl(), workspace: name }), seed))
      yield* Effect.scoped(Effect.flatMap(rawClient, (c) =>
        Effect.promise(() => c.query(`UPDATE "rr_${name}".calls SET is_error = 1 WHERE call_id = 'c1'`))))
      const cli = (args: ReadonlyArray<string>) =>
        Effect.async<{ code: number; out: string }>((resume) => {
          execFile("node", [bin, ...args], { env: { ...process.env, RUNTIME_RESUME_PG_URL: Redacted.value(pgUrl()) } }, (error, stdout, stderr) =>
            resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, out: stdout + stderr })))
        })
      const password = new URL(Redacted.value(pgUrl())).password
      const verified = yield* cli(["verify", name, "--store", "postgres", "--json"])
      assert.strictEqual(verified.code, 2, verified.out)
      const doc = JSON.parse(verified.out) as { integrity?: { check: string; ok: boolean }; runs: Array<{ runId: string; ok: boolean; error: { reason: string; message: string } | null }> }
      assert.deepStrictEqual(doc.integrity, { check: "catalog_check", ok: true })
      const bad = doc.runs.find((r) => !r.ok)
      assert.strictEqual(bad?.runId, "run-tool")
      assert.strictEqual(bad?.error?.reason, "derived_mismatch")
      assert.include(bad?.error?.message, "calls row (run_id run-tool, call_id c1): column is_error")
      // A live host holds the owner lock shared: the rebuild (exclusive, at most 2 s) is WorkspaceLocked, nothing rewritten.
      const host = startHost({ mode: "hold", url: Redacted.value(pgUrl()), workspace: name, host: "live" })
      yield* Effect.promise(() => host.waitFor("held"))
      const before = yield* Effect.scoped(Effect.flatMap(rawClient, (c) => derivedRows(c, name)))
      const locked = yield* cli(["repair", name, "--rebuild-derived", "--store", "postgres", "--json"])
      assert.strictEqual(locked.code, 2, locked.out)
      assert.strictEqual(JSON.parse(locked.out).error._tag, "WorkspaceLocked")
      assert.deepStrictEqual(yield* Effect.scoped(Effect.flatMap(rawClient, (c) => derivedRows(c, name))), before)
      host.child.kill("SIGKILL")
      yield* Effect.promise(() => host.exited)
      const repaired = yield* cli(["repair", name, "--rebuild-derived", "--store", "postgres", "--pg-url", Redacted.value(pgUrl())])
      assert.strictEqual(repaired.code, 0, repaired.out)
      assert.include(repaired.out, "rebuilt the derived rows of 2 runs")
      const again = yield* cli(["verify", name, "--store", "postgres"])
      assert.strictEqual(again.code, 0, again.out)
      assert.include(again.out, "integrity: catalog_check ok")
      for (const out of [verified.out, locked.out, repaired.out, again.out]) assert.notInclude(out, password)
    }))
})
