// The verbs' way to their workspace (Workspace/WorkspaceBackend.ts): the backend of the `--store`/`--pg-url` given,
// recording the store it opened in the slot a failure document names, for SQLite, JSONL and PostgreSQL alike.
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as WorkspaceBackend from "../../Workspace/WorkspaceBackend.js"
import type { StoreSlot } from "./common.js"

/**
 * How a verb opens its workspace: read-only, as a writer of an existing one, or as a writer that may create it.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenOptions {
  readonly workspace: string
  readonly readOnly: boolean
  /** A writer that may create the workspace (`import`). */
  readonly create?: boolean
}

/**
 * The backend options of a slot: its store and server, and how to open.
 *
 * @since 0.1.0
 * @category cli
 */
export const backendOptions = (slot: StoreSlot, options: OpenOptions): WorkspaceBackend.WorkspaceBackendOptions => ({
  workspace: options.workspace,
  store: slot.store ?? undefined,
  pgUrl: Option.getOrUndefined(slot.pgUrl),
  readOnly: options.readOnly,
  create: options.create
})

/**
 * Which store the slot's workspace lives in (recorded in the slot), opening nothing (`WorkspaceBackend.storeOf`).
 *
 * @since 0.1.0
 * @category cli
 */
export const locate = (slot: StoreSlot, options: OpenOptions) =>
  Effect.tap(WorkspaceBackend.storeOf(backendOptions(slot, options)), (store) =>
    Effect.sync(() => {
      slot.store = store
    }))

/**
 * Runs `use` over the slot's workspace backend (the store it opened recorded in the slot), closed after it.
 *
 * @since 0.1.0
 * @category cli
 */
export const withBackend = <A, E, R>(
  slot: StoreSlot,
  options: OpenOptions,
  use: (backend: WorkspaceBackend.WorkspaceBackendService) => Effect.Effect<A, E, R>
) =>
  Effect.scoped(Effect.gen(function*() {
    const backend = yield* WorkspaceBackend.make(backendOptions(slot, options))
    slot.store = backend.store
    return yield* use(backend)
  }))

/**
 * Runs `use` over the workspace's ledger: a reader finds the one the workspace holds; a writer (`import`) may create
 * it (`WorkspaceBackend.storeOf`). `--help` and `--version` never load this module (Main imports a verb when it runs).
 *
 * @since 0.1.0
 * @category cli
 */
export const withStore = <A, E, R>(
  slot: StoreSlot,
  options: { readonly workspace: string; readonly readOnly: boolean; readonly importing?: boolean },
  use: Effect.Effect<A, E, R>
) =>
  withBackend(
    slot,
    { workspace: options.workspace, readOnly: options.readOnly, create: !options.readOnly },
    (backend) => backend.ledger(use, options.importing === true ? { importing: true } : {})
  )

/**
 * Runs `use` over the workspace's ledger and run header store (as `withStore` opens them), handing it the effect
 * that reads the workspace's identity (docs/wire-format.md, "Export file"): on PostgreSQL its identity row, on
 * SQLite and JSONL its `workspace-id` marker, created when missing (only a writer reads it, after its checks).
 *
 * @since 0.1.0
 * @category cli
 */
export const withLedgerAndHeaders = <A, E, R>(
  slot: StoreSlot,
  options: { readonly workspace: string; readonly readOnly: boolean; readonly importing?: boolean },
  use: (workspaceId: Effect.Effect<string, { readonly _tag: string; readonly message: string }>) => Effect.Effect<A, E, R>
) =>
  withBackend(
    slot,
    { workspace: options.workspace, readOnly: options.readOnly, create: !options.readOnly },
    (backend) => backend.stores(use(backend.workspaceId), options.importing === true ? { importing: true } : {})
  )
