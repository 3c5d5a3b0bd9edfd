// The recovery crash and race child (docs/spec/05-reconciliation.md "Crash proof"): runs one tool call of a managed run and is SIGKILLed inside
// it (source), or runs a host's start (repair → reconcile → continuation) or a person's `resolve`, SIGKILLed at a kill
// point of 05; or settles one operation round after round, racing a twin process on SQLite without the owner lock.
// Usage: node --import tsx harness/RecoveryChild.ts source <store> <workspace> <write|bump> <before_rename|after_rename|after_t1>
//        | boot <store> <workspace> <point|-> | resolve <store> <workspace> <point|->
//        | race <store> <base> <rounds> <race_reconcile|race_resolve> <a|b|resolve>
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { closeSync, fsyncSync, openSync, writeSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import type { InvocationId, SessionId, TurnId } from "../src/Domain/Ids.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import * as Tool from "../src/Domain/Tool.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as ContinuationExecutor from "../src/Programs/ContinuationExecutor.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import * as HostStartup from "../src/Programs/HostStartup.js"
import * as Reconcile from "../src/Programs/Reconcile.js"
import * as Resolve from "../src/Programs/Resolve.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { ModelProvider, type ProviderRequest } from "../src/Services/ModelProvider.js"
import * as RecoveryFailpoints from "../src/Services/RecoveryFailpoints.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as WorkspaceIdentity from "../src/Services/WorkspaceIdentity.js"
import * as ScriptedModelProvider from "../src/Testing/ScriptedModelProvider.js"
import * as ResolveWorkspace from "../src/Workspace/ResolveWorkspace.js"
import { CLEANUP_MARKER, HarnessStore } from "./Child.js"
import { workspaceStores } from "./ContinuationChild.js"

/** The managed run every recovery scenario settles. */
export const RECOVERY_RUN_ID = "recovery-src"
/** The one tool call of that run. */
export const RECOVERY_CALL_ID = "c1"
/** The file the `write` scenario writes (relative to the workspace, which is the tool's root). */
export const TARGET_FILE = "notes.txt"
/** The target's bytes before the call (the prior state) and the bytes the call writes. */
export const TARGET_BEFORE = "before\n"
/** The bytes the `write` scenario's call writes. */
export const TARGET_AFTER = "after\n"
/** The side file where the idempotent `bump` tool records each execution: one line, the key it was given. */
export const EXECUTIONS_FILE = "bump-executions.log"
/** The side file where the provider records each call (appended and fsynced before it answers). */
export const PROVIDER_CALLS_FILE = "provider-calls.log"
/** The file whose existence releases round `n` of a race. */
export const GO_FILE = "go"
/** The line a race child prints once loaded. */
export const READY = "ready"
/** The result a person gives in the `resolve` step (an edit). */
export const MANUAL_RESULT = { note: "a person checked the file and wrote it by hand" }
/** The actor of the `resolve` step. */
export const MANUAL_ACTOR = "harness-person"

/** Which tool call the source run makes: a file write (reconcilable) or a counter bump (idempotent). */
export const Scenario = Schema.Literal("write", "bump")
/** Which tool call the source run makes. */
export type Scenario = typeof Scenario.Type
/** Where the source child is killed: inside the file write before or after its rename, or after T1 of the bump. */
export const SourcePoint = Schema.Literal("before_rename", "after_rename", "after_t1")
/** Where the source child is killed. */
export type SourcePoint = typeof SourcePoint.Type

/** The folder of round `n` (1-based) of a race under `base`. */
export const roundWorkspace = (base: string, n: number): string => join(base, `round-${n}`)

/** The marker line a child prints when it reaches its point (then it waits forever). */
export const atLine = (point: string): string => `at ${point}`

/** One provider call as the side file records it: the source boundary it continues, the run, the calling process. */
export const ProviderCall = Schema.parseJson(Schema.Struct({ boundary: Schema.String, runId: Schema.String, pid: Schema.Int }))

/** What a `boot` prints (one line): repair's actions, reconcile's outcomes, and the continuation of the source run. */
export const BootLine = Schema.parseJson(Schema.Struct({
  startup: Schema.String,
  repaired: Schema.Array(Schema.String),
  reconciled: Schema.Array(Schema.Struct({ callId: Schema.String, outcome: Schema.String, reason: Schema.String, message: Schema.String })),
  continuation: Schema.Struct({ outcome: Schema.String, runId: Schema.NullOr(Schema.String), codes: Schema.Array(Schema.String) })
}))
/** What a `boot` prints. */
export type BootLine = typeof BootLine.Type

/** What a `resolve` (and a race's resolve round) prints: the recorded decision, or the refusal. */
export const ResolveLine = Schema.parseJson(Schema.Union(
  Schema.TaggedStruct("Recorded", { disposition: Schema.String, reasonCode: Schema.String, alreadyRecorded: Schema.Boolean }),
  Schema.TaggedStruct("Refused", { error: Schema.String, reason: Schema.NullOr(Schema.String), message: Schema.String })
))
/** What a `resolve` prints. */
export type ResolveLine = typeof ResolveLine.Type

/** What a race round's reconcile prints: its outcome for the call (none when it did not see the call unsettled). */
export const RaceReconcileLine = Schema.parseJson(Schema.Struct({
  round: Schema.Int,
  operations: Schema.Array(Schema.Struct({ outcome: Schema.String, reason: Schema.String, message: Schema.String }))
}))

// Written synchronously to fd 1: a line that returned is in the pipe, even if a SIGKILL follows at once.
const println = (line: string) => Effect.sync(() => void writeSync(1, `${line}\n`))

// Appends one line to a file and fsyncs it, so a line that returned survives a SIGKILL right after.
const appendDurably = (file: string, line: string) => {
  const fd = openSync(file, "a", 0o600)
  try {
    writeSync(fd, `${line}\n`)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** The idempotent tool of the `bump` scenario: records the key it ran with (its side effect), returns it. */
export const bumpTool = (workspace: string) =>
  Tool.make({
    name: "bump",
    args: Schema.Struct({ by: Schema.Int }),
    recoveryMode: "idempotent",
    implementation: (args, ctx) =>
      Effect.sync(() => {
        appendDurably(join(workspace, EXECUTIONS_FILE), ctx.idempotencyKey ?? "-")
        return { bumped: args.by, key: ctx.idempotencyKey ?? null }
      })
  })

/** The host's tools: the file write under the workspace, and the bump. */
export const hostTools = (workspace: string) => [FileWriteTool.fileWriteTool({ root: workspace }), bumpTool(workspace)] as const

/** The host's tool catalog, as the continuation gate sees it. */
export const TOOL_CATALOG: ReadonlyArray<string> = ["write_file", "bump"]

/** The source run's events: opener, user message, and the scenario's call (same ids in every process). */
export const sourceEvents = (scenario: Scenario) => {
  const b = EventBuilder.make(EventBuilder.idsFor(RECOVERY_RUN_ID), 0)
  const call = scenario === "write"
    ? b.call(RECOVERY_CALL_ID, "write_file", { path: TARGET_FILE, content: TARGET_AFTER })
    : b.call(RECOVERY_CALL_ID, "bump", { by: 1 })
  return { b, call }
}

/**
 * Creates the managed source run (identity marker, a running header, opener and user message) and the target's prior
 * state, then runs the scenario's call through ToolRuntime with `failpoints` (the source child stops in it).
 */
export const runSource = (
  store: HarnessStore,
  workspace: string,
  scenario: Scenario,
  failpoints: Layer.Layer<Failpoints.Failpoints> | Layer.Layer<never>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(join(workspace, TARGET_FILE), TARGET_BEFORE)
    const workspaceId = yield* WorkspaceIdentity.ensure(workspace)
    const { b, call } = sourceEvents(scenario)
    yield* Effect.gen(function*() {
      const events = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      const now = yield* Clock.currentTimeMillis
      yield* headers.create(new RunHeader({
        runId: b.runId,
        sessionId: b.ids.sessionId as SessionId,
        invocationId: b.ids.invocationId as InvocationId,
        turnId: b.ids.turnId as TurnId,
        status: "running",
        workspaceId,
        createdAt: now,
        updatedAt: now
      }))
      yield* events.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("write the notes")])
      yield* ToolRuntime.run(b.runId, call, { tools: hostTools(workspace) }).pipe(Effect.provide(failpoints))
    }).pipe(Effect.provide(workspaceStores(store, workspace, false)))
  })

