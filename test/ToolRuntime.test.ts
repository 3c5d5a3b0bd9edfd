// Tests of the T1/T2 tool runtime (docs/spec/03-tool-boundary.md): preflight refusals, T1/T2 atomicity, exact retries, replays, failpoints,
// and the SQLite tool projections (online = reopened = rebuilt, the v1 → v2 migration) agreeing with the resolver.
import { NodeContext } from "@effect/platform-node"
import { FileSystem } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Chunk, Context, Effect, Either, Layer, Schema, Stream } from "effect"
import { join } from "node:path"
import { StoreWriteFailed } from "../src/Domain/Errors.js"
import { deriveOperationId } from "../src/Domain/Ids.js"
import * as Observation from "../src/Domain/Observation.js"
import type { FunctionResponse, ToolDispatched } from "../src/Domain/RuntimeEvent.js"
import * as Tool from "../src/Domain/Tool.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import pg from "pg"
import { Redacted } from "effect"
import { pgUrl } from "./support/pg.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as RecoveryResolver from "../src/Domain/Rules/RecoveryResolver.js"
import * as ToolProjection from "../src/Domain/Rules/ToolProjection.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"

const counterTool = (counter: { n: number }, recoveryMode: "idempotent" | "never_auto_retry" = "idempotent") =>
  Tool.make({
    name: "Add",
    args: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
    recoveryMode,
    implementation: (args, ctx) =>
      Effect.gen(function*() {
        yield* ctx.failpoint
        counter.n++
        return { sum: args.a + args.b, key: ctx.idempotencyKey ?? null }
      })
  })

const failureOf = <E>(e: Either.Either<unknown, E>): E => {
  assert.isTrue(Either.isLeft(e), "expected a failure")
  return (e as Either.Left<E, unknown>).left
}

const setup = (name: string, boundary: "none" | "t1_after_preflight_v1" = "t1_after_preflight_v1") =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const b = EventBuilder.make(name, 1000)
    yield* store.append(b.runId, [b.opened(boundary), b.user("add")])
    return { store, b }
  })

const withMemory = <A, E>(effect: Effect.Effect<A, E, RuntimeEventStore>) => Effect.provide(effect, MemoryRuntimeEventStore.layer)

// A memory store whose writers can be made to fail: `lostAck` commits and then reports a failure.
const faultyLayer = (faults: { t1?: "fail" | "lostAck"; t2?: "fail" | "lostAck" }) =>
  Layer.effect(
    RuntimeEventStore,
    Effect.map(MemoryRuntimeEventStore.make, (inner): RuntimeEventStoreShape => {
      const fail = (runId: string) => new StoreWriteFailed({ runId, cause: "injected", message: "injected write failure" })
      let t1 = faults.t1
      let t2 = faults.t2
      return {
        ...inner,
        appendDispatch: (runId, facts, options) => Effect.suspend(() => {
          const f = t1
          t1 = undefined
          return f === "fail" ? Effect.fail(fail(runId)) : f === "lostAck"
            ? Effect.zipRight(inner.appendDispatch(runId, facts, options), Effect.fail(fail(runId)))
            : inner.appendDispatch(runId, facts, options)
        }),
        appendOutcome: (runId, response, options) => Effect.suspend(() => {
          const f = t2
          t2 = f === "fail" ? "fail" : undefined
          return f === "fail" ? Effect.fail(fail(runId)) : f === "lostAck"
            ? Effect.zipRight(inner.appendOutcome(runId, response, options), Effect.fail(fail(runId)))
            : inner.appendOutcome(runId, response, options)
        })
      }
    })
  )

