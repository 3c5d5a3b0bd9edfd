// The one-statement append of the PostgreSQL store (a host that knows a run's tail): it is what runs, it writes the
// rows the locking transaction writes, and a stale tail, a call it does not know or a non-durable session never lets it write.
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Redacted, Stream } from "effect"
import type pg from "pg"
import { RunId } from "../src/Domain/Ids.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import { createConnection, createServer, type Socket } from "node:net"
import { pgUrl, rawClient } from "./support/pg.js"

const freshName = (tag: string) => `${tag}_${Math.random().toString(36).slice(2, 10)}`

const openStore = (workspace: string, url: Redacted.Redacted<string> = pgUrl()) => PgRuntimeEventStore.make({ url, workspace })

// The statement a store's session is waiting in on a row lock of the workspace (polled until one waits).
const waitingStatement = (client: pg.Client, workspace: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 400; i++) {
      // (Inside a transaction the activity view is a snapshot taken at its first read: cleared before each look.)
      yield* Effect.promise(() => client.query("SELECT pg_stat_clear_snapshot()"))
      const { rows } = yield* Effect.promise(() =>
        client.query(
          "SELECT query FROM pg_stat_activity WHERE application_name = 'runtime-resume' AND wait_event_type = 'Lock' " +
            "AND position($1 in query) > 0",
          [`"rr_${workspace}".`]
        )
      )
      if (rows.length > 0) return String(rows[0].query)
      yield* Effect.sleep("25 millis")
    }
    return "(no statement waited)"
  })

// Holds the run's tail row locked in a raw transaction while `append` runs; returns the statement the append waited in.
const appendBehindLock = (client: pg.Client, workspace: string, runId: string, append: Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    yield* Effect.promise(() => client.query("BEGIN"))
    yield* Effect.promise(() => client.query(`SELECT 1 FROM "rr_${workspace}".runs WHERE run_id = $1 FOR UPDATE`, [runId]))
    const fiber = yield* Effect.fork(append)
    const waited = yield* waitingStatement(client, workspace)
    yield* Effect.promise(() => client.query("ROLLBACK"))
    const exit = yield* Fiber.await(fiber)
    assert.strictEqual(exit._tag, "Success", `the append failed: ${JSON.stringify(exit)}`)
    return waited
  })

const dense = (store: RuntimeEventStoreShape, runId: string) =>
  Effect.gen(function*() {
    const rows = yield* store.readRun(RunId.make(runId))
    assert.deepStrictEqual(rows.map((r) => r.seq), rows.map((_, i) => i + 1))
    return rows
  })