/**
 * A provider that appends one `ProviderCall` line to the workspace's side file and fsyncs it before answering, so the
 * file lists every call that ever reached the provider, even if the process dies right after.
 */
const recordingProvider = (workspace: string) =>
  Layer.sync(ModelProvider, () => {
    const scripted = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("continued after recovery")])
    return ModelProvider.of({
      respond: (request: ProviderRequest) =>
        Effect.zipRight(
          Effect.sync(() =>
            appendDurably(
              join(workspace, PROVIDER_CALLS_FILE),
              Schema.encodeSync(ProviderCall)({
                boundary: `${request.source.runId}@${request.source.highWater.seq}`,
                runId: request.continuation.runId,
                pid: process.pid
              })
            )
          ),
          scripted.respond(request)
        )
    })
  })

/** What a host's start needs beside the stores: owner lock, inspector, provider, the file systems. */
const hostLayer = (store: HarnessStore, workspace: string) =>
  Layer.mergeAll(
    workspaceStores(store, workspace, false),
    NodeWorkspaceOwner.layerNode,
    NodeContinuationSafetyInspector.layerNode(NodeContinuationSafetyInspector.fixed(TOOL_CATALOG, true)),
    recordingProvider(workspace),
    NodeNoFollowFileSystem.layer,
    NodeContext.layer
  )

