// One workspace backend for every verb (docs/stores.md, docs/recovery.md): the ledger, the run headers, the owner lock
// and the continuation-safety inspector of a SQLite or JSONL folder, or of a workspace inside PostgreSQL, alike.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type { RunHeaderCorruption } from "../Domain/ContinuationErrors.js"
import { StoreReadFailed, type WorkspaceAmbiguous, type WorkspaceNotFound } from "../Domain/Errors.js"
import * as JsonlRunHeaderStore from "../Layers/JsonlRunHeaderStore.js"
import * as NodeContinuationSafetyInspector from "../Layers/NodeContinuationSafetyInspector.js"
import type { HostSupplied } from "../Layers/NodeContinuationSafetyInspector.js"
import { detectStore, layerStore, type OpenError, type PersistentStore, resolveStore } from "../Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceOwner from "../Layers/NodeWorkspaceOwner.js"
import * as SqliteRunHeaderStore from "../Layers/SqliteRunHeaderStore.js"
import type { ContinuationSafetyInspector } from "../Services/ContinuationSafetyInspector.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import { ownerLockPath, WorkspaceOwner, type WorkspaceOwnerService } from "../Services/WorkspaceOwner.js"
import * as WorkspaceIdentity from "../Services/WorkspaceIdentity.js"
import { lockedBySomeone } from "./internal/ownerProbe.js"

/**
 * The header store of a workspace's kind, beside its ledger.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHeaders = (
  store: PersistentStore,
  options: { readonly workspace: string; readonly readOnly: boolean }
): Layer.Layer<RunHeaderStore, StoreReadFailed | RunHeaderCorruption | OpenError, FileSystem.FileSystem> =>
  store === "sqlite" ? SqliteRunHeaderStore.layer(options) : JsonlRunHeaderStore.layer(options)

/**
 * The ledger and the run headers of a workspace's kind, both opened the same way (read-only or as a writer).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWorkspaceStores = (
  store: PersistentStore,
  options: {
    readonly workspace: string
    readonly readOnly: boolean
    readonly lockTimeoutMs?: number
    readonly shared?: boolean
  }
): Layer.Layer<
  RuntimeEventStore | RunHeaderStore,
  StoreReadFailed | RunHeaderCorruption | OpenError,
  FileSystem.FileSystem | WorkspaceLock
> => Layer.merge(layerStore(store, options), layerHeaders(store, { workspace: options.workspace, readOnly: options.readOnly }))

/**
 * The stores a workspace can live in: a folder's SQLite or JSONL ledger, or a workspace inside PostgreSQL.
 *
 * @since 0.1.0
 * @category models
 */
export type BackendStore = PersistentStore | "postgres"

/**
 * Which workspace to open, and how.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceBackendOptions {
  /** The folder, or for `postgres` the workspace's name inside the database. */
  readonly workspace: string
  /** The store asked for (`--store`); by default the one ledger the folder holds. */
  readonly store?: BackendStore | undefined
  /** The server of `postgres` (`--pg-url`); by default `RUNTIME_RESUME_PG_URL`. Never printed. */
  readonly pgUrl?: string | undefined
  /** Open the ledger and the run headers read-only: nothing is created. */
  readonly readOnly: boolean
  /**
   * A writer that may create the workspace (`import`): a folder gets the embedded default store (SQLite), a
   * PostgreSQL workspace its schema. Otherwise a missing workspace is `WorkspaceNotFound`, and nothing is created.
   */
  readonly create?: boolean | undefined
}

/**
 * How a folder's ledger is opened for one program (ignored on PostgreSQL, whose pool is already open).
 *
 * @since 0.1.0
 * @category models
 */
export interface LedgerOptions {
  /** The writer is `import`: on JSONL it completes an interrupted import. */
  readonly importing?: boolean
  /** JSONL: how long a writer waits for the writer lock (default 0). */
  readonly lockTimeoutMs?: number
  /** JSONL: a writer sharing the ledger with a running host (a person's decision; `JsonlStoreOptions.shared`). */
  readonly shared?: boolean
}

/**
 * Why a program's ledger or run headers could not be opened.
 *
 * @since 0.1.0
 * @category models
 */
export type StoresError = OpenError | RunHeaderCorruption | StoreReadFailed

/**
 * Why a workspace could not be found or reached (nothing was opened or created).
 *
 * @since 0.1.0
 * @category models
 */
export type BackendError = WorkspaceNotFound | WorkspaceAmbiguous | StoreReadFailed

