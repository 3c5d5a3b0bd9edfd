// `runtime-resume repair` (docs/spec/04-continuation.md startup repair, docs/spec/06-cli.md): opens a workspace's ledger and run headers as a writer
// under the exclusive owner lock and runs `StartupRepair.repair`; it returns data and prints nothing.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import type { RunHeaderCorruption } from "../Domain/ContinuationErrors.js"
import { RepairReport } from "../Domain/RepairReport.js"
import type { LedgerCorruption, OwnershipLost, StoreReadFailed, StoreWriteFailed, WorkspaceAmbiguous } from "../Domain/Errors.js"
import type { OpenError, PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import type { DerivedRebuild } from "../Services/RuntimeEventStore.js"
import { RuntimeEventStore as RuntimeEventStoreTag } from "../Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import type { OwnerLockError, WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import * as StartupRepair from "../Programs/StartupRepair.js"
import type { WorkspaceIdentityError } from "../Services/WorkspaceIdentity.js"
import * as WorkspaceBackend from "./WorkspaceBackend.js"
import type { WorkspaceBackendService } from "./WorkspaceBackend.js"

/**
 * Which workspace to repair, and which of its ledgers (by default the one it holds).
 *
 * @since 0.1.0
 * @category models
 */
export interface RepairWorkspaceOptions {
  readonly workspace: string
  readonly store?: PersistentStore
  /** `repair --adopt`: first write a header for every unmanaged run from the ledger's facts (docs/recovery.md). */
  readonly adopt?: boolean
}

/**
 * What a repair of a workspace did: the store it opened and the repair's report.
 *
 * @since 0.1.0
 * @category models
 */
export interface RepairOutcome {
  readonly store: PersistentStore
  readonly report: RepairReport
}

/**
 * Why a workspace could not be repaired at all (nothing was changed): no ledger, two ledgers, the lock, an open failure.
 *
 * @since 0.1.0
 * @category models
 */
export type RepairWorkspaceError = OpenError | OwnerLockError | RunHeaderCorruption | WorkspaceAmbiguous | StoreReadFailed | WorkspaceIdentityError

/** The header store of a folder's kind, and both stores (now beside the backend that opens them). */
export { layerHeaders, layerWorkspaceStores } from "./WorkspaceBackend.js"

/**
 * `repair --adopt`: `StartupRepair.adopt` (a header for every unmanaged run), then `StartupRepair.repair`, one report
 * with the adopted runs and both passes' failures. Run it under the exclusive owner lock.
 *
 * @since 0.1.0
 * @category workspace
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

/**
 * A report is clean when no managed run failed to be read or written (exit 0); otherwise exit 2.
 *
 * @since 0.1.0
 * @category workspace
 */
export const repairExitCode = (report: RepairReport): 0 | 2 => report.failed.length === 0 ? 0 : 2

/**
 * Startup repair over a workspace's backend (SQLite, JSONL or PostgreSQL alike): under its owner lock, taken
 * exclusively (at most the owner wait, 2 s, else `WorkspaceLocked` with nothing changed), the ledger and the run
 * headers are opened as a writer and `StartupRepair.repair` runs (after `adopt`, when asked for). Runs that could not
 * be read are in the report's `failed`, untouched.
 *
 * @since 0.1.0
 * @category workspace
 */
export const repairOn = (backend: WorkspaceBackendService, options: { readonly adopt?: boolean | undefined } = {}) =>
  backend.owner.withExclusive(
    backend.workspace,
    backend.stores(options.adopt === true ? Effect.flatMap(backend.workspaceId, adoptThenRepair) : StartupRepair.repair)
  ).pipe(Effect.withSpan("RepairWorkspace.repair", { attributes: { store: backend.store } }))

/**
 * Repairs `options.workspace`: finds its ledger as a reader would (a folder without one is `WorkspaceNotFound` and
 * stays exactly as it was: no lock file, no ledger), then `repairOn`.
 *
 * @since 0.1.0
 * @category workspace
 */
export const repairWorkspace = (
  options: RepairWorkspaceOptions
): Effect.Effect<RepairOutcome, RepairWorkspaceError, FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner> =>
  Effect.scoped(Effect.gen(function*() {
    const backend = yield* WorkspaceBackend.make({ workspace: options.workspace, store: options.store, readOnly: false })
    const report = yield* repairOn(backend, options)
    return { store: backend.store as PersistentStore, report }
  }))

/**
 * What `repair --rebuild-derived` did: the store, and the rows it wrote per derived table (none on JSONL).
 *
 * @since 0.1.0
 * @category models
 */
export interface RebuildOutcome {
  readonly store: PersistentStore
  readonly rebuilt: DerivedRebuild | undefined
}

/**
 * `repair --rebuild-derived` over a workspace's backend: under the exclusive owner lock, opens the ledger as a writer
 * and rebuilds every derived row (SQLite, PostgreSQL: runs and calls, which the tool_operations and
 * tool_operation_journal views follow) from the verified events in one transaction, never touching an event; refuses
 * (`LedgerCorruption`) when the events do not verify. A JSONL ledger keeps nothing derived on disk (its index is
 * rebuilt from the file at every open): `undefined`.
 *
 * @since 0.1.0
 * @category workspace
 */
export const rebuildDerivedOn = (backend: WorkspaceBackendService) =>
  backend.owner.withExclusive(
    backend.workspace,
    backend.ledger(Effect.flatMap(RuntimeEventStoreTag, (ledger) =>
      ledger.rebuildDerived === undefined ? Effect.succeed(undefined) : ledger.rebuildDerived()))
  ).pipe(Effect.withSpan("RepairWorkspace.rebuildDerived"))

/**
 * `rebuildDerivedOn` over a workspace folder's ledger (found as a reader would: nothing is created).
 *
 * @since 0.1.0
 * @category workspace
 */
export const rebuildDerivedWorkspace = (
  options: RepairWorkspaceOptions
): Effect.Effect<
  RebuildOutcome,
  OpenError | OwnerLockError | WorkspaceAmbiguous | StoreReadFailed | LedgerCorruption | StoreWriteFailed | OwnershipLost,
  FileSystem.FileSystem | WorkspaceLock | WorkspaceOwner
> =>
  Effect.scoped(Effect.gen(function*() {
    const backend = yield* WorkspaceBackend.make({ workspace: options.workspace, store: options.store, readOnly: false })
    const rebuilt = yield* rebuildDerivedOn(backend)
    return { store: backend.store as PersistentStore, rebuilt }
  }))