describe("ToolRuntime", () => {
  it.effect("runs a call: T1 (call + dispatch), the implementation with the recorded key, T2; failpoints in order", () =>
    withMemory(Effect.gen(function*() {
      const { b, store } = yield* setup("run-ok")
      const counter = { n: 0 }
      const log: Array<Failpoints.ToolBoundary> = []
      const call = b.call("c1", "Add", { a: 1, b: 2 })
      const outcome = yield* ToolRuntime.run(b.runId, call, { tools: [counterTool(counter)] }).pipe(
        Effect.provide(Failpoints.layerRecording(log))
      )
      assert.strictEqual(outcome._tag, "Completed")
      const opId = deriveOperationId("inv-run-ok", "c1")
      const body = outcome.response.body as FunctionResponse
      assert.deepStrictEqual(body.result, { sum: 3, key: opId })
      assert.strictEqual(body.operationId, opId)
      assert.strictEqual(body.idempotencyKey, opId)
      assert.strictEqual(counter.n, 1)
      assert.deepStrictEqual(log, ["after_t1", "in_implementation", "before_t2", "inside_t2", "after_t2"])
      const rows = yield* store.readRun(b.runId)
      assert.deepStrictEqual(rows.map((r) => [r.event.body._tag, r.end]), [
        ["RunOpened", 2],
        ["UserMessage", 2],
        ["FunctionCall", 4],
        ["ToolDispatched", 4],
        ["FunctionResponse", 5]
      ])
      const resolved = Either.getOrThrow(RecoveryResolver.resolve(rows))
      assert.deepStrictEqual(resolved.operations.map((o) => [o.decision, o.reason]), [["completed", "matching_response"]])
    })))

  it.effect("preflight refusals are one append of the call and an unbound error response; the tool never runs", () =>
    withMemory(Effect.gen(function*() {
      const { b, store } = yield* setup("run-pre")
      const counter = { n: 0 }
      const cases = [
        [b.call("c1", "Nope", {}), "unknown_tool"],
        [b.call("c2", "Add", { a: "x" }), "invalid_args"]
      ] as const
      for (const [call, reason] of cases) {
        const outcome = yield* ToolRuntime.run(b.runId, call, { tools: [counterTool(counter)] })
        assert.strictEqual(outcome._tag, "Refused")
        if (outcome._tag === "Refused") assert.strictEqual(outcome.reason, reason)
        assert.strictEqual(outcome.rows.length, 2)
        assert.strictEqual(outcome.rows[0]!.end, outcome.rows[1]!.seq)
        const body = outcome.response.body as FunctionResponse
        assert.isTrue(body.isError)
        assert.isUndefined(body.operationId)
      }
      // Permission: the host's hook denies; the call was already committed by the host, so only the response is written.
      const c3 = b.call("c3", "Add", { a: 1, b: 1 })
      yield* store.append(b.runId, [c3])
      const denied = yield* ToolRuntime.run(b.runId, c3, { tools: [counterTool(counter)], permission: () => Effect.succeed("deny") })
      assert.strictEqual(denied._tag, "Refused")
      assert.strictEqual(denied.rows.length, 1)
      assert.strictEqual(counter.n, 0)
      const resolved = Either.getOrThrow(RecoveryResolver.resolve(yield* store.readRun(b.runId)))
      assert.deepStrictEqual(resolved.operations.map((o) => o.decision), ["completed", "completed", "completed"])
    })))

  it.effect("a failed T1 runs the implementation zero times: sealed run, legacy protocol, write failure", () =>
    Effect.gen(function*() {
      const counter = { n: 0 }
      const tools = [counterTool(counter)]
      const sealed = yield* withMemory(Effect.gen(function*() {
        const { b, store } = yield* setup("run-sealed")
        yield* store.append(b.runId, [b.terminated("failed")])
        return yield* Effect.either(ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 1 }), { tools }))
      }))
      assert.strictEqual(failureOf(sealed)._tag, "RunSealed")
      const legacy = yield* withMemory(Effect.gen(function*() {
        const { b } = yield* setup("run-legacy", "none")
        return yield* Effect.either(ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 1 }), { tools }))
      }))
      assert.strictEqual(failureOf(legacy)._tag, "ToolProtocolMismatch")
      const failedT1 = yield* Effect.provide(
        Effect.gen(function*() {
          const { b, store } = yield* setup("run-t1fail")
          const result = yield* Effect.either(ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 1 }), { tools, writeRetries: 0 }))
          return { result, rows: yield* store.readRun(b.runId) }
        }),
        faultyLayer({ t1: "fail" })
      )
      assert.strictEqual(failureOf(failedT1.result)._tag, "StoreWriteFailed")
      assert.strictEqual(failedT1.rows.length, 2)
      assert.strictEqual(counter.n, 0)
    }))

  it.live("a failed T2 never hands the result back as a success; the run resolves indeterminate", () =>
    Effect.provide(
      Effect.gen(function*() {
        const { b, store } = yield* setup("run-t2fail")
        const counter = { n: 0 }
        const result = yield* Effect.either(ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 1 }), { tools: [counterTool(counter)] }))
        assert.strictEqual(failureOf(result)._tag, "StoreWriteFailed")
        assert.strictEqual(counter.n, 1)
        const resolved = Either.getOrThrow(RecoveryResolver.resolve(yield* store.readRun(b.runId)))
        assert.deepStrictEqual(resolved.operations.map((o) => [o.decision, o.reason]), [["indeterminate", "dispatch_without_response"]])
      }),
      faultyLayer({ t2: "fail" })
    ))

  it.live("a lost acknowledgement is retried with the same events and converges: one implementation call", () =>
    Effect.provide(
      Effect.gen(function*() {
        const { b, store } = yield* setup("run-lost")
        const counter = { n: 0 }
        const outcome = yield* ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 2, b: 2 }), { tools: [counterTool(counter)] })
        assert.strictEqual(outcome._tag, "Completed")
        assert.strictEqual(counter.n, 1)
        assert.deepStrictEqual((yield* store.readRun(b.runId)).map((r) => r.seq), [1, 2, 3, 4, 5])
      }),
      faultyLayer({ t1: "lostAck", t2: "lostAck" })
    ))

  it.effect("replaying the same model call is refused by T1 with duplicate_dispatch and never calls the implementation", () =>
    withMemory(Effect.gen(function*() {
      const { b } = yield* setup("run-replay")
      const counter = { n: 0 }
      const call = b.call("c1", "Add", { a: 1, b: 1 })
      yield* ToolRuntime.run(b.runId, call, { tools: [counterTool(counter)] })
      const replay = yield* Effect.either(ToolRuntime.run(b.runId, call, { tools: [counterTool(counter)] }))
      const error = failureOf(replay)
      assert.strictEqual(error._tag, "AppendRejected")
      if (error._tag === "AppendRejected") assert.strictEqual(error.reason, "duplicate_dispatch")
      assert.strictEqual(counter.n, 1)
    })))

  it.effect("an implementation failure is committed as an operation-bound error response", () =>
    withMemory(Effect.gen(function*() {
      const { b } = yield* setup("run-err")
      const boom = Tool.make({
        name: "Boom",
        args: Schema.Struct({}),
        recoveryMode: "never_auto_retry",
        implementation: () => Effect.fail({ _tag: "Exploded", message: "no" })
      })
      const outcome = yield* ToolRuntime.run(b.runId, b.call("c1", "Boom", {}), { tools: [boom] })
      const body = outcome.response.body as FunctionResponse
      assert.isTrue(body.isError)
      assert.deepStrictEqual(body.result, { error: "Exploded", message: "no" })
      assert.isDefined(body.operationId)
      assert.isUndefined(body.idempotencyKey)
    })))
})