/**
 * One workspace, whatever its store: its owner lock now, its ledger and run headers where a program asks for them.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceBackendService {
  readonly workspace: string
  /** The store it lives in (detected for a folder when none was asked for). */
  readonly store: BackendStore
  /** The owner lock: the process's own (`runtime-owner.lock`) for a folder, the advisory lock on PostgreSQL. */
  readonly owner: WorkspaceOwnerService
  /**
   * Runs `effect` over the ledger. A folder's ledger is opened around it (so a lock taken first is held while it
   * opens) and closed after; PostgreSQL's is the open pool's.
   */
  readonly ledger: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    options?: LedgerOptions
  ) => Effect.Effect<A, E | OpenError, Exclude<R, RuntimeEventStore>>
  /** The ledger and the run headers as a layer (a folder's opened when it is built: the ledger first, then the headers). */
  readonly storesLayer: (options?: LedgerOptions) => Layer.Layer<RuntimeEventStore | RunHeaderStore, StoresError>
  /** Runs `effect` over the ledger and the run headers (`storesLayer`, around it). */
  readonly stores: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    options?: LedgerOptions
  ) => Effect.Effect<A, E | StoresError, Exclude<R, RuntimeEventStore | RunHeaderStore>>
  /** Runs `effect` over the run headers alone. */
  readonly headers: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoresError, Exclude<R, RunHeaderStore>>
  /**
   * The workspace's identity: PostgreSQL's identity row; a folder's `workspace-id` marker, created when missing (so
   * only a writer asks for it, after its checks).
   */
  readonly workspaceId: Effect.Effect<string, StoreReadFailed | WorkspaceIdentity.WorkspaceIdentityError>
  /** The continuation-safety inspector over this workspace's identity and the host's facts. */
  readonly inspector: (host: HostSupplied) => Layer.Layer<ContinuationSafetyInspector>
  /**
   * Whether some process holds the owner lock (a live host holds it shared): one exclusive attempt, no wait, released
   * at once. A folder is only tried when its lock file exists (nothing is created); any failure reads as `false`.
   */
  readonly ownerLive: Effect.Effect<boolean>
}

/**
 * The workspace backend of the context (`layer`).
 *
 * @since 0.1.0
 * @category tags
 */
export class WorkspaceBackend extends Context.Tag("runtime-resume/WorkspaceBackend")<
  WorkspaceBackend,
  WorkspaceBackendService
>() {}

/**
 * The server of `postgres`: `pgUrl`, else `RUNTIME_RESUME_PG_URL`, as a `Redacted` value from here on.
 *
 * @since 0.1.0
 * @category workspace
 */
export const pgServerUrl = (pgUrl: string | undefined): Effect.Effect<Redacted.Redacted<string>, StoreReadFailed> =>
  pgUrl !== undefined
    ? Effect.succeed(Redacted.make(pgUrl))
    : Config.redacted("RUNTIME_RESUME_PG_URL").pipe(
      Effect.mapError(() =>
        new StoreReadFailed({
          path: "postgres",
          cause: "no server given",
          message: "--store postgres needs the server: give --pg-url postgres://user:password@host:port/db, " +
            "or set RUNTIME_RESUME_PG_URL"
        })
      )
    )

/**
 * Which store the workspace lives in, opening nothing: `postgres` when asked for; for a folder, what a reader
 * finds (`detectStore`), or for a writer that may create it, `resolveStore`'s choice.
 *
 * @since 0.1.0
 * @category workspace
 */
export const storeOf = (
  options: WorkspaceBackendOptions
): Effect.Effect<BackendStore, BackendError, FileSystem.FileSystem> =>
  options.store === "postgres" ? Effect.succeed("postgres" as const) : folderStoreOf(options.store, options)

// A folder's store: what a reader finds, or for a writer that may create the workspace, `resolveStore`'s choice.
const folderStoreOf = (store: PersistentStore | undefined, options: WorkspaceBackendOptions) =>
  options.create === true && !options.readOnly
    ? resolveStore({ workspace: options.workspace, readOnly: false, ...(store !== undefined ? { store } : {}) })
    : detectStore(options.workspace, store)

// A workspace inside PostgreSQL (internal/pgBackend.ts), its module loaded only when one is opened: a folder's
// verbs never load the PostgreSQL client. Without it installed (an optional peer), the open fails as unreachable.
const makePg = (options: WorkspaceBackendOptions): Effect.Effect<WorkspaceBackendService, BackendError, Scope.Scope> =>
  Effect.flatMap(
    Effect.tryPromise({
      try: () => import("./internal/pgBackend.js"),
      catch: (error) =>
        new StoreReadFailed({
          path: "postgres",
          cause: String(error),
          message: "--store postgres needs the PostgreSQL client, which could not be loaded: install @effect/sql-pg " +
            `and pg beside runtime-resume (npm install @effect/sql-pg pg), then rerun (${String(error)})`
        })
    }),
    (pg) => pg.makePg(options)
  )

