// The continuation crash and race child (docs/spec/04-continuation.md "Crash proof"): plans and executes one continuation of the prepared
// source run on a real store, SIGKILLed at a failpoint, run to the end, or racing a twin process round after round.
// Usage: node --import tsx harness/ContinuationChild.ts crash <sqlite|jsonl> <workspace> <point>
//        | run <sqlite|jsonl> <workspace> | race <sqlite|jsonl> <base> <rounds> <delayMs> <lockWaitMs>
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { writeSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as ScriptedModelProvider from "../src/Testing/ScriptedModelProvider.js"
import * as SqliteRunHeaderStore from "../src/Layers/SqliteRunHeaderStore.js"
import * as ContinuationExecutor from "../src/Programs/ContinuationExecutor.js"
import * as ContinuationFailpoints from "../src/Services/ContinuationFailpoints.js"
import type { ContinuationSafetyInspector } from "../src/Services/ContinuationSafetyInspector.js"
import { ModelProvider, type ProviderRequest } from "../src/Services/ModelProvider.js"
import { OWNER_LOCK_WAIT_MS, OwnerLockWaitMs, WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import { CLEANUP_MARKER, HarnessStore } from "./Child.js"

/** The source run every continuation child continues (the parent builds it). */
export const SOURCE_RUN_ID = "cont-src"

/** The tools the source run's replay names, and the child host's catalog. */
export const SOURCE_TOOLS: ReadonlyArray<string> = ["read"]

/** The side file in the workspace where the provider records each call (appended and fsynced before it answers). */
export const PROVIDER_CALLS_FILE = "provider-calls.log"

/** The file whose existence releases round `n` of a race (written by the parent once the round's source is ready). */
export const GO_FILE = "go"

/** The line a race child prints once it is loaded and waiting for its first round. */
export const RACE_READY_LINE = "ready"

/** The folder of round `n` (1-based) of a race under `base`. */
export const roundWorkspace = (base: string, n: number): string => join(base, `round-${n}`)

/** The marker line a crash child prints when it reaches its point (then it waits forever). */
export const atLine = (point: ContinuationFailpoints.ContinuationPoint): string => `at ${point}`

/** One provider call as the side file records it: the continuation run, its claim and the calling process. */
export const ProviderCall = Schema.parseJson(Schema.Struct({ runId: Schema.String, claimId: Schema.String, pid: Schema.Int }))
/** One provider call as the side file records it. */
export type ProviderCall = typeof ProviderCall.Type

/** What one execution of a child ended with, printed as one JSON line (race and run modes). */
export const ChildResult = Schema.parseJson(Schema.Union(
  Schema.TaggedStruct("Continued", { pid: Schema.Int, round: Schema.Int, runId: Schema.String, claimId: Schema.String, supersededClaimId: Schema.NullOr(Schema.String) }),
  Schema.TaggedStruct("NotContinued", { pid: Schema.Int, round: Schema.Int, reason: Schema.String, parkReasons: Schema.Array(Schema.String) }),
  Schema.TaggedStruct("Failed", { pid: Schema.Int, round: Schema.Int, error: Schema.String, code: Schema.NullOr(Schema.String), message: Schema.String })
))
/** What one execution of a child ended with. */
export type ChildResult = typeof ChildResult.Type

// Log lines (the executor's lifecycle events) go to stderr: stdout carries only the protocol's lines.
const stderrLogger = Logger.replace(
  Logger.defaultLogger,
  Logger.map(Logger.logfmtLogger, (line) => void process.stderr.write(`${line}\n`))
)

// Written synchronously to fd 1: a line that returned is in the pipe, even if a SIGKILL follows at once.
const println = (line: string) => Effect.sync(() => void writeSync(1, `${line}\n`))

/** The ledger and the run headers of one store over a workspace, as a writer or read-only. */
export const workspaceStores = (store: HarnessStore, workspace: string, readOnly: boolean) =>
  Layer.mergeAll(
    NodeRuntimeEventStore.layerStore(store, { workspace, readOnly }),
    store === "sqlite" ? SqliteRunHeaderStore.layer({ workspace, readOnly }) : JsonlRunHeaderStore.layer({ workspace, readOnly })
  ).pipe(Layer.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode)))

/**
 * A provider that appends one `ProviderCall` line to `<workspace>/provider-calls.log` and fsyncs it before anything
 * else, then waits `delayMs` and answers. So the file lists every call that ever reached the provider, even if the
 * process dies right after.
 */
const recordingProvider = (workspace: string, delayMs: number) =>
  Layer.effect(
    ModelProvider,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const scripted = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply("continued")])
      const record = (request: ProviderRequest) =>
        Effect.scoped(Effect.gen(function*() {
          const file = yield* fs.open(join(workspace, PROVIDER_CALLS_FILE), { flag: "a", mode: 0o600 })
          const line = `${Schema.encodeSync(ProviderCall)({ runId: request.continuation.runId, claimId: request.continuation.claimId, pid: process.pid })}\n`
          yield* file.writeAll(new TextEncoder().encode(line))
          yield* file.sync
        })).pipe(Effect.orDie)
      return ModelProvider.of({
        respond: (request) =>
          record(request).pipe(Effect.zipRight(Effect.sleep(delayMs)), Effect.zipRight(scripted.respond(request)))
      })
    })
  ).pipe(Layer.provide(NodeFileSystem.layer))

// The host: a fixed tool catalog with background work settled, and the owner lock waiting at most `lockWaitMs`.
const hostLayer = (lockWaitMs: number) =>
  Layer.mergeAll(
    NodeContinuationSafetyInspector.layerNode(NodeContinuationSafetyInspector.fixed(SOURCE_TOOLS, true)),
    NodeWorkspaceOwner.layerNode.pipe(Layer.provide(Layer.succeed(OwnerLockWaitMs, lockWaitMs)))
  )

