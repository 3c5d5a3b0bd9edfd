// `runtime-resume resolve` and `reconcile` over a workspace (spec 05, spec 06): open its ledger and run headers as a
// writer under the owner lock — shared for a person's decision, exclusive for reconcile — and return data.
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { RunHeaderCorruption } from "../Domain/ContinuationErrors.js"
import type { RunNotFound, StoreReadFailed, WorkspaceAmbiguous } from "../Domain/Errors.js"
import type { ReconcileReport } from "../Domain/Settlement.js"
import { detectStore, type OpenError, type PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import type { NoFollowFileSystem } from "../Services/NoFollowFileSystem.js"
import type { Operator } from "../Services/Operator.js"
import type { RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import { type OwnerAcquireOptions, type OwnerLockError, WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import * as Reconcile from "../Programs/Reconcile.js"
import { layerWorkspaceStores } from "./RepairWorkspace.js"
import * as Resolve from "../Programs/Resolve.js"
import type { BackendStore, WorkspaceBackendService } from "./WorkspaceBackend.js"

/** Runs `effect` holding the workspace's owner lock shared (a running host may hold it shared too). */
export const holdShared = <A, E, R>(
  workspace: string,
  effect: Effect.Effect<A, E, R>,
  options?: OwnerAcquireOptions
): Effect.Effect<A, E | OwnerLockError, WorkspaceOwner | Exclude<R, Scope.Scope>> =>
  Effect.scoped(Effect.flatMap(WorkspaceOwner, (owner) => Effect.zipRight(owner.acquire(workspace, "shared", options), effect)))

/** Which workspace and ledger `resolveWorkspace` records the decision in, and the decision. */
export interface ResolveWorkspaceOptions extends Resolve.ResolveOptions {
  readonly workspace: string
  readonly store?: PersistentStore
}

/** Why a workspace could not be opened for a decision or a reconcile (nothing was changed). */
export type WorkspaceOpenError = OpenError | OwnerLockError | RunHeaderCorruption | WorkspaceAmbiguous | StoreReadFailed

/**
 * How long a decision waits for a JSONL workspace's writer lock (`runtime-events.lock`) while another writer holds it
 * (two people resolving at once): the owner wait, 2 s (spec 04), then `WorkspaceLocked` naming the time and the holder.
 */
export const RESOLVE_WRITER_WAIT_MS = 2_000

/**
 * Records a person's decision in a workspace: finds its ledger as a reader would (a folder without one is
 * `WorkspaceNotFound`, left as it was), takes the owner lock shared (a running host keeps running), opens the ledger
 * as a writer (on JSONL waiting at most `RESOLVE_WRITER_WAIT_MS` for the writer lock) and runs `Resolve.resolve`.
 */
export const resolveWorkspace = (
  options: ResolveWorkspaceOptions
): Effect.Effect<
  Resolve.ResolveOutcome & { readonly store: PersistentStore },
  Resolve.ResolveError | WorkspaceOpenError,
  FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner | Operator
> =>
  Effect.gen(function*() {
    const store = yield* detectStore(options.workspace, options.store)
    const outcome = yield* holdShared(
      options.workspace,
      Resolve.resolve(options).pipe(Effect.provide(layerWorkspaceStores(store, {
        workspace: options.workspace,
        readOnly: false,
        lockTimeoutMs: RESOLVE_WRITER_WAIT_MS
      })))
    )
    return { ...outcome, store }
  }).pipe(Effect.withSpan("ResolveWorkspace.resolve"))

/** Which workspace `reconcileWorkspace` reconciles, and how. */
export interface ReconcileWorkspaceOptions {
  readonly workspace: string
  readonly store?: PersistentStore
  readonly runId?: string
  /** Observe under this root instead of the one each operation's evidence recorded (a moved project). */
  readonly root?: string
}

/**
 * Reconciles a workspace without host tools (the CLI): under the exclusive owner lock (at most 2 s, else
 * `WorkspaceLocked`, nothing changed), the built-in file-write observation for operations whose evidence names
 * `runtime-resume/file-write@1`; every other operation is reported and left untouched.
 */
export const reconcileWorkspace = (
  options: ReconcileWorkspaceOptions
): Effect.Effect<
  { readonly store: PersistentStore; readonly report: ReconcileReport },
  WorkspaceOpenError | RunNotFound,
  FileSystem.FileSystem | Path.Path | NoFollowFileSystem | WorkspaceLock | WorkspaceOwner
> =>
  Effect.gen(function*() {
    const store = yield* detectStore(options.workspace, options.store)
    const owner = yield* WorkspaceOwner
    const fileWrite = yield* Reconcile.builtinFileWrite(options.root !== undefined ? { root: options.root } : {})
    const report = yield* owner.withExclusive(
      options.workspace,
      Reconcile.reconcile({ fileWrite, ...(options.runId !== undefined ? { runId: options.runId } : {}) }).pipe(
        Effect.provide(layerWorkspaceStores(store, { workspace: options.workspace, readOnly: false }))
      )
    )
    return { store, report }
  }).pipe(Effect.withSpan("ResolveWorkspace.reconcile"))

/**
 * Reconciles over the ledger and run headers of the context (a PostgreSQL workspace, say) without host tools: under
 * the exclusive owner lock of the context, the built-in file-write observation on this machine.
 */
export const reconcileOver = (
  options: Omit<ReconcileWorkspaceOptions, "store">
): Effect.Effect<
  ReconcileReport,
  WorkspaceOpenError | RunNotFound,
  FileSystem.FileSystem | Path.Path | NoFollowFileSystem | WorkspaceOwner | RuntimeEventStore | RunHeaderStore
> =>
  Effect.gen(function*() {
    const owner = yield* WorkspaceOwner
    const fileWrite = yield* Reconcile.builtinFileWrite(options.root !== undefined ? { root: options.root } : {})
    return yield* owner.withExclusive(
      options.workspace,
      Reconcile.reconcile({ fileWrite, ...(options.runId !== undefined ? { runId: options.runId } : {}) })
    )
  }).pipe(Effect.withSpan("ResolveWorkspace.reconcileOver"))

/**
 * `resolveWorkspace` over a workspace's backend (SQLite, JSONL or PostgreSQL alike): the owner lock held shared (a
 * running host keeps running), the ledger opened as a writer (a folder's JSONL waiting at most
 * `RESOLVE_WRITER_WAIT_MS` for the writer lock), then `Resolve.resolve`.
 */
export const resolveOn = (backend: WorkspaceBackendService, options: Resolve.ResolveOptions) =>
  holdShared(backend.workspace, backend.stores(Resolve.resolve(options), { lockTimeoutMs: RESOLVE_WRITER_WAIT_MS })).pipe(
    Effect.provideService(WorkspaceOwner, backend.owner),
    Effect.map((outcome) => ({ ...outcome, store: backend.store })),
    Effect.withSpan("ResolveWorkspace.resolve")
  )

/**
 * `reconcileWorkspace` over a workspace's backend (SQLite, JSONL or PostgreSQL alike): under its exclusive owner lock,
 * the ledger and run headers opened as a writer, the built-in file-write observation on this machine.
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
