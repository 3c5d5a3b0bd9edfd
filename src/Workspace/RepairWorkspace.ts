// `runtime-resume repair` (spec 04 startup repair, spec 06): opens a workspace's ledger and run headers as a writer
// under the exclusive owner lock and runs `StartupRepair.repair`; it returns data and prints nothing.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { RunHeaderCorruption } from "../Domain/ContinuationErrors.js"
import { RepairReport } from "../Domain/RepairReport.js"
import type { LedgerCorruption, OwnershipLost, StoreReadFailed, StoreWriteFailed, WorkspaceAmbiguous } from "../Domain/Errors.js"
import * as JsonlRunHeaderStore from "../Layers/JsonlRunHeaderStore.js"
import { detectStore, layerStore, type OpenError, type PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import * as SqliteRunHeaderStore from "../Layers/SqliteRunHeaderStore.js"
import type { RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { DerivedRebuild, RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { RuntimeEventStore as RuntimeEventStoreTag } from "../Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import { type OwnerLockError, WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import * as StartupRepair from "../Programs/StartupRepair.js"
import * as WorkspaceIdentity from "../Services/WorkspaceIdentity.js"
import type { WorkspaceIdentityError } from "../Services/WorkspaceIdentity.js"

/** Which workspace to repair, and which of its ledgers (by default the one it holds). */
export interface RepairWorkspaceOptions {
  readonly workspace: string
  readonly store?: PersistentStore
  /** `repair --adopt`: first write a header for every unmanaged run from the ledger's facts (docs/recovery.md). */
  readonly adopt?: boolean
}

/** What a repair of a workspace did: the store it opened and the repair's report. */
export interface RepairOutcome {
  readonly store: PersistentStore
  readonly report: RepairReport
}

/** Why a workspace could not be repaired at all (nothing was changed): no ledger, two ledgers, the lock, an open failure. */
export type RepairWorkspaceError = OpenError | OwnerLockError | RunHeaderCorruption | WorkspaceAmbiguous | StoreReadFailed | WorkspaceIdentityError

/** The header store of a workspace's kind, beside its ledger. */
export const layerHeaders = (
  store: PersistentStore,
  options: { readonly workspace: string; readonly readOnly: boolean }
): Layer.Layer<RunHeaderStore, StoreReadFailed | RunHeaderCorruption | OpenError, FileSystem.FileSystem> =>
  store === "sqlite" ? SqliteRunHeaderStore.layer(options) : JsonlRunHeaderStore.layer(options)

/** The ledger and the run headers of a workspace's kind, both opened the same way (read-only or as a writer). */
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
 * `repair --adopt`: `StartupRepair.adopt` (a header for every unmanaged run), then `StartupRepair.repair`, one report
 * with the adopted runs and both passes' failures. Run it under the exclusive owner lock.
 */
export const adoptThenRepair = (workspaceId: string) =>
  Effect.gen(function*() {
    const adopted = yield* StartupRepair.adopt(workspaceId)
    const report = yield* StartupRepair.repair
    return new RepairReport({
      repaired: report.repaired,
      failed: [...adopted.failed, ...report.failed],
      unmanaged: report.unmanaged,
      alreadyTerminal: report.alreadyTerminal,
      adopted: adopted.adopted
    })
  })

/** A report is clean when no managed run failed to be read or written (exit 0); otherwise exit 2. */
export const repairExitCode = (report: RepairReport): 0 | 2 => report.failed.length === 0 ? 0 : 2

/**
 * Repairs `options.workspace`: finds its ledger as a reader would (a folder without one is `WorkspaceNotFound` and
 * stays exactly as it was: no lock file, no ledger), takes the owner lock exclusively (at most the owner wait, 2 s,
 * else `WorkspaceLocked` with nothing changed), opens the ledger and the run headers as a writer and runs
 * `StartupRepair.repair` under that lock. Runs that could not be read are in the report's `failed`, untouched.
 */
export const repairWorkspace = (
  options: RepairWorkspaceOptions
): Effect.Effect<RepairOutcome, RepairWorkspaceError, FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner> =>
  Effect.gen(function*() {
    const store = yield* detectStore(options.workspace, options.store)
    const owner = yield* WorkspaceOwner
    const report = yield* owner.withExclusive(
      options.workspace,
      (options.adopt === true
        ? Effect.flatMap(WorkspaceIdentity.ensure(options.workspace), (workspaceId) => adoptThenRepair(workspaceId))
        : StartupRepair.repair).pipe(
          Effect.provide(layerWorkspaceStores(store, { workspace: options.workspace, readOnly: false }))
        )
    )
    return { store, report }
  }).pipe(Effect.withSpan("RepairWorkspace.repair", { attributes: { store: options.store ?? "detect" } }))

/** What `repair --rebuild-derived` did: the store, and the rows it wrote per derived table (none on JSONL). */
export interface RebuildOutcome {
  readonly store: PersistentStore
  readonly rebuilt: DerivedRebuild | undefined
}

/**
 * `repair --rebuild-derived`: under the exclusive owner lock, opens the ledger as a writer and rebuilds every derived
 * row (SQLite: runs and calls, which the tool_operations and tool_operation_journal views follow) from the verified events in one transaction,
 * never touching an event; refuses (`LedgerCorruption`) when the events do not verify. A JSONL ledger keeps nothing
 * derived on disk (its index is rebuilt from the file at every open): `rebuilt` is `undefined`.
 */
export const rebuildDerivedWorkspace = (
  options: RepairWorkspaceOptions
): Effect.Effect<
  RebuildOutcome,
  OpenError | OwnerLockError | WorkspaceAmbiguous | StoreReadFailed | LedgerCorruption | StoreWriteFailed | OwnershipLost,
  FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner
> =>
  Effect.gen(function*() {
    const store = yield* detectStore(options.workspace, options.store)
    const owner = yield* WorkspaceOwner
    const rebuilt = yield* owner.withExclusive(
      options.workspace,
      Effect.flatMap(RuntimeEventStoreTag, (ledger) => ledger.rebuildDerived === undefined ? Effect.succeed(undefined) : ledger.rebuildDerived()).pipe(
        Effect.provide(layerStore(store, { workspace: options.workspace, readOnly: false }))
      )
    )
    return { store, rebuilt }
  }).pipe(Effect.withSpan("RepairWorkspace.rebuildDerived"))