/**
 * A host's start (docs/spec/05-reconciliation.md): under one exclusive owner hold, repair, then reconcile with the host's tools (confirmed:
 * `idempotent` ones are re-run), then a continuation of the source run when its plan allows (confirmed). The owner's
 * shared hold ends with the scope. `failpoints` stops it at a recovery kill point.
 */
export const boot = (
  store: HarnessStore,
  workspace: string,
  failpoints: Layer.Layer<RecoveryFailpoints.RecoveryFailpoints> | Layer.Layer<never> = Layer.empty
) =>
  Effect.gen(function*() {
    const fileWrite = yield* Reconcile.builtinFileWrite()
    const continuation = Effect.gen(function*() {
      const prepared = yield* ContinuationExecutor.prepare(workspace, RECOVERY_RUN_ID, { confirmed: true })
      const outcome = yield* ContinuationExecutor.executeHoldingLock(workspace, prepared, { confirmed: true })
      return outcome._tag === "Continued"
        ? { outcome: "continued", runId: outcome.continuationRunId as string | null, codes: [] as Array<string> }
        : { outcome: outcome.reason, runId: null, codes: [...outcome.parkReasons] as Array<string> }
    }).pipe(
      Effect.catchAll((error: { readonly _tag: string }) => Effect.succeed({ outcome: "failed", runId: null, codes: [error._tag] }))
    )
    const started = yield* HostStartup.start(workspace, {
      repair: HostStartup.startupSteps({ tools: hostTools(workspace), confirmed: true, fileWrite, continuation })
    })
    const ran = started.repair
    const line: BootLine = ran._tag !== "Ran"
      ? { startup: ran._tag, repaired: [], reconciled: [], continuation: { outcome: "skipped", runId: null, codes: [] } }
      : {
        startup: "Ran",
        repaired: ran.result.repair.repaired.map((r) => `${r.runId} ${r.action}`),
        reconciled: Either.isLeft(ran.result.reconcile)
          ? [{ callId: "", outcome: "error", reason: ran.result.reconcile.left._tag, message: ran.result.reconcile.left.message }]
          : ran.result.reconcile.right.operations.map((o) => ({ callId: o.callId, outcome: o.outcome, reason: o.reason, message: o.message })),
        continuation: ran.result.continuation ?? { outcome: "none", runId: null, codes: [] }
      }
    return line
  }).pipe(Effect.scoped, Effect.provide(Layer.merge(hostLayer(store, workspace), failpoints)))

/** A person's decision on the source call (an edit), as `runtime-resume resolve --edit` records it (owner lock shared). */
export const resolveOnce = (
  store: HarnessStore,
  workspace: string,
  failpoints: Layer.Layer<RecoveryFailpoints.RecoveryFailpoints> | Layer.Layer<never> = Layer.empty
) =>
  ResolveWorkspace.resolveWorkspace({
    workspace,
    store,
    runId: RECOVERY_RUN_ID,
    callId: RECOVERY_CALL_ID,
    choice: { _tag: "edit", result: MANUAL_RESULT, isError: false },
    actor: MANUAL_ACTOR
  }).pipe(
    Effect.map((o): ResolveLine => ({ _tag: "Recorded", disposition: o.disposition, reasonCode: o.reasonCode, alreadyRecorded: o.alreadyRecorded })),
    Effect.catchAll((error) => Effect.succeed(refusedLine(error))),
    Effect.provide(Layer.mergeAll(NodeWorkspaceOwner.layerNode, NodeWorkspaceLock.layerNode, NodeOperator.layer, NodeContext.layer, failpoints))
  )