// A folder's workspace: its ledger and run headers opened around each program, the owner lock of the context.
const makeFolder = (
  options: WorkspaceBackendOptions
): Effect.Effect<WorkspaceBackendService, BackendError, FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner> =>
  Effect.gen(function*() {
    const store = yield* folderStoreOf(options.store === "postgres" ? undefined : options.store, options)
    const owner = yield* WorkspaceOwner
    const context = yield* Effect.context<FileSystem.FileSystem | WorkspaceLock>()
    const fs = Context.get(context, FileSystem.FileSystem)
    const workspace = options.workspace
    const readOnly = options.readOnly
    const ledgerLayer = (ledger: LedgerOptions = {}) => layerStore(store, { workspace, readOnly, ...ledger })
    const headerLayer = layerHeaders(store, { workspace, readOnly })
    const within = <A, E, R, ROut, E2>(effect: Effect.Effect<A, E, R>, layer: Layer.Layer<ROut, E2, FileSystem.FileSystem | WorkspaceLock>) =>
      Effect.provide(effect, Layer.provide(layer, Layer.succeedContext(context)))
    // Whether a live host holds the lock: only tried when the lock file exists, with an owner of its own.
    const ownerLive = Effect.gen(function*() {
      const exists = yield* Effect.orElseSucceed(fs.exists(ownerLockPath(workspace)), () => false)
      if (!exists) return false
      return yield* Effect.provide(
        Effect.flatMap(WorkspaceOwner, (probe) => lockedBySomeone(probe, workspace)),
        NodeWorkspaceOwner.layerNode
      )
    })
    // The ledger first (a writer creates it), then the header store over the same folder.
    const storesLayer = (ledger?: LedgerOptions) =>
      headerLayer.pipe(Layer.provideMerge(ledgerLayer(ledger)), Layer.provide(Layer.succeedContext(context)))
    return {
      workspace,
      store,
      owner,
      ledger: (effect, ledger) => within(effect, ledgerLayer(ledger)),
      storesLayer,
      stores: (effect, ledger) => Effect.provide(effect, storesLayer(ledger)),
      headers: (effect) => within(effect, headerLayer),
      workspaceId: Effect.provideService(WorkspaceIdentity.ensure(workspace), FileSystem.FileSystem, fs),
      inspector: (host) => NodeContinuationSafetyInspector.layer(host).pipe(Layer.provide(Layer.succeed(FileSystem.FileSystem, fs))),
      ownerLive: Effect.orElseSucceed(ownerLive, () => false)
    } satisfies WorkspaceBackendService
  })

/**
 * Opens a workspace's backend, closed with the scope: for PostgreSQL its pool (the ledger, run headers and advisory
 * owner lock over it), for a folder the store it holds (found as `storeOf` says, creating nothing) and the owner lock
 * of the context; a folder's ledger and headers are opened by each program that asks (`ledger`, `stores`).
 *
 * @since 0.1.0
 * @category workspace
 */
export const make = (
  options: WorkspaceBackendOptions
): Effect.Effect<WorkspaceBackendService, BackendError, Scope.Scope | FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner> => {
  const opened: Effect.Effect<WorkspaceBackendService, BackendError, Scope.Scope | FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner> =
    options.store === "postgres" ? makePg(options) : makeFolder(options)
  return Effect.withSpan(opened, "WorkspaceBackend.make")
}

/**
 * One workspace's services, opened now and closed with the layer: its ledger and run headers (as `stores` opens them),
 * its owner lock, the continuation-safety inspector over the host's facts, and the backend itself (for a program that
 * must take the owner lock before the ledger is opened: `repairOn`, `reconcileOn`, `resolveOn`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: WorkspaceBackendOptions & { readonly host: HostSupplied; readonly ledger?: LedgerOptions }
): Layer.Layer<
  WorkspaceBackend | WorkspaceOwner | RuntimeEventStore | RunHeaderStore | ContinuationSafetyInspector,
  BackendError | StoresError,
  FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner
> =>
  Layer.unwrapScoped(Effect.map(make(options), (backend) =>
    Layer.mergeAll(
      Layer.succeedContext(Context.make(WorkspaceBackend, backend).pipe(Context.add(WorkspaceOwner, backend.owner))),
      backend.storesLayer(options.ledger),
      backend.inspector(options.host)
    )))
