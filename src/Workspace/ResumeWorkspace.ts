// `runtime-resume resume` (docs/spec/04-continuation.md, docs/spec/06-cli.md): picks the run to continue, plans it over the workspace opened read-only,
// and executes an approved plan over the workspace opened as a writer; it returns data and prints nothing.
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { RunHeaderCorruption } from "../Domain/ContinuationErrors.js"
import type { ContinuationOutcome, PreparedContinuation } from "../Domain/ContinuationOutcome.js"
import type { StoreReadFailed, WorkspaceAmbiguous } from "../Domain/Errors.js"
import type { RunHeader } from "../Domain/RunHeader.js"
import { detectStore, type OpenError, type PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import type { ContinuationSafetyInspector } from "../Services/ContinuationSafetyInspector.js"
import { isAbandoned, RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import * as ContinuationExecutor from "../Programs/ContinuationExecutor.js"
import { layerWorkspaceStores } from "./RepairWorkspace.js"
import type { WorkspaceIdentityError } from "../Services/WorkspaceIdentity.js"
import type { HostSupplied } from "../Layers/NodeContinuationSafetyInspector.js"
import { WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import type { WorkspaceBackendService } from "./WorkspaceBackend.js"

/**
 * There is no run to resume: the workspace holds no managed run that is not already continued.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoResumableRun extends Schema.TaggedError<NoResumableRun>()("NoResumableRun", {
  workspace: Schema.String,
  message: Schema.String
}) {}

/**
 * A `Continue` plan cannot be executed here: no `ModelProvider` was supplied (the CLI has no model of its own).
 *
 * @since 0.1.0
 * @category errors
 */
export class ModelProviderMissing extends Schema.TaggedError<ModelProviderMissing>()("ModelProviderMissing", {
  runId: Schema.String,
  message: Schema.String
}) {}

/**
 * What `planWorkspace` looks at.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanWorkspaceOptions {
  readonly workspace: string
  /** The ledger to open; by default the one the workspace holds. */
  readonly store?: PersistentStore
  /** The run to continue; by default `defaultRun` of the workspace's headers. */
  readonly runId?: string
  /** A person confirmed (`resume --yes`). */
  readonly confirmed: boolean
}

/**
 * A planned workspace: the store opened, the run planned and its plan.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspacePlan {
  readonly store: PersistentStore
  readonly runId: string
  /** The plan and the facts it was made from (what execution revalidates). */
  readonly prepared: PreparedContinuation
}

/**
 * Why a workspace could not be planned at all (nothing was read far enough to plan, and nothing was changed).
 *
 * @since 0.1.0
 * @category models
 */
export type PlanWorkspaceError =
  | OpenError
  | WorkspaceAmbiguous
  | StoreReadFailed
  | RunHeaderCorruption
  | WorkspaceIdentityError
  | ConfigError.ConfigError
  | NoResumableRun

// The run a header continues, if any.
const parentOf = (header: RunHeader): string | undefined => header.continuationSource?.runId ?? header.parentRunId

/**
 * The run `resume` continues when none is named: the most recently created managed run (header order) that is not an
 * abandoned continuation (closed before any provider call) and that no other continuation, apart from an abandoned
 * one, already continues; in other words the newest live leaf of the workspace's lineage. It is not required to be
 * terminal: an unrepaired newest run is chosen and parks (`terminal_repair_failed`, next step `run_repair`) rather than
 * an older run being continued behind it.
 *
 * @since 0.1.0
 * @category workspace
 */
export const defaultRun = (
  headers: ReadonlyArray<RunHeader>,
  abandoned: ReadonlySet<string> = new Set()
): RunHeader | undefined => {
  const continued = new Set<string>()
  for (const header of headers) {
    const parent = parentOf(header)
    if (parent !== undefined && !isAbandoned(header)) continued.add(parent)
  }
  for (let i = headers.length - 1; i >= 0; i--) {
    const header = headers[i]!
    if (!isAbandoned(header) && !continued.has(header.runId) && !abandoned.has(header.runId)) return header
  }
  return undefined
}

/**
 * Whether a person abandoned the run (docs/spec/05-reconciliation.md): every operation left without a response is parked `manual_abandon` (not
 * dispatched calls of a T1 run aside), read off the call index. `resume` skips them when it picks a run.
 *
 * @since 0.1.0
 * @category workspace
 */
export const isAbandonedRun = (runId: RunHeader["runId"]) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const unsettled = yield* Effect.either(store.unsettledCalls(runId))
    if (unsettled._tag === "Left") return false
    const open = unsettled.right.calls.filter((c) =>
      c.dispatchSeq !== undefined || unsettled.right.toolBoundary !== "t1_after_preflight_v1"
    )
    return open.length > 0 && open.every((c) => c.recovery?.reasonCode === "manual_abandon")
  })

/**
 * `defaultRun`, skipping runs a person abandoned: only the runs it would pick are looked up (newest first).
 *
 * @since 0.1.0
 * @category workspace
 */
export const defaultLiveRun = (headers: ReadonlyArray<RunHeader>) =>
  Effect.gen(function*() {
    const abandoned = new Set<string>()
    for (;;) {
      const picked = defaultRun(headers, abandoned)
      if (picked === undefined || !(yield* isAbandonedRun(picked.runId))) return picked
      abandoned.add(picked.runId)
    }
  })