const refusedLine = (error: { readonly _tag: string; readonly message: string }): ResolveLine => ({
  _tag: "Refused",
  error: error._tag,
  reason: "reason" in error && typeof error.reason === "string" ? error.reason : null,
  message: error.message
})

// Stops at `point`: prints the marker, then waits for the parent's SIGKILL.
const stopAt = (point: RecoveryFailpoints.RecoveryPoint) =>
  RecoveryFailpoints.layerAt(point, () => Effect.zipRight(println(atLine(point)), Effect.never))

// A SIGKILL runs no finalizer: the parent checks this marker was never written.
const marker = (workspace: string, what: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    Effect.addFinalizer(() => fs.writeFileString(resolve(workspace, CLEANUP_MARKER), `finalizer of ${what} ran\n`).pipe(Effect.orDie)))

const source = (store: HarnessStore, workspace: string, scenario: Scenario, point: SourcePoint) =>
  Effect.gen(function*() {
    yield* marker(workspace, `source ${point}`)
    const stop = Effect.zipRight(println(atLine(point)), Effect.never)
    const failpoints = point === "after_t1"
      ? Failpoints.layerAt("after_t1", () => stop)
      : Failpoints.layerAt("in_implementation", (site) =>
        site.label === (point === "before_rename" ? FileWriteTool.FAILPOINT_BEFORE_RENAME : FileWriteTool.FAILPOINT_AFTER_RENAME) ? stop : Effect.void)
    yield* runSource(store, workspace, scenario, failpoints)
    yield* println("finished without stopping")
  }).pipe(Effect.scoped)

const bootChild = (store: HarnessStore, workspace: string, point: RecoveryFailpoints.RecoveryPoint | undefined) =>
  Effect.gen(function*() {
    yield* marker(workspace, `boot ${point ?? "-"}`)
    const line = yield* boot(store, workspace, point === undefined ? Layer.empty : stopAt(point))
    yield* println(Schema.encodeSync(BootLine)(line))
  }).pipe(Effect.scoped)

const resolveChild = (store: HarnessStore, workspace: string, point: RecoveryFailpoints.RecoveryPoint | undefined) =>
  Effect.gen(function*() {
    yield* marker(workspace, `resolve ${point ?? "-"}`)
    const line = yield* resolveOnce(store, workspace, point === undefined ? Layer.empty : stopAt(point))
    yield* println(Schema.encodeSync(ResolveLine)(line))
  }).pipe(Effect.scoped)

/** How long a race side waits at a barrier for its twin before going on alone (a twin that died, say). */
export const BARRIER_TIMEOUT_MS = 10_000

/** Which race a race child takes part in: against a twin `reconcile`, or a `reconcile` against a `resolve`. */
export const RaceKind = Schema.Literal("race_reconcile", "race_resolve")

// Creates `<workspace>/<name>` (a barrier flag).
const flag = (workspace: string, name: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(join(workspace, name), "").pipe(Effect.orDie))

// Waits until `<workspace>/<name>` exists, polling every 2 ms, at most `BARRIER_TIMEOUT_MS`.
const awaitFlag = (workspace: string, name: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    Effect.gen(function*() {
      const until = (yield* Clock.currentTimeMillis) + BARRIER_TIMEOUT_MS
      while (!(yield* fs.exists(join(workspace, name)).pipe(Effect.orElseSucceed(() => false)))) {
        if ((yield* Clock.currentTimeMillis) > until) return
        yield* Effect.sleep(2)
      }
    }))

/**
 * Race mode: for each round n, polls for `<base>/round-n/go`, then settles the source call of that round WITHOUT the
 * owner lock, straight on the store, and prints one line. Flag files in the round's folder order the two processes so
 * each round really contends:
 * - `race_reconcile` (two reconcilers, `a` and `b`): each, after its observation and before writing, flags
 *   `observed-<name>` and waits for its twin's flag: both have read the call unsettled and built a bundle before
 *   either writes, so the second write meets the first inside the store.
 * - `race_resolve`, odd rounds: the reconciler observes, flags `observed-reconcile` and waits for `resolved`; the
 *   person's `resolve` waits for that flag, records its edit and flags `resolved`: the reconciler's write then meets a
 *   manual bundle. Even rounds: `resolve` waits for `reconciled`, flagged once the reconciler's bundle is written, and
 *   then meets a completed operation.
 */