describe("PgRuntimeEventStore: the one-statement append", () => {
  it.scopedLive("a host that knows the run's tail appends in one statement (it waits on the tail row in the UPDATE); a host that does not, in the locking transaction", () =>
    Effect.gen(function*() {
      const name = freshName("cas_one")
      const store = yield* openStore(name)
      const b = EventBuilder.make("run-1")
      yield* store.append(b.runId, [b.opened(), b.user("hello")])
      const client = yield* rawClient
      const known = yield* appendBehindLock(client, name, "run-1", store.append(b.runId, [b.model("hi")]))
      assert.match(known, /^WITH t AS \(UPDATE "rr_cas_one_\w+"\.runs SET tail_seq/)
      // T1 and T2 the same way.
      const tool = EventBuilder.make("run-tool")
      yield* store.append(tool.runId, [tool.opened("t1_after_preflight_v1")])
      const t1 = yield* appendBehindLock(
        client,
        name,
        "run-tool",
        store.appendDispatch(tool.runId, { call: tool.call("c1", "Bash", { n: 1 }), dispatch: tool.dispatched("c1", "Bash", { n: 1 }) })
      )
      assert.match(t1, /^WITH t AS \(UPDATE/)
      const t2 = yield* appendBehindLock(
        client,
        name,
        "run-tool",
        store.appendOutcome(tool.runId, tool.response("c1", "Bash", "ok", { operationBound: true }))
      )
      assert.match(t2, /^WITH t AS \(UPDATE/)
      // Another host (a store of its own) does not know the tail: it locks and reads it first.
      const other = yield* openStore(name)
      const locked = yield* appendBehindLock(client, name, "run-1", other.append(b.runId, [b.user("from another host")]))
      assert.match(locked, /FOR UPDATE/)
      assert.strictEqual((yield* dense(store, "run-1")).length, 4)
      assert.strictEqual((yield* dense(store, "run-tool")).length, 4)
    }))

  it.scopedLive("two hosts on one run: a stale known tail never writes (no gap, nothing lost), a stale expected high-water is refused, a T2 the other host already wrote is refused", () =>
    Effect.gen(function*() {
      const name = freshName("cas_two")
      const a = yield* openStore(name)
      const b = yield* openStore(name)
      const ev = EventBuilder.make("run-s")
      yield* a.append(ev.runId, [ev.opened("t1_after_preflight_v1"), ev.user("a1")])
      yield* b.append(ev.runId, [ev.user("b1")])
      // A's known tail is seq 2; the run is at 3: A's append goes after B's.
      const [rowA] = yield* a.append(ev.runId, [ev.user("a2")])
      assert.strictEqual(rowA!.seq, 4)
      const seen = yield* a.highWater(ev.runId)
      yield* b.append(ev.runId, [ev.user("b2")])
      // A expects the high-water it saw (its known tail agrees), the run moved on: refused, nothing written.
      const stale = yield* Effect.either(a.append(ev.runId, [ev.user("a3")], { expectedHighWater: { seq: seen.seq, digest: seen.digest } }))
      assert.isTrue(Either.isLeft(stale))
      assert.strictEqual((stale as Either.Left<{ _tag: string }, unknown>).left._tag, "RuntimeOffsetMismatch")
      // T1 by A, T2 by B; A's own T2 of that call afterwards (its known call entry is unanswered) is refused.
      yield* a.appendDispatch(ev.runId, { call: ev.call("c1", "Bash", {}), dispatch: ev.dispatched("c1", "Bash", {}) })
      yield* b.appendOutcome(ev.runId, ev.response("c1", "Bash", "from b", { operationBound: true }))
      const second = yield* Effect.either(a.appendOutcome(ev.runId, ev.response("c1", "Bash", "from a", { operationBound: true })))
      assert.isTrue(Either.isLeft(second))
      assert.strictEqual((second as Either.Left<{ _tag: string; reason?: string }, unknown>).left._tag, "AppendRejected")
      const rows = yield* dense(a, "run-s")
      assert.deepStrictEqual(rows.map((r) => r.event.id), [
        "run-s:1",
        "run-s:2",
        "run-s:3",
        "run-s:4",
        "run-s:5",
        "run-s:7",
        "run-s:8",
        "run-s:9"
      ])
    }))

  it.scopedLive("a call the host's known state does not hold is proven absent by the statement: a second FunctionCall of a settled call is refused, nothing written", () =>
    Effect.gen(function*() {
      const name = freshName("cas_call")
      const store = yield* openStore(name)
      const ev = EventBuilder.make("run-c")
      yield* store.append(ev.runId, [ev.opened("t1_after_preflight_v1")])
      yield* store.appendDispatch(ev.runId, { call: ev.call("c1", "Bash", {}), dispatch: ev.dispatched("c1", "Bash", {}) })
      yield* store.appendOutcome(ev.runId, ev.response("c1", "Bash", "ok", { operationBound: true }))
      // The settled call is no longer in the known state; the statement finds it in the call index and does not write.
      const again = yield* Effect.either(store.append(ev.runId, [ev.call("c1", "Bash", {})]))
      assert.isTrue(Either.isLeft(again))
      const error = (again as Either.Left<{ _tag: string; reason?: string }, unknown>).left
      assert.strictEqual(error._tag, "AppendRejected")
      assert.strictEqual(error.reason, "duplicate_call")
      assert.strictEqual((yield* dense(store, "run-c")).length, 4)
    }))

  it.scopedLive("the rows, tails and call index it writes are the locking transaction's, column for column; the run verifies", () =>
    Effect.gen(function*() {
      const fast = freshName("cas_fast")
      const locked = freshName("cas_locked")
      // The events are built once (ids and bytes fixed), then written to both workspaces by the same writes.
      const ev = EventBuilder.make("run-r", 1_700_000_000_000)
      const opened = [ev.opened("t1_after_preflight_v1"), ev.user("hello")]
      const thinking = ev.model("thinking")
      const tools = [1, 2, 3].map((i) => ({
        call: ev.call(`c${i}`, "Bash", { i }),
        dispatch: ev.dispatched(`c${i}`, "Bash", { i }, i === 2 ? "idempotent" : "never_auto_retry"),
        response: ev.response(`c${i}`, "Bash", { out: i }, { operationBound: true, isError: i === 3 })
      }))
      const hidden = ev.call("c4", "Read", { path: "x" }, { hidden: true })
      const end = ev.terminated("completed")
      const late = ev.diagnostic("after the end")
      const writes: ReadonlyArray<(store: RuntimeEventStoreShape) => Effect.Effect<unknown, unknown>> = [
        (s) => s.append(ev.runId, opened),
        (s) => s.append(ev.runId, [thinking]),
        ...tools.flatMap(({ call, dispatch, response }) => [
          (s: RuntimeEventStoreShape) => s.appendDispatch(ev.runId, { call, dispatch }),
          (s: RuntimeEventStoreShape) => s.appendOutcome(ev.runId, response)
        ]),
        (s) => s.append(ev.runId, [hidden]),
        (s) => s.append(ev.runId, [end]),
        (s) => s.append(ev.runId, [late])
      ]
      const one = yield* openStore(fast)
      for (const write of writes) yield* Effect.either(write(one))
      // The other workspace: a new host for every write, so each goes through the locking transaction.
      for (const write of writes) yield* Effect.either(Effect.scoped(Effect.flatMap(openStore(locked), write)))
      const client = yield* rawClient
      const dump = (workspace: string) =>
        Effect.promise(async () => {
          const s = `"rr_${workspace}"`
          const q = async (text: string) => (await client.query(text)).rows
          return {
            events: await q(`SELECT pos, run_id, seq, end_seq, event_id, digest, encode(bytes, 'hex') AS bytes FROM ${s}.events ORDER BY pos`),
            runs: await q(`SELECT * FROM ${s}.runs ORDER BY run_id`),
            calls: await q(`SELECT * FROM ${s}.calls ORDER BY run_id, call_id`),
            operations: await q(`SELECT * FROM ${s}.tool_operation_journal ORDER BY journal_id`)
          }
        })
      const [x, y] = [yield* dump(fast), yield* dump(locked)]
      assert.isAbove(x.events.length, 10)
      assert.deepStrictEqual(x, y)
      // Every row verifies and the derived rows prove against the events (what verify reads); rebuilding them from
      // the events (repair --rebuild-derived) leaves every table as it was.
      const items = Chunk.toReadonlyArray(yield* Stream.runCollect(one.scanRuns!(100)))
      assert.deepStrictEqual(items.filter((i) => i._tag === "Failed"), [])
      assert.strictEqual(items.length, x.events.length)
      yield* one.rebuildDerived!()
      assert.deepStrictEqual(yield* dump(fast), x)
    }))

  it.scopedLive("every session commits durably: synchronous_commit is on whatever the database says, and a session where it is off never takes the one-statement path", () =>
    Effect.gen(function*() {
      const client = yield* rawClient
      const db = freshName("nosync")
      yield* Effect.promise(() => client.query(`CREATE DATABASE ${db}`))
      yield* Effect.addFinalizer(() => Effect.promise(() => client.query(`DROP DATABASE ${db} WITH (FORCE)`)))
      yield* Effect.promise(() => client.query(`ALTER DATABASE ${db} SET synchronous_commit = off`))
      const base = new URL(Redacted.value(pgUrl()))
      base.pathname = `/${db}`
      const url = Redacted.make(base.toString())
      const name = freshName("nosync_ws")
      const store = yield* openStore(name, url)
      const ev = EventBuilder.make("run-d")
      yield* store.append(ev.runId, [ev.opened(), ev.user("one")])
      // The store's sessions are on, though the database's default is off.
      const other = new (yield* Effect.promise(() => import("pg"))).default.Client({ connectionString: Redacted.value(url) })
      yield* Effect.promise(() => other.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => other.end()))
      assert.strictEqual((yield* Effect.promise(() => other.query("SHOW synchronous_commit"))).rows[0].synchronous_commit, "off")
      const known = yield* appendBehindLock(other, name, "run-d", store.append(ev.runId, [ev.user("two")]))
      assert.match(known, /^WITH t AS \(UPDATE/)
      // A URL that turns it off for the session (its options outrank the store's): the locking transaction, which
      // sets it on for itself, writes every append.
      const off = new URL(base.toString())
      off.searchParams.set("options", "-c synchronous_commit=off")
      const offStore = yield* openStore(name, Redacted.make(off.toString()))
      yield* offStore.append(ev.runId, [ev.user("three")])
      const offAppend = yield* appendBehindLock(other, name, "run-d", offStore.append(ev.runId, [ev.user("four")]))
      assert.match(offAppend, /FOR UPDATE/)
      assert.strictEqual((yield* dense(store, "run-d")).length, 5)
    }))

  it.scopedLive("a connection cut while the one-statement append waits (no error message from the server, as when it is SIGKILLed) is a typed StoreWriteFailed, not an uncaught 'error' that ends the process; the next append reads the real tail", () =>
    Effect.gen(function*() {
      // A TCP proxy in front of the test server, so the test can cut a session's socket the way a dead server does.
      const target = new URL(Redacted.value(pgUrl()))
      const sockets = new Set<Socket>()
      const proxy = createServer((down) => {
        const up = createConnection({ host: target.hostname, port: Number(target.port || 5432) })
        sockets.add(down).add(up)
        down.pipe(up).pipe(down)
        const close = () => { down.destroy(); up.destroy() }
        down.on("error", close).on("close", close)
        up.on("error", close).on("close", close)
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void proxy.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.sync(() => { for (const s of sockets) s.destroy(); proxy.close() })
      )
      const address = proxy.address()
      const proxied = new URL(target.href)
      proxied.hostname = "127.0.0.1"
      proxied.port = String(typeof address === "object" && address !== null ? address.port : 0)
      const name = freshName("cas_cut")
      const store = yield* openStore(name, Redacted.make(proxied.href))
      const b = EventBuilder.make("run-cut")
      yield* store.append(b.runId, [b.opened(), b.user("hello")])
      const client = yield* rawClient
      yield* Effect.promise(() => client.query("BEGIN"))
      yield* Effect.promise(() => client.query(`SELECT 1 FROM "rr_${name}".runs WHERE run_id = $1 FOR UPDATE`, ["run-cut"]))
      const fiber = yield* Effect.fork(Effect.either(store.append(b.runId, [b.model("cut")])))
      assert.match(yield* waitingStatement(client, name), /^WITH t AS \(UPDATE/)
      // Cut every proxied socket: the client sees its connection end with no error message.
      for (const s of sockets) s.destroy()
      const cut = yield* Fiber.join(fiber)
      assert.isTrue(Either.isLeft(cut) && cut.left._tag === "StoreWriteFailed", JSON.stringify(cut))
      yield* Effect.promise(() => client.query("ROLLBACK"))
      // The server may still run the cut statement once the lock is gone: the next append never trusts the old tail.
      yield* Effect.sleep("200 millis")
      yield* store.append(b.runId, [b.user("after the cut")])
      const rows = yield* dense(store, "run-cut")
      assert.strictEqual(rows[rows.length - 1]!.event.body._tag, "UserMessage")
      assert.include([3, 4], rows.length)
    }))
})