// A reconcilable tool whose evidence and observe are scripted; `log` records the order of preflight steps.
const reconcilableTool = (
  log: Array<string>,
  evidence: () => Effect.Effect<unknown, { readonly _tag: "NoEvidence"; readonly message: string }>
) =>
  Tool.make({
    name: "Put",
    args: Schema.Struct({ key: Schema.String }),
    recoveryMode: "reconcilable",
    preflight: (args) => Effect.sync(() => void log.push(`preflight ${args.key}`)),
    evidence: (args) => Effect.zipRight(Effect.sync(() => void log.push(`evidence ${args.key}`)), evidence()),
    implementation: (args, ctx) =>
      Effect.sync(() => {
        log.push(`implementation ${args.key}`)
        return { stored: args.key, evidence: ctx.evidence ?? null }
      }),
    observe: () => Effect.succeed(Observation.matchesPriorState("scripted"))
  })

describe("ToolRuntime with reconcilable tools", () => {
  it.effect("evidence runs after the permission hook, is recorded in ToolDispatched and given to the implementation", () =>
    withMemory(Effect.gen(function*() {
      const { b, store } = yield* setup("run-rec")
      const log: Array<string> = []
      const tool = reconcilableTool(log, () => Effect.succeed({ version: 7 }))
      const permission: ToolRuntime.PermissionHook = ({ args }) =>
        Effect.sync(() => (log.push(`permission ${(args as any).key}`), "allow" as const))
      const outcome = yield* ToolRuntime.run(b.runId, b.call("c1", "Put", { key: "k" }), { tools: [tool], permission })
      assert.deepStrictEqual(log, ["preflight k", "permission k", "evidence k", "implementation k"])
      assert.deepStrictEqual((outcome.response.body as FunctionResponse).result, { stored: "k", evidence: { version: 7 } })
      const rows = yield* store.readRun(b.runId)
      const dispatch = rows.find((r) => r.event.body._tag === "ToolDispatched")!.event.body as ToolDispatched
      assert.strictEqual(dispatch.recoveryMode, "reconcilable")
      assert.deepStrictEqual(dispatch.evidence, { version: 7 })
      assert.isUndefined(dispatch.idempotencyKey)
      // Denied: evidence is never taken.
      log.length = 0
      const denied = yield* ToolRuntime.run(b.runId, b.call("c2", "Put", { key: "d" }), { tools: [tool], permission: () => Effect.succeed("deny") })
      assert.strictEqual(denied._tag === "Refused" ? denied.reason : null, "permission_denied")
      assert.deepStrictEqual(log, ["preflight d"])
      // A tool's preflight check refuses with invalid_args, before the permission hook.
      log.length = 0
      const picky = Tool.make({ ...tool, preflight: () => Effect.fail(new Tool.ToolArgsRejected({ message: "no such key" })) })
      const invalid = yield* ToolRuntime.run(b.runId, b.call("c3", "Put", { key: "x" }), { tools: [picky], permission })
      assert.strictEqual(invalid._tag === "Refused" ? invalid.reason : null, "invalid_args")
      assert.deepStrictEqual((invalid.response.body as FunctionResponse).result, { error: "invalid_args", message: "no such key" })
      assert.deepStrictEqual(log, [])
    })))

  it.effect("evidence that fails or is not strict JSON refuses the call with evidence_unavailable; nothing is dispatched", () =>
    withMemory(Effect.gen(function*() {
      const { b, store } = yield* setup("run-noev")
      const log: Array<string> = []
      const cases = [
        ["failed", reconcilableTool(log, () => Effect.fail({ _tag: "NoEvidence", message: "the disk is gone" })), "the disk is gone"],
        ["not json", reconcilableTool(log, () => Effect.succeed({ n: Number.NaN })), "not strict JSON"],
        ["undefined", reconcilableTool(log, () => Effect.succeed(undefined)), "not strict JSON"]
      ] as const
      let n = 0
      for (const [what, tool, text] of cases) {
        const outcome = yield* ToolRuntime.run(b.runId, b.call(`c${++n}`, "Put", { key: what }), { tools: [tool] })
        assert.strictEqual(outcome._tag === "Refused" ? outcome.reason : null, "evidence_unavailable", what)
        const body = outcome.response.body as FunctionResponse
        assert.isTrue(body.isError)
        assert.isUndefined(body.operationId)
        assert.strictEqual((body.result as any).error, "evidence_unavailable")
        assert.include((body.result as any).message, text, what)
      }
      assert.isFalse(log.some((l) => l.startsWith("implementation")))
      const rows = yield* store.readRun(b.runId)
      assert.isFalse(rows.some((r) => r.event.body._tag === "ToolDispatched"))
      const resolved = Either.getOrThrow(RecoveryResolver.resolve(rows))
      assert.deepStrictEqual(resolved.operations.map((o) => o.decision), ["completed", "completed", "completed"])
    })))

  it("the type of a reconcilable tool requires evidence and observe", () => {
    const base = { name: "T", args: Schema.Struct({}), implementation: () => Effect.void }
    // @ts-expect-error a reconcilable tool without evidence and observe does not type-check
    Tool.make({ ...base, recoveryMode: "reconcilable" })
    // @ts-expect-error nor with evidence alone
    Tool.make({ ...base, recoveryMode: "reconcilable", evidence: () => Effect.succeed(1) })
    // @ts-expect-error nor with observe alone
    Tool.make({ ...base, recoveryMode: "reconcilable", observe: () => Effect.succeed(Observation.diverged("x")) })
    // @ts-expect-error and a tool of another mode has neither
    Tool.make({ ...base, recoveryMode: "idempotent", evidence: () => Effect.succeed(1), observe: () => Effect.succeed(Observation.diverged("x")) })
    const ok = Tool.make({ ...base, recoveryMode: "reconcilable", evidence: () => Effect.succeed(1), observe: () => Effect.succeed(Observation.diverged("x")) })
    assert.isTrue(Tool.isReconcilable(ok))
  })
})

