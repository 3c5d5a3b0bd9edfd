// One host's view of a PostgreSQL workspace: the ledger, the run headers and the owner lock over one pool,
// configured by `RUNTIME_RESUME_PG_URL` (Redacted) and a workspace name; and the workspace's identity.
import type { ConfigError } from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { StoreReadFailed, WorkspaceNotFound } from "../Domain/Errors.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { OwnerLockWaitMs, WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import { open, type PgOpenOptions } from "./internal/pgConnection.js"
import * as PgRunHeaderStore from "./PgRunHeaderStore.js"
import * as PgRuntimeEventStore from "./PgRuntimeEventStore.js"
import * as PgWorkspaceOwner from "./PgWorkspaceOwner.js"

/**
 * The services of one workspace on PostgreSQL, and its identity.
 *
 * @since 0.1.0
 * @category models
 */
export interface PgWorkspace {
  readonly store: Context.Tag.Service<RuntimeEventStore>
  readonly headers: Context.Tag.Service<RunHeaderStore>
  readonly owner: Context.Tag.Service<WorkspaceOwner>
  /** The workspace's UUID v4 (made by the server when the workspace was created, never changed). */
  readonly workspaceId: string
  /** Reads the identity row again (what a continuation's inspector and its revalidation look at). */
  readonly readWorkspaceId: Effect.Effect<string, StoreReadFailed>
  /** Where it is, without the password: `postgres://user@host:port/db#workspace`. */
  readonly location: string
}

/**
 * Opens (creating unless read-only) the workspace over one pool; closed with the scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (options: PgOpenOptions): Effect.Effect<PgWorkspace, WorkspaceNotFound | StoreReadFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const waitMs = yield* OwnerLockWaitMs
    const ledger = yield* open(options)
    const workspaceId = ledger.uninitialised ? "" : yield* PgWorkspaceOwner.workspaceId(ledger)
    return {
      store: PgRuntimeEventStore.fromLedger(ledger),
      headers: PgRunHeaderStore.fromLedger(ledger),
      owner: PgWorkspaceOwner.fromLedger(ledger, waitMs),
      workspaceId,
      readWorkspaceId: PgWorkspaceOwner.workspaceId(ledger),
      location: ledger.location
    }
  })

/**
 * The three services of a PostgreSQL workspace over one pool.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PgOpenOptions
): Layer.Layer<RuntimeEventStore | RunHeaderStore | WorkspaceOwner, WorkspaceNotFound | StoreReadFailed> =>
  Layer.scopedContext(Effect.map(make(options), (ws) =>
    Context.make(RuntimeEventStore, ws.store).pipe(
      Context.add(RunHeaderStore, ws.headers),
      Context.add(WorkspaceOwner, ws.owner)
    )))

/**
 * The URL setting, `RUNTIME_RESUME_PG_URL`, read as a `Redacted` value (the one `PgRuntimeEventStore.urlConfig`).
 *
 * @since 0.1.0
 * @category layers
 */
export const urlConfig = PgRuntimeEventStore.urlConfig

/**
 * The three services, the server from `RUNTIME_RESUME_PG_URL`, over the named workspace.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  workspace: string
): Layer.Layer<RuntimeEventStore | RunHeaderStore | WorkspaceOwner, WorkspaceNotFound | StoreReadFailed | ConfigError> =>
  Layer.unwrapEffect(Effect.map(urlConfig, (url) => layer({ url, workspace })))
