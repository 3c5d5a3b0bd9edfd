// `runtime-resume/test`: what a host's test suite needs, all in memory: a ledger that survives a simulated crash,
// crash failpoints, managed-run builders, the owner lock, the safety inspector and a FileSystem, and the test layers.
/**
 * The test kit for a host's own suite: an in-memory ledger that survives a simulated crash, crash failpoints,
 * managed-run builders, the owner lock, the safety inspector, a scripted model provider and a crash-consistent file system.
 *
 * @module runtime-resume/test
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { RunHeader } from "./Domain/RunHeader.js"
import * as CrashConsistentFileSystemModule from "./Testing/CrashConsistentFileSystem.js"
import * as MemoryRunHeaderStore from "./Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "./Layers/MemoryRuntimeEventStore.js"
import * as NodeContinuationSafetyInspector from "./Layers/NodeContinuationSafetyInspector.js"
import * as NodeWorkspaceOwner from "./Layers/NodeWorkspaceOwner.js"
import * as TestWorkspaceLockModule from "./Testing/TestWorkspaceLock.js"
import * as EventBuilderModule from "./Domain/Rules/EventBuilder.js"
import type { ContinuationSafetyInspector } from "./Services/ContinuationSafetyInspector.js"
import * as ContinuationFailpointsModule from "./Services/ContinuationFailpoints.js"
import * as FailpointsModule from "./Services/Failpoints.js"
import { RunHeaderStore, type RunHeaderStoreShape } from "./Services/RunHeaderStore.js"
import { RuntimeEventStore, type RuntimeEventStoreShape } from "./Services/RuntimeEventStore.js"
import type { WorkspaceOwner } from "./Services/WorkspaceOwner.js"

export * as EventBuilder from "./Domain/Rules/EventBuilder.js"
export * as HarnessLedger from "./Testing/HarnessLedger.js"
export { RUNTIME_RESUME_FAILPOINTS } from "./Domain/Failpoints.js"

/**
 * A fresh, empty in-memory RuntimeEventStore for each use of the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = MemoryRuntimeEventStore.layer

/**
 * Builds an empty in-memory RuntimeEventStore.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeMemory = MemoryRuntimeEventStore.make
/** The crash-consistent in-memory FileSystem: simulated power loss at any operation (`make`, `crash`, `crashAfter`). */
export * as CrashConsistentFileSystem from "./Testing/CrashConsistentFileSystem.js"
/** An in-memory WorkspaceLock for stores run on a simulated filesystem. */
export * as TestWorkspaceLock from "./Testing/TestWorkspaceLock.js"

/** The tool-boundary failpoints of docs/spec/03-tool-boundary.md (`Failpoints` reference, `layerAt`, `layerRecording`), to crash consumers' tools. */
export * as ToolFailpoints from "./Services/Failpoints.js"
export { Failpoints, TOOL_BOUNDARIES } from "./Services/Failpoints.js"

/**
 * A fresh, empty in-memory RunHeaderStore for each use of the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryRunHeaders = MemoryRunHeaderStore.layer
/**
 * Builds an empty in-memory RunHeaderStore.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeMemoryRunHeaders = MemoryRunHeaderStore.make
/** A scripted ModelProvider for tests and the demo: answers from a script, records every call. */
export * as ScriptedModelProvider from "./Testing/ScriptedModelProvider.js"
export * as ContinuationFailpoints from "./Services/ContinuationFailpoints.js"
/** The kill points of settling an operation (docs/spec/05-reconciliation.md): after a re-execution or an observation, after a bundle commits. */
export * as RecoveryFailpoints from "./Services/RecoveryFailpoints.js"
/** A Tracer that writes every ended span and span event as a line (for canary and observability tests). */
export * as CapturingTracer from "./Testing/CapturingTracer.js"

// ---- A ledger that survives a simulated crash ---------------------------------------------------------------------

/**
 * An in-memory ledger (events and run headers) that outlives the program using it: build it once, run the host with
 * `ledger.layer` until it "crashes" (see `crashAt`), then provide `ledger.layer` again to what runs after the restart
 * (startup repair, the plan, a continuation). Every build of the layer reopens the same committed state; what the
 * crashed program had not committed is not there, as after a real crash.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryLedger {
  /** The ledger's RuntimeEventStore (shared by every build of `layer`). */
  readonly events: RuntimeEventStoreShape
  /** The ledger's RunHeaderStore (shared by every build of `layer`). */
  readonly headers: RunHeaderStoreShape
  /** Both stores over this ledger, as a layer: each use "reopens" the same state. */
  readonly layer: Layer.Layer<RuntimeEventStore | RunHeaderStore>
}

/**
 * Builds an empty in-memory ledger that keeps its state across simulated crashes (see `MemoryLedger`).
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeLedger: Effect.Effect<MemoryLedger> = Effect.gen(function*() {
  const events = yield* MemoryRuntimeEventStore.make
  const headers = yield* MemoryRunHeaderStore.make
  return {
    events,
    headers,
    layer: Layer.merge(Layer.succeed(RuntimeEventStore, events), Layer.succeed(RunHeaderStore, headers))
  }
})

/**
 * Crashes the program at a tool boundary (docs/spec/03-tool-boundary.md): the fiber is interrupted there, so nothing after it runs and
 * nothing more is committed, as when the process is killed. Provide it to the host's tool call; `isCrash` tells the
 * exit apart. (`inside_t2` on the memory store: T2 is not applied.)
 *
 * @since 0.1.0
 * @category entry points
 */