/**
 * Plans a continuation of a workspace's run, changing nothing: the ledger and the run headers are opened read-only
 * (SQLite may leave its `-wal`/`-shm`; nothing of ours is created, and a folder without a ledger is
 * `WorkspaceNotFound`), the workspace identity marker is only read, and the host facts come from the
 * `ContinuationSafetyInspector`. The run is `options.runId`, else `defaultRun` (none: `NoResumableRun`). The plan
 * is `ContinuationExecutor.prepare`'s (the flag read through `Config`), with the facts execution revalidates.
 *
 * @since 0.1.0
 * @category workspace
 */
export const planWorkspace = (
  options: PlanWorkspaceOptions
): Effect.Effect<
  WorkspacePlan,
  PlanWorkspaceError,
  FileSystem.FileSystem | WorkspaceLock | ContinuationSafetyInspector
> =>
  Effect.gen(function*() {
    const workspace = options.workspace
    const store = yield* detectStore(workspace, options.store)
    const planned = yield* planRun(workspace, options).pipe(
      Effect.provide(layerWorkspaceStores(store, { workspace, readOnly: true }))
    )
    return { store, ...planned }
  }).pipe(Effect.withSpan("ResumeWorkspace.plan"))

/**
 * Plans a continuation over the ledger, run headers and inspector of the context, whatever the store (`planWorkspace`
 * for a folder, `planOn` for any backend): the run is `options.runId`, else `defaultLiveRun` (none:
 * `NoResumableRun`); the plan is `ContinuationExecutor.prepare`'s. Writes nothing.
 *
 * @since 0.1.0
 * @category workspace
 */
export const planRun = (
  workspace: string,
  options: { readonly runId?: string; readonly confirmed: boolean }
) =>
  Effect.gen(function*() {
    const headers = yield* RunHeaderStore
    const runId = options.runId ?? (yield* defaultLiveRun(yield* headers.list()))?.runId
    if (runId === undefined) {
      return yield* new NoResumableRun({
        workspace,
        message: `the workspace ${workspace} holds no managed run to resume (no run header, or every run is already ` +
          "continued, or abandoned by a person with resolve --abort); name one with --run, or inspect the workspace"
      })
    }
    const prepared = yield* ContinuationExecutor.prepare(workspace, runId, { confirmed: options.confirmed })
    return { runId, prepared }
  })

/**
 * What `executeWorkspace` runs: a planned workspace and whether a person confirmed it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExecuteWorkspaceOptions {
  readonly workspace: string
  readonly store: PersistentStore
  readonly prepared: PreparedContinuation
  readonly confirmed: boolean
}

/**
 * Why an approved plan was not executed: the owner lock, an open failure, or execution's own typed errors.
 *
 * @since 0.1.0
 * @category models
 */
export type ExecuteWorkspaceError = Effect.Effect.Error<ReturnType<typeof ContinuationExecutor.execute>> | OpenError | RunHeaderCorruption

/**
 * Executes a planned continuation (`ContinuationExecutor.execute`) over the workspace's ledger and run headers opened
 * as a writer: under the exclusive owner lock it revalidates, claims, commits the start and calls the
 * `ModelProvider` once. A plan that is not `Continue` (and not confirmed) is `NotContinued`, with nothing opened.
 *
 * @since 0.1.0
 * @category workspace
 */
export const executeWorkspace = (options: ExecuteWorkspaceOptions) =>
  ContinuationExecutor.execute(options.workspace, options.prepared, { confirmed: options.confirmed }).pipe(
    Effect.provide(layerWorkspaceStores(options.store, { workspace: options.workspace, readOnly: false })),
    Effect.withSpan("ResumeWorkspace.execute")
  )

/**
 * The exit code of an execution: 0 when it continued, 1 when it did not (a park, or awaiting confirmation).
 *
 * @since 0.1.0
 * @category workspace
 */
export const outcomeExitCode = (outcome: ContinuationOutcome): 0 | 1 => outcome._tag === "Continued" ? 0 : 1

/**
 * The exit code of a plan: 0 `Continue`, 1 `AwaitingConfirmation` or `Park` (not a failure: nothing is wrong with the CLI).
 *
 * @since 0.1.0
 * @category workspace
 */
export const planExitCode = (prepared: PreparedContinuation): 0 | 1 => prepared.plan._tag === "Continue" ? 0 : 1

/**
 * `planWorkspace` over a workspace's backend (SQLite, JSONL or PostgreSQL alike), opened read-only: `planRun` over
 * its ledger and run headers, the inspector over its identity (a folder's marker, PostgreSQL's identity row) and the
 * host's facts. Writes nothing.
 *
 * @since 0.1.0
 * @category workspace
 */
export const planOn = (
  backend: WorkspaceBackendService,
  options: { readonly runId?: string; readonly confirmed: boolean },
  host: HostSupplied
) =>
  backend.stores(planRun(backend.workspace, options)).pipe(
    Effect.provide(backend.inspector(host)),
    Effect.map((planned) => ({ store: backend.store, ...planned })),
    Effect.withSpan("ResumeWorkspace.plan")
  )

/**
 * `executeWorkspace` over a workspace's backend opened as a writer: `ContinuationExecutor.execute` under its
 * exclusive owner lock (≤ 2 s, else `WorkspaceLocked`): revalidate, claim the boundary, commit the start, call the
 * `ModelProvider` of the context once.
 *
 * @since 0.1.0
 * @category workspace
 */
export const executeOn = (
  backend: WorkspaceBackendService,
  options: { readonly prepared: PreparedContinuation; readonly confirmed: boolean },
  host: HostSupplied
) =>
  backend.stores(ContinuationExecutor.execute(backend.workspace, options.prepared, { confirmed: options.confirmed })).pipe(
    Effect.provide(backend.inspector(host)),
    Effect.provideService(WorkspaceOwner, backend.owner),
    Effect.withSpan("ResumeWorkspace.execute")
  )
