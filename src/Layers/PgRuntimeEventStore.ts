// The PostgreSQL RuntimeEventStore (docs/stores.md): one workspace's ledger in its own schema of a shared database,
// appended by hosts on several machines; the shared SQL ledger core over the PostgreSQL driver (internal/sqlLedger).
import * as Config from "effect/Config"
import type { ConfigError } from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import type { StoreReadFailed, WorkspaceNotFound } from "../Domain/Errors.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../Services/RuntimeEventStore.js"
import { open, type PgLedger, type PgOpenOptions } from "./internal/pgConnection.js"
import { makeSqlStore } from "./internal/sqlLedger/makeSqlStore.js"
import { pgDriver } from "./internal/sqlLedger/pgDriver.js"

/**
 * Where the store lives: the server (a `Redacted` URL) and the workspace's name inside the database.
 *
 * @since 0.1.0
 * @category models
 */
export type PgStoreOptions = PgOpenOptions

/**
 * Builds the store over a workspace of a PostgreSQL database (created unless read-only); the pool closes with the scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (
  options: PgStoreOptions
): Effect.Effect<RuntimeEventStoreShape, WorkspaceNotFound | StoreReadFailed, Scope.Scope> =>
  Effect.map(open(options), fromLedger)

/**
 * The store over a PostgreSQL workspace, closed with the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: PgStoreOptions): Layer.Layer<RuntimeEventStore, WorkspaceNotFound | StoreReadFailed> =>
  Layer.scoped(RuntimeEventStore, make(options))

/**
 * The URL from `RUNTIME_RESUME_PG_URL` (a `Redacted` value: never printed).
 *
 * @since 0.1.0
 * @category layers
 */
export const urlConfig: Config.Config<Redacted.Redacted<string>> = Config.redacted("RUNTIME_RESUME_PG_URL")

/**
 * The store configured by `RUNTIME_RESUME_PG_URL`, over the named workspace.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  workspace: string
): Layer.Layer<RuntimeEventStore, WorkspaceNotFound | StoreReadFailed | ConfigError> =>
  Layer.scoped(RuntimeEventStore, Effect.flatMap(urlConfig, (url) => make({ url, workspace })))

/**
 * The store over an opened workspace (shared with the run-header store and the owner lock of one host).
 *
 * @since 0.1.0
 * @category layers
 */
export const fromLedger = (ledger: PgLedger): RuntimeEventStoreShape => makeSqlStore(pgDriver(ledger))
