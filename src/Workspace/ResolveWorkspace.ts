// `runtime-resume resolve` and `reconcile` over a workspace (docs/spec/05-reconciliation.md, docs/spec/06-cli.md): open its ledger and run headers as a
// writer under the owner lock — shared for a person's decision, exclusive for reconcile — and return data.
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { RunHeaderCorruption } from "../Domain/ContinuationErrors.js"
import type { RunNotFound, StoreReadFailed, WorkspaceAmbiguous } from "../Domain/Errors.js"
import type { ReconcileReport } from "../Domain/Settlement.js"
import type { OpenError, PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import type { NoFollowFileSystem } from "../Services/NoFollowFileSystem.js"
import type { Operator } from "../Services/Operator.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import { type OwnerAcquireOptions, type OwnerLockError, WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import * as Reconcile from "../Programs/Reconcile.js"
import * as Resolve from "../Programs/Resolve.js"
import * as WorkspaceBackend from "./WorkspaceBackend.js"
import type { BackendStore, WorkspaceBackendService } from "./WorkspaceBackend.js"

/**
 * Runs `effect` holding the workspace's owner lock shared (a running host may hold it shared too).
 *
 * @since 0.1.0
 * @category workspace
 */
export const holdShared = <A, E, R>(
  workspace: string,
  effect: Effect.Effect<A, E, R>,
  options?: OwnerAcquireOptions
): Effect.Effect<A, E | OwnerLockError, WorkspaceOwner | Exclude<R, Scope.Scope>> =>
  Effect.scoped(Effect.flatMap(WorkspaceOwner, (owner) => Effect.zipRight(owner.acquire(workspace, "shared", options), effect)))

/**
 * Which workspace and ledger `resolveWorkspace` records the decision in, and the decision.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolveWorkspaceOptions extends Resolve.ResolveOptions {
  readonly workspace: string
  readonly store?: PersistentStore
}

/**
 * Why a workspace could not be opened for a decision or a reconcile (nothing was changed).
 *
 * @since 0.1.0
 * @category models
 */
export type WorkspaceOpenError = OpenError | OwnerLockError | RunHeaderCorruption | WorkspaceAmbiguous | StoreReadFailed

/**
 * How long a decision waits, on a JSONL workspace, for the append lock (`runtime-events.append.lock`) while another
 * writer holds it (a host's write, or two people resolving at once): the owner wait, 2 s (docs/spec/04-continuation.md), then
 * `WorkspaceLocked` naming the time. A decision takes no writer lock: it shares the ledger with a running host.
 *
 * @since 0.1.0
 * @category constants
 */
export const RESOLVE_WRITER_WAIT_MS = 2_000

/**
 * Records a person's decision over a workspace's backend (SQLite, JSONL or PostgreSQL alike): takes the owner lock
 * shared (a running host keeps running), opens the ledger as a writer (on JSONL a shared writer beside a running
 * host, waiting at most `RESOLVE_WRITER_WAIT_MS` for the append lock) and runs `Resolve.resolve`.
 *
 * @since 0.1.0
 * @category workspace
 */
export const resolveOn = (backend: WorkspaceBackendService, options: Resolve.ResolveOptions) =>
  holdShared(
    backend.workspace,
    backend.stores(Resolve.resolve(options), { lockTimeoutMs: RESOLVE_WRITER_WAIT_MS, shared: true })
  ).pipe(
    Effect.provideService(WorkspaceOwner, backend.owner),
    Effect.map((outcome) => ({ ...outcome, store: backend.store })),
    Effect.withSpan("ResolveWorkspace.resolve")
  )

/**
 * Records a person's decision in a workspace folder: finds its ledger as a reader would (a folder without one is
 * `WorkspaceNotFound`, left as it was), then `resolveOn`.
 *
 * @since 0.1.0
 * @category workspace
 */
export const resolveWorkspace = (
  options: ResolveWorkspaceOptions
): Effect.Effect<
  Resolve.ResolveOutcome & { readonly store: PersistentStore },
  Resolve.ResolveError | WorkspaceOpenError,
  FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner | Operator
> =>
  Effect.scoped(Effect.gen(function*() {
    const backend = yield* WorkspaceBackend.make({ workspace: options.workspace, store: options.store, readOnly: false })
    const outcome = yield* resolveOn(backend, options)
    return { ...outcome, store: backend.store as PersistentStore }
  }))

/**
 * Which workspace `reconcileWorkspace` reconciles, and how.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReconcileWorkspaceOptions {
  readonly workspace: string
  readonly store?: PersistentStore
  readonly runId?: string
  /** Observe under this root instead of the one each operation's evidence recorded (a moved project). */
  readonly root?: string
}

/**
 * Reconciles a workspace's backend (SQLite, JSONL or PostgreSQL alike) without host tools (the CLI): under its
 * exclusive owner lock (at most 2 s, else `WorkspaceLocked`, nothing changed), the ledger and run headers opened as a
 * writer, the built-in file-write observation on this machine for operations whose evidence names
 * `runtime-resume/file-write@1`; every other operation is reported and left untouched.
 *
 * @since 0.1.0
 * @category workspace
 */
export const reconcileOn = (
  backend: WorkspaceBackendService,
  options: Omit<ReconcileWorkspaceOptions, "store">
): Effect.Effect<
  { readonly store: BackendStore; readonly report: ReconcileReport },
  WorkspaceOpenError | RunNotFound,
  FileSystem.FileSystem | Path.Path | NoFollowFileSystem
> =>
  Effect.gen(function*() {
    const fileWrite = yield* Reconcile.builtinFileWrite(options.root !== undefined ? { root: options.root } : {})
    const report = yield* backend.owner.withExclusive(
      backend.workspace,
      backend.stores(Reconcile.reconcile({ fileWrite, ...(options.runId !== undefined ? { runId: options.runId } : {}) }))
    )
    return { store: backend.store, report }
  }).pipe(Effect.withSpan("ResolveWorkspace.reconcile"))

/**
 * `reconcileOn` over a workspace folder, its ledger found as a reader would (nothing is created).
 *
 * @since 0.1.0
 * @category workspace
 */
export const reconcileWorkspace = (
  options: ReconcileWorkspaceOptions
): Effect.Effect<
  { readonly store: PersistentStore; readonly report: ReconcileReport },
  WorkspaceOpenError | RunNotFound,
  FileSystem.FileSystem | Path.Path | NoFollowFileSystem | WorkspaceLock | WorkspaceOwner
> =>
  Effect.scoped(Effect.gen(function*() {
    const backend = yield* WorkspaceBackend.make({ workspace: options.workspace, store: options.store, readOnly: false })
    const done = yield* reconcileOn(backend, options)
    return { store: backend.store as PersistentStore, report: done.report }
  }))