export const crashAt = (boundary: FailpointsModule.ToolBoundary): Layer.Layer<FailpointsModule.Failpoints> =>
  FailpointsModule.layerAt(boundary, () => Effect.interrupt)

/**
 * Crashes a continuation at one of its five points (docs/spec/04-continuation.md), the way `crashAt` crashes a tool call.
 *
 * @since 0.1.0
 * @category entry points
 */
export const crashAtContinuation = (
  point: ContinuationFailpointsModule.ContinuationPoint
): Layer.Layer<ContinuationFailpointsModule.ContinuationFailpoints> =>
  ContinuationFailpointsModule.layerAt(point, () => Effect.interrupt)

/**
 * Whether a program's exit is a simulated crash (`crashAt`, `crashAtContinuation`): interrupted, nothing else.
 *
 * @since 0.1.0
 * @category entry points
 */
export const isCrash = (exit: Exit.Exit<unknown, unknown>): boolean => Exit.isInterrupted(exit)

// ---- Managed runs ------------------------------------------------------------------------------------------------

/**
 * Options of `startManagedRun`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ManagedRunOptions {
  /** The workspace identity the run's header records (from `WorkspaceIdentity.ensure`). */
  readonly workspaceId: string
  /** The user's message that opens the turn. */
  readonly prompt: string
}

/**
 * Opens a managed run as a host does (docs/spec/04-continuation.md): creates its header (`created`), commits `RunOpened` declaring
 * `t1_after_preflight_v1` and the user's message, then sets the header `running`. Returns the run's EventBuilder
 * (ids from `EventBuilder.idsFor(name)`, timestamps from the Clock) for the model's calls and responses.
 *
 * @since 0.1.0
 * @category entry points
 */
export const startManagedRun = (name: string, options: ManagedRunOptions) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const ts = yield* Clock.currentTimeMillis
    const b = EventBuilderModule.make(name, ts)
    const opened = b.opened("t1_after_preflight_v1")
    yield* headers.create(
      new RunHeader({
        runId: b.runId,
        sessionId: opened.sessionId,
        invocationId: opened.invocationId,
        turnId: opened.turnId,
        status: "created",
        workspaceId: options.workspaceId,
        createdAt: ts,
        updatedAt: ts
      })
    )
    yield* events.append(b.runId, [opened, b.user(options.prompt)])
    yield* headers.setStatus(b.runId, "running", { at: ts })
    return b
  })

// ---- The host's services, in memory ------------------------------------------------------------------------------

/**
 * The default folder of `makeWorkspace`: it exists in the in-memory FileSystem, nowhere on disk.
 *
 * @since 0.1.0
 * @category constants
 */
export const WORKSPACE = "/workspace"

/**
 * An in-memory FileSystem (the crash-consistent one) holding the folder `workspace` (default `/workspace`), for the
 * programs that read or write files of a workspace: its identity marker, the owner lock's existence check.
 *
 * @since 0.1.0
 * @category entry points
 */
export const makeWorkspace = (workspace: string = WORKSPACE): CrashConsistentFileSystemModule.CrashConsistentFileSystem =>
  CrashConsistentFileSystemModule.make({ directories: [workspace] })

/**
 * The WorkspaceOwner (docs/spec/04-continuation.md's owner lock) held in memory: shared and exclusive as on disk, within this process. The
 * memory stores keep no durable owner epoch, so it does not fence (docs/stores.md "Fencing" is the stores' on disk).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWorkspaceOwner: Layer.Layer<WorkspaceOwner, never, FileSystem.FileSystem> = NodeWorkspaceOwner.layerUnfenced.pipe(
  Layer.provide(TestWorkspaceLockModule.layer)
)

/**
 * The ContinuationSafetyInspector reporting fixed host facts: the tool catalog and whether background work is
 * settled (the workspace identity is read from the FileSystem's marker, as in production).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSafetyInspector = (
  toolCatalog: ReadonlyArray<string>,
  backgroundSettled: boolean = true
): Layer.Layer<ContinuationSafetyInspector, never, FileSystem.FileSystem> =>
  NodeContinuationSafetyInspector.layer(NodeContinuationSafetyInspector.fixed(toolCatalog, backgroundSettled))

/**
 * Options of `layerHost`.
 *
 * @since 0.1.0
 * @category models
 */
export interface HostLayerOptions {
  /** The ledger (from `makeLedger`), kept by the test across crashes. */
  readonly ledger: MemoryLedger
  /** The in-memory workspace (from `makeWorkspace`), kept by the test across crashes. */
  readonly workspace: CrashConsistentFileSystemModule.CrashConsistentFileSystem
  /** The host's tool catalog, as the safety inspector reports it. */
  readonly tools: ReadonlyArray<string>
  /** Whether the host's background work is settled; default true. */
  readonly backgroundSettled?: boolean
}

/**
 * Everything a host's programs need, in memory: the ledger's stores, the FileSystem, the owner lock and the safety
 * inspector. Provide it again after a simulated crash: the ledger and the workspace's files are as they were.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHost = (
  options: HostLayerOptions
): Layer.Layer<RuntimeEventStore | RunHeaderStore | FileSystem.FileSystem | WorkspaceOwner | ContinuationSafetyInspector> =>
  Layer.mergeAll(
    options.ledger.layer,
    layerWorkspaceOwner,
    layerSafetyInspector(options.tools, options.backgroundSettled ?? true)
  ).pipe(Layer.provideMerge(options.workspace.layer))

/**
 * A fresh in-memory WorkspaceLock; see `TestWorkspaceLock` for one shared across layers.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWorkspaceLock = TestWorkspaceLockModule.layer
