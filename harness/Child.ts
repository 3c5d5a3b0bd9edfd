// The crash harness's child process (docs/spec/02-resume-plan.md, steps 2–4): appends one failpoint's committed prefix through the real
// store, prints "ready", then waits forever in a scope whose finalizer would write `<workspace>/cleanup-marker`.
// Usage: node --import tsx harness/Child.ts <sqlite|jsonl> <workspace> <failpoint id>
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { FailpointId, RUNTIME_RESUME_FAILPOINTS } from "../src/Domain/Failpoints.js"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as HarnessLedger from "../src/Testing/HarnessLedger.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { HARNESS_RUN_ID } from "./Expected.js"

/** The persistent stores the harness crashes, in row order. */
export const HARNESS_STORES = ["sqlite", "jsonl"] as const
/** A persistent store the harness crashes. */
export const HarnessStore = Schema.Literal(...HARNESS_STORES)
/** A persistent store the harness crashes. */
export type HarnessStore = typeof HarnessStore.Type

/** The file the child's scope finalizer would write in the workspace; SIGKILL must leave it unwritten. */
export const CLEANUP_MARKER = "cleanup-marker"

/** The line the child prints on stdout once every append of its prefix has committed. */
export const READY_LINE = "ready"

/** The real store layer of one kind over a workspace, JSONL with its OS-level writer lock. */
export const storeLayer = (store: HarnessStore, options: { readonly workspace: string; readonly readOnly: boolean }) =>
  NodeRuntimeEventStore.layerStore(store, options).pipe(Layer.provide(NodeWorkspaceLock.layer))

/** The child's arguments: store, workspace, failpoint id. */
const ChildArgs = Schema.Tuple(HarnessStore, Schema.String.pipe(Schema.minLength(1)), FailpointId)

/**
 * Appends the failpoint's committed prefix, one `append` (one commit) per event, with `ts` from the Clock,
 * prints the ready line, and waits forever inside a scope whose finalizer writes the cleanup marker.
 */
export const child = (store: HarnessStore, workspace: string, failpointId: FailpointId) =>
  Effect.gen(function*() {
    const failpoint = RUNTIME_RESUME_FAILPOINTS.find((f) => f.id === failpointId)
    if (failpoint === undefined) return yield* Effect.dieMessage(`unknown failpoint ${failpointId}`)
    const fs = yield* FileSystem.FileSystem
    // Registered first, so it runs last on any ordinary exit; a SIGKILL runs no finalizer at all.
    yield* Effect.addFinalizer(() =>
      fs.writeFileString(resolve(workspace, CLEANUP_MARKER), `finalizer of ${failpointId} on ${store} ran\n`).pipe(
        Effect.orDie
      )
    )
    const ledger = yield* storeLayer(store, { workspace, readOnly: false }).pipe(
      Layer.build,
      Effect.map(Context.get(RuntimeEventStore))
    )
    const ts = yield* Clock.currentTimeMillis
    const runId = RunId.make(HARNESS_RUN_ID)
    for (const event of HarnessLedger.prefixEvents(failpoint.committedPrefix, HARNESS_RUN_ID, ts)) {
      yield* ledger.append(runId, [event])
    }
    // A write to a pipe is synchronous on POSIX: the parent sees this line only after every commit above.
    yield* Effect.sync(() => process.stdout.write(`${READY_LINE}\n`))
    return yield* Effect.never
  }).pipe(Effect.scoped)

// Entry point only when run as a script, so the parent can import the constants and `storeLayer` above.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const main = Schema.decodeUnknown(ChildArgs)(process.argv.slice(2)).pipe(
    Effect.flatMap(([store, workspace, failpointId]) => child(store, workspace, failpointId)),
    Effect.provide(NodeLedgerFileSystem.layer),
    // Failures go to stderr, which the parent collects for the row's error (runMain would report on stdout).
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(`${Option.isSome(failure) ? `${failure.value._tag}: ${failure.value.message}` : Cause.pretty(cause)}\n`)
      })
    )
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true })
}
