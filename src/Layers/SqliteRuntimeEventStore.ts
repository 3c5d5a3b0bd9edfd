// The SQLite RuntimeEventStore (docs/stores.md), the canonical embedded store: `<workspace>/runtime.sqlite` in WAL
// mode; the shared SQL ledger core over the SQLite driver (internal/sqlLedger), each append one BEGIN IMMEDIATE.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { StoreReadFailed, WorkspaceNotFound } from "../Domain/Errors.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { RuntimeEventStoreShape } from "../Services/RuntimeEventStore.js"
import { open, type SqliteLedger } from "./internal/sqliteConnection.js"
import { makeSqlStore } from "./internal/sqlLedger/makeSqlStore.js"
import { sqliteDriver } from "./internal/sqlLedger/sqliteDriver.js"

/**
 * The ledger's file name inside a workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const FILE_NAME = "runtime.sqlite"

/**
 * Where the store lives, and whether it may write.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteStoreOptions {
  /** The workspace folder; a writer creates it (0700) when missing. */
  readonly workspace: string
  /** Open the existing file read-only: nothing is created, and appends fail with `StoreWriteFailed`. */
  readonly readOnly?: boolean
}

/**
 * Builds the store over an opened (or newly created) `runtime.sqlite` in the workspace.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (
  options: SqliteStoreOptions
): Effect.Effect<RuntimeEventStoreShape, WorkspaceNotFound | StoreReadFailed, Scope.Scope | FileSystem.FileSystem> =>
  Effect.map(
    open({ workspace: options.workspace, fileName: FILE_NAME, readOnly: options.readOnly === true }),
    fromLedger
  )

/**
 * The store over `runtime.sqlite` in the workspace, closed with the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: SqliteStoreOptions
): Layer.Layer<RuntimeEventStore, WorkspaceNotFound | StoreReadFailed, FileSystem.FileSystem> =>
  Layer.scoped(RuntimeEventStore, make(options))

const fromLedger = (ledger: SqliteLedger): RuntimeEventStoreShape => makeSqlStore(sqliteDriver(ledger))