const race = (store: HarnessStore, base: string, rounds: number, kind: typeof RaceKind.Type, name: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* println(READY)
    for (let n = 1; n <= rounds; n++) {
      const workspace = roundWorkspace(base, n)
      while (!(yield* fs.exists(join(workspace, GO_FILE)).pipe(Effect.orElseSucceed(() => false)))) yield* Effect.sleep(2)
      const stores = workspaceStores(store, workspace, false)
      if (name !== "resolve") {
        const fileWrite = yield* Reconcile.builtinFileWrite()
        const twin = name === "a" ? "b" : "a"
        const barrier = kind === "race_reconcile"
          ? Effect.zipRight(flag(workspace, `observed-${name}`), awaitFlag(workspace, `observed-${twin}`))
          : n % 2 === 1
          ? Effect.zipRight(flag(workspace, "observed-reconcile"), awaitFlag(workspace, "resolved"))
          : Effect.void
        const held = barrier.pipe(Effect.provideService(FileSystem.FileSystem, fs))
        const report = yield* Reconcile.reconcile<never>({ fileWrite }).pipe(
          Effect.provide(Layer.merge(stores, RecoveryFailpoints.layerAt("observed", () => held))),
          Effect.map((r) => r.operations.map((o) => ({ outcome: o.outcome, reason: o.reason, message: o.message }))),
          Effect.catchAll((e: { readonly _tag: string; readonly message: string }) =>
            Effect.succeed([{ outcome: "error", reason: e._tag, message: e.message }]))
        )
        yield* flag(workspace, "reconciled")
        yield* println(Schema.encodeSync(RaceReconcileLine)({ round: n, operations: report }))
      } else {
        yield* awaitFlag(workspace, n % 2 === 1 ? "observed-reconcile" : "reconciled")
        const line = yield* Resolve.resolve({
          runId: RECOVERY_RUN_ID,
          callId: RECOVERY_CALL_ID,
          choice: { _tag: "edit", result: MANUAL_RESULT, isError: false },
          actor: MANUAL_ACTOR
        }).pipe(
          Effect.map((o): ResolveLine => ({ _tag: "Recorded", disposition: o.disposition, reasonCode: o.reasonCode, alreadyRecorded: o.alreadyRecorded })),
          Effect.catchAll((e) => Effect.succeed(refusedLine(e))),
          Effect.provide(Layer.merge(stores, NodeOperator.layer))
        )
        yield* flag(workspace, "resolved")
        yield* println(Schema.encodeSync(ResolveLine)(line))
      }
    }
  }).pipe(Effect.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)))

const Point = Schema.Union(Schema.Literal(...RecoveryFailpoints.RECOVERY_POINTS), Schema.Literal("-"))
const Args = Schema.Union(
  Schema.Tuple(Schema.Literal("source"), HarnessStore, Schema.String, Scenario, SourcePoint),
  Schema.Tuple(Schema.Literal("boot", "resolve"), HarnessStore, Schema.String, Point),
  Schema.Tuple(Schema.Literal("race"), HarnessStore, Schema.String, Schema.NumberFromString, RaceKind, Schema.Literal("a", "b", "resolve"))
)

// Log lines go to stderr: stdout carries only the protocol's lines.
const stderrLogger = Logger.replace(Logger.defaultLogger, Logger.map(Logger.logfmtLogger, (line) => void process.stderr.write(`${line}\n`)))

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const main = Schema.decodeUnknown(Args)(process.argv.slice(2)).pipe(
    Effect.flatMap((args) => {
      switch (args[0]) {
        case "source":
          return source(args[1], args[2], args[3], args[4])
        case "boot":
          return bootChild(args[1], args[2], args[3] === "-" ? undefined : args[3])
        case "resolve":
          return resolveChild(args[1], args[2], args[3] === "-" ? undefined : args[3])
        case "race":
          return race(args[1], args[2], args[3], args[4], args[5])
      }
    }),
    Effect.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)),
    Effect.provide(stderrLogger),
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(`${Option.isSome(failure) ? `${(failure.value as any)._tag}: ${(failure.value as any).message}` : Cause.pretty(cause)}\n`)
      })
    )
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
}