/**
 * One continuation of the source run, as a host would run `resume --yes`: plans over the stores opened read-only,
 * then, under the exclusive owner lock (waiting at most 2 s), opens them as a writer and executes. Returns what it
 * ended with, never fails. `failpoints` replaces the default (no-op) failpoints.
 */
const continueOnce = (
  store: HarnessStore,
  workspace: string,
  round: number,
  delayMs: number,
  host: Layer.Layer<WorkspaceOwner | ContinuationSafetyInspector>,
  failpoints: Layer.Layer<never> | Layer.Layer<ContinuationFailpoints.ContinuationFailpoints> = Layer.empty
) =>
  Effect.gen(function*() {
    const owner = yield* WorkspaceOwner
    const prepared = yield* ContinuationExecutor.prepare(workspace, SOURCE_RUN_ID, { confirmed: true }).pipe(
      Effect.provide(workspaceStores(store, workspace, true))
    )
    return yield* owner.withExclusive(
      workspace,
      ContinuationExecutor.executeHoldingLock(workspace, prepared, { confirmed: true }).pipe(
        Effect.provide(Layer.mergeAll(workspaceStores(store, workspace, false), recordingProvider(workspace, delayMs), failpoints))
      )
    )
  }).pipe(
    Effect.map((outcome): ChildResult =>
      outcome._tag === "Continued"
        ? { _tag: "Continued", pid: process.pid, round, runId: outcome.continuationRunId, claimId: outcome.claimId, supersededClaimId: outcome.supersededClaimId ?? null }
        : { _tag: "NotContinued", pid: process.pid, round, reason: outcome.reason, parkReasons: [...outcome.parkReasons] }
    ),
    Effect.catchAll((error: { readonly _tag: string; readonly message: string }) =>
      Effect.succeed<ChildResult>({
        _tag: "Failed",
        pid: process.pid,
        round,
        error: error._tag,
        code: "reason" in error && typeof error.reason === "string" ? error.reason : "code" in error && typeof error.code === "string" ? error.code : null,
        message: error.message
      })
    ),
    Effect.provide(host)
  )

/** Crash mode: continues until `point`, prints `at <point>` there and waits forever (the parent SIGKILLs it). */
const crash = (store: HarnessStore, workspace: string, point: ContinuationFailpoints.ContinuationPoint) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    // A SIGKILL runs no finalizer: the parent checks this marker was never written.
    yield* Effect.addFinalizer(() => fs.writeFileString(resolve(workspace, CLEANUP_MARKER), `finalizer at ${point} ran\n`).pipe(Effect.orDie))
    const failpoints = ContinuationFailpoints.layerAt(point, () => Effect.zipRight(println(atLine(point)), Effect.never))
    const result = yield* continueOnce(store, workspace, 0, 0, hostLayer(OWNER_LOCK_WAIT_MS), failpoints)
    // Reached only when the point was never hit: the parent reports the line it got instead of the marker.
    yield* println(Schema.encodeSync(ChildResult)(result))
  }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))

/** Run mode: one continuation to the end, its result printed as one line. */
const runOnce = (store: HarnessStore, workspace: string) =>
  Effect.flatMap(continueOnce(store, workspace, 0, 0, hostLayer(OWNER_LOCK_WAIT_MS)), (result) => println(Schema.encodeSync(ChildResult)(result)))

/**
 * Race mode: for each round n in 1..rounds, polls (every 2 ms) for `<base>/round-n/go`, then continues that round's
 * source with a provider that waits `delayMs` before answering, and prints the round's result line. The owner lock
 * waits at most `lockWaitMs` (docs/spec/04-continuation.md's 2 s, unless a test shortens it to see `WorkspaceLocked`).
 */
const race = (store: HarnessStore, base: string, rounds: number, delayMs: number, lockWaitMs: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const host = hostLayer(lockWaitMs)
    yield* println(RACE_READY_LINE)
    for (let n = 1; n <= rounds; n++) {
      const workspace = roundWorkspace(base, n)
      while (!(yield* fs.exists(join(workspace, GO_FILE)).pipe(Effect.orElseSucceed(() => false)))) yield* Effect.sleep(2)
      const result = yield* continueOnce(store, workspace, n, delayMs, host)
      yield* println(Schema.encodeSync(ChildResult)(result))
    }
  }).pipe(Effect.provide(NodeFileSystem.layer))

const Args = Schema.Union(
  Schema.Tuple(Schema.Literal("crash"), HarnessStore, Schema.String, Schema.Literal(...ContinuationFailpoints.CONTINUATION_POINTS)),
  Schema.Tuple(Schema.Literal("run"), HarnessStore, Schema.String),
  Schema.Tuple(Schema.Literal("race"), HarnessStore, Schema.String, Schema.NumberFromString, Schema.NumberFromString, Schema.NumberFromString)
)

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const main = Schema.decodeUnknown(Args)(process.argv.slice(2)).pipe(
    Effect.flatMap((args) =>
      args[0] === "crash" ? crash(args[1], args[2], args[3]) : args[0] === "run" ? runOnce(args[1], args[2]) : race(args[1], args[2], args[3], args[4], args[5])
    ),
    Effect.provide(stderrLogger),
    // Failures go to stderr, which the parent collects (runMain would report on stdout).
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(`${Option.isSome(failure) ? `${(failure.value as any)._tag}: ${(failure.value as any).message}` : Cause.pretty(cause)}\n`)
      })
    )
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
}