// ---- SQLite projections ---------------------------------------------------------------------------------------

const openSqlite = (workspace: string) =>
  Layer.build(SqliteRuntimeEventStore.layer({ workspace })).pipe(Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)))

const onlineRows = (workspace: string): ToolProjection.Projection => {
  const db = new Database(join(workspace, "runtime.sqlite"), { readonly: true })
  try {
    return {
      operations: db.prepare(`SELECT ${ToolProjection.OPERATION_COLUMNS.join(", ")} FROM tool_operations ORDER BY operation_id`).all() as any,
      journal: db.prepare(`SELECT ${ToolProjection.JOURNAL_COLUMNS.join(", ")} FROM tool_operation_journal ORDER BY journal_id`).all() as any
    }
  } finally {
    db.close()
  }
}

const rebuilt = (store: RuntimeEventStoreShape) =>
  Effect.map(Stream.runCollect(store.exportRows()), (rows) => ToolProjection.rebuild(Chunk.toReadonlyArray(rows)))

describe("tool projections (SQLite)", () => {
  it.scopedLive("T1 and T2 write the projection rows in their transactions; online = reopened = rebuilt, agreeing with the resolver", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-toolproj-" })
      const counter = { n: 0 }
      const done = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* openSqlite(ws)
        return yield* Effect.gen(function*() {
          const { b } = yield* setup("run-p")
          yield* ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 1 }), { tools: [counterTool(counter)] })
          // The second call stops after T1 (its implementation dies): an operation left prepared.
          const dies = Tool.make({ name: "Dies", args: Schema.Struct({}), recoveryMode: "never_auto_retry", implementation: () => Effect.die("crash") })
          yield* Effect.exit(ToolRuntime.run(b.runId, b.call("c2", "Dies", {}), { tools: [dies] }))
          const online = onlineRows(ws)
          const fromEvents = yield* rebuilt(store)
          assert.deepStrictEqual(online, fromEvents)
          return { online, rows: yield* store.readRun(b.runId) }
        }).pipe(Effect.provideService(RuntimeEventStore, store))
      }))
      assert.deepStrictEqual(done.online.operations.map((o) => [o.call_id, o.state, o.version]), [
        ...[["c1", "outcome_committed", 2], ["c2", "prepared", 1]].sort((x, y) =>
          deriveOperationId("inv-run-p", x[0] as string) < deriveOperationId("inv-run-p", y[0] as string) ? -1 : 1
        )
      ])
      assert.strictEqual(done.online.journal.length, 3)
      assert.isTrue(done.online.operations.every((o) => o.committed_at >= 0))
      // Reopened: the same rows, and they agree with the resolver.
      const reopened = yield* Effect.scoped(Effect.flatMap(openSqlite(ws), (store) => rebuilt(store)))
      assert.deepStrictEqual(onlineRows(ws), reopened)
      const resolved = Either.getOrThrow(RecoveryResolver.resolve(done.rows))
      for (const op of done.online.operations) {
        const decision = resolved.operations.find((d) => d.callId === op.call_id)!
        assert.isTrue(
          ToolProjection.agreesWithStatus(op.state, RecoveryResolver.toolOperationStatus(decision)),
          `${op.call_id}: ${op.state} vs ${decision.decision}`
        )
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a version 1 file migrates to the current format: the projections are backfilled equal to the rebuild", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-toolmig-" })
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* openSqlite(ws)
        const a = EventBuilder.make("run-m", 77)
        yield* store.appendBatch([{
          runId: a.runId,
          events: [
            a.opened("t1_after_preflight_v1"),
            a.call("c1", "Bash", {}),
            a.dispatched("c1", "Bash", {}),
            a.response("c1", "Bash", 1, { operationBound: true }),
            a.call("c2", "Bash", { x: 1 }),
            a.dispatched("c2", "Bash", { x: 1 })
          ]
        }], { mode: "restore" })
      }))
      const expected = onlineRows(ws)
      assert.strictEqual(expected.operations.length, 2)
      const raw = new Database(join(ws, "runtime.sqlite"))
      raw.exec("DROP VIEW tool_operations; DROP VIEW tool_operation_journal; PRAGMA user_version = 1")
      raw.close()
      const migrated = yield* Effect.scoped(Effect.flatMap(openSqlite(ws), (store) => rebuilt(store)))
      const raw2 = new Database(join(ws, "runtime.sqlite"), { readonly: true })
      assert.strictEqual(raw2.pragma("user_version", { simple: true }), 4)
      raw2.close()
      assert.deepStrictEqual(onlineRows(ws), migrated)
      assert.deepStrictEqual(onlineRows(ws), expected)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a format 3 file (projection tables written by T1/T2) reads as it is, and its first writer makes them views of the same rows", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-toolmig4-" })
      const counter = { n: 0 }
      const b = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* openSqlite(ws)
        return yield* Effect.gen(function*() {
          const { b } = yield* setup("run-f3")
          yield* ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 2 }), { tools: [counterTool(counter)] })
          const dies = Tool.make({ name: "Dies", args: Schema.Struct({}), recoveryMode: "never_auto_retry", implementation: () => Effect.die("crash") })
          yield* Effect.exit(ToolRuntime.run(b.runId, b.call("c2", "Dies", {}), { tools: [dies] }))
          return b
        }).pipe(Effect.provideService(RuntimeEventStore, store))
      }))
      const expected = onlineRows(ws)
      assert.strictEqual(expected.operations.length, 2)
      assert.strictEqual(expected.journal.length, 3)
      // As format 3 left it: the projections are tables holding these rows.
      const raw = new Database(join(ws, "runtime.sqlite"))
      raw.exec(
        "CREATE TABLE ops3 AS SELECT * FROM tool_operations; CREATE TABLE journal3 AS SELECT * FROM tool_operation_journal; " +
          "DROP VIEW tool_operations; DROP VIEW tool_operation_journal; " +
          "ALTER TABLE ops3 RENAME TO tool_operations; ALTER TABLE journal3 RENAME TO tool_operation_journal; PRAGMA user_version = 3"
      )
      raw.close()
      const kinds = () => {
        const db = new Database(join(ws, "runtime.sqlite"), { readonly: true })
        try {
          return {
            version: db.pragma("user_version", { simple: true }),
            types: db.prepare("SELECT type FROM sqlite_master WHERE name IN ('tool_operations', 'tool_operation_journal') ORDER BY name").all()
              .map((r) => (r as { type: string }).type)
          }
        } finally {
          db.close()
        }
      }
      assert.deepStrictEqual(kinds(), { version: 3, types: ["table", "table"] })
      // A reader leaves it as it is, and verifies its derived rows (the tables) against the events.
      yield* Effect.scoped(Effect.gen(function*() {
        const reader = yield* Layer.build(SqliteRuntimeEventStore.layer({ workspace: ws, readOnly: true })).pipe(
          Effect.map((ctx) => Context.get(ctx, RuntimeEventStore))
        )
        assert.deepStrictEqual(yield* rebuilt(reader), expected)
      }))
      assert.deepStrictEqual(kinds(), { version: 3, types: ["table", "table"] })
      // A writer migrates: views now, giving the same rows, and T1/T2 go on.
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* openSqlite(ws)
        assert.deepStrictEqual(kinds(), { version: 4, types: ["view", "view"] })
        assert.deepStrictEqual(onlineRows(ws), expected)
        yield* Effect.gen(function*() {
          yield* ToolRuntime.run(b.runId, b.call("c3", "Add", { a: 2, b: 2 }), { tools: [counterTool(counter)] })
        }).pipe(Effect.provideService(RuntimeEventStore, store))
        assert.deepStrictEqual(onlineRows(ws), yield* rebuilt(store))
        assert.strictEqual(onlineRows(ws).operations.length, 3)
      }))
    }).pipe(Effect.provide(NodeContext.layer)))
})

// ---- PostgreSQL projections ----------------------------------------------------------------------------------

// The projection rows of a PostgreSQL workspace, read with a raw client (bigint columns as numbers, as SQLite gives them).
const pgOnlineRows = (workspace: string) =>
  Effect.acquireUseRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: Redacted.value(pgUrl()) })
      await client.connect()
      return client
    }),
    (client) =>
      Effect.promise(async (): Promise<ToolProjection.Projection> => {
        const s = `"rr_${workspace}"`
        const numbers = (row: Record<string, unknown>) =>
          Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === "string" && /^(committed_at)$/.test(k) ? Number(v) : v]))
        const operations = await client.query(`SELECT ${ToolProjection.OPERATION_COLUMNS.join(", ")} FROM ${s}.tool_operations ORDER BY operation_id COLLATE "C"`)
        const journal = await client.query(`SELECT ${ToolProjection.JOURNAL_COLUMNS.join(", ")} FROM ${s}.tool_operation_journal ORDER BY journal_id COLLATE "C"`)
        return { operations: operations.rows.map(numbers) as any, journal: journal.rows.map(numbers) as any }
      }),
    (client) => Effect.promise(() => client.end())
  )

describe("tool projections (PostgreSQL)", () => {
  it.scopedLive("T1 and T2 write the projection rows in their transactions; online = reopened = rebuilt, agreeing with the resolver", () =>
    Effect.gen(function*() {
      const workspace = `toolproj_${Math.random().toString(36).slice(2, 10)}`
      const counter = { n: 0 }
      const done = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* PgRuntimeEventStore.make({ url: pgUrl(), workspace })
        return yield* Effect.gen(function*() {
          const { b } = yield* setup("run-p")
          yield* ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 1 }), { tools: [counterTool(counter)] })
          const dies = Tool.make({ name: "Dies", args: Schema.Struct({}), recoveryMode: "never_auto_retry", implementation: () => Effect.die("crash") })
          yield* Effect.exit(ToolRuntime.run(b.runId, b.call("c2", "Dies", {}), { tools: [dies] }))
          const online = yield* pgOnlineRows(workspace)
          assert.deepStrictEqual(online, yield* rebuilt(store))
          return { online, rows: yield* store.readRun(b.runId) }
        }).pipe(Effect.provideService(RuntimeEventStore, store))
      }))
      assert.deepStrictEqual(done.online.operations.map((o) => o.state).sort(), ["outcome_committed", "prepared"])
      assert.strictEqual(done.online.journal.length, 3)
      assert.strictEqual(counter.n, 1)
      const reopened = yield* Effect.scoped(Effect.flatMap(PgRuntimeEventStore.make({ url: pgUrl(), workspace }), rebuilt))
      assert.deepStrictEqual(yield* pgOnlineRows(workspace), reopened)
      const resolved = Either.getOrThrow(RecoveryResolver.resolve(done.rows))
      for (const op of done.online.operations) {
        const decision = resolved.operations.find((d) => d.callId === op.call_id)!
        assert.isTrue(ToolProjection.agreesWithStatus(op.state, RecoveryResolver.toolOperationStatus(decision)), `${op.call_id}`)
      }
    }))

  it.scopedLive("a format 2 workspace (projection tables) reads as it is; its first writer makes them views of the same rows", () =>
    Effect.gen(function*() {
      const workspace = `toolmig_${Math.random().toString(36).slice(2, 10)}`
      const s = `"rr_${workspace}"`
      const counter = { n: 0 }
      const b = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* PgRuntimeEventStore.make({ url: pgUrl(), workspace })
        return yield* Effect.gen(function*() {
          const { b } = yield* setup("run-f2")
          yield* ToolRuntime.run(b.runId, b.call("c1", "Add", { a: 1, b: 2 }), { tools: [counterTool(counter)] })
          const dies = Tool.make({ name: "Dies", args: Schema.Struct({}), recoveryMode: "never_auto_retry", implementation: () => Effect.die("crash") })
          yield* Effect.exit(ToolRuntime.run(b.runId, b.call("c2", "Dies", {}), { tools: [dies] }))
          return b
        }).pipe(Effect.provideService(RuntimeEventStore, store))
      }))
      const expected = yield* pgOnlineRows(workspace)
      assert.strictEqual(expected.operations.length, 2)
      assert.strictEqual(expected.journal.length, 3)
      const raw = (text: string) =>
        Effect.acquireUseRelease(
          Effect.promise(async () => {
            const client = new pg.Client({ connectionString: Redacted.value(pgUrl()) })
            await client.connect()
            return client
          }),
          (client) => Effect.promise(() => client.query(text)),
          (client) => Effect.promise(() => client.end())
        )
      // As format 2 left it: the projections are tables holding these rows.
      yield* raw(
        `CREATE TABLE ${s}.ops2 AS SELECT * FROM ${s}.tool_operations; CREATE TABLE ${s}.journal2 AS SELECT * FROM ${s}.tool_operation_journal; ` +
          `DROP VIEW ${s}.tool_operations; DROP VIEW ${s}.tool_operation_journal; ` +
          `ALTER TABLE ${s}.ops2 RENAME TO tool_operations; ALTER TABLE ${s}.journal2 RENAME TO tool_operation_journal; ` +
          `UPDATE ${s}.meta SET value = 2 WHERE key = 'format_version'`
      )
      const kinds = Effect.map(
        raw(
          `SELECT (SELECT value FROM ${s}.meta WHERE key = 'format_version') AS version, ` +
            `(SELECT string_agg(relkind::text, ',' ORDER BY relname) FROM pg_class WHERE relnamespace = '${s}'::regnamespace ` +
            "AND relname IN ('tool_operations', 'tool_operation_journal')) AS kinds"
        ),
        (result) => ({ version: Number(result.rows[0].version), kinds: result.rows[0].kinds as string })
      )
      assert.deepStrictEqual(yield* kinds, { version: 2, kinds: "r,r" })
      yield* Effect.scoped(Effect.flatMap(PgRuntimeEventStore.make({ url: pgUrl(), workspace, readOnly: true }), (reader) =>
        Effect.map(rebuilt(reader), (rows) => assert.deepStrictEqual(rows, expected))))
      assert.deepStrictEqual(yield* kinds, { version: 2, kinds: "r,r" })
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* PgRuntimeEventStore.make({ url: pgUrl(), workspace })
        assert.deepStrictEqual(yield* kinds, { version: 4, kinds: "v,v" })
        assert.deepStrictEqual(yield* pgOnlineRows(workspace), expected)
        yield* ToolRuntime.run(b.runId, b.call("c3", "Add", { a: 2, b: 2 }), { tools: [counterTool(counter)] }).pipe(
          Effect.provideService(RuntimeEventStore, store)
        )
        const after = yield* pgOnlineRows(workspace)
        assert.deepStrictEqual(after, yield* rebuilt(store))
        assert.strictEqual(after.operations.length, 3)
      }))
    }))
})
