// The Promise facade of docs/spec/02-resume-plan.md for non-Effect callers: `RuntimeEventStore.open` and `RecoveryResolver`.
// Read-only: it takes no lock, creates no file of ours, and opens the ledger per call, holding nothing open.
/**
 * The Promise facade for callers without Effect: `RuntimeEventStore.open` and `RecoveryResolver` (read-only).
 *
 * @module runtime-resume/promise
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { LedgerCorruption, RuntimeOffsetMismatch, WorkspaceAmbiguous, type WorkspaceNotFound } from "./Domain/Errors.js"
import type { ExpectedHighWaterInput } from "./Domain/HighWater.js"
import { RunId } from "./Domain/Ids.js"
import * as NodeLedgerFileSystem from "./Layers/NodeLedgerFileSystem.js"
import * as NodeRuntimeEventStore from "./Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "./Layers/NodeWorkspaceLock.js"
import { decide } from "./Domain/Rules/Decide.js"
import type { Decision } from "./Domain/Rules/Decide.js"
import { inspectWorkspace, type RunInspection } from "./Programs/InspectWorkspace.js"
import { recoveryStates } from "./Programs/RecoveryStates.js"
import type { RunHeader } from "./Domain/RunHeader.js"
import * as JsonlRunHeaderStore from "./Layers/JsonlRunHeaderStore.js"
import * as SqliteRunHeaderStore from "./Layers/SqliteRunHeaderStore.js"
import { RunHeaderStore as RunHeaderStoreTag } from "./Services/RunHeaderStore.js"
import { RuntimeEventStore as StoreTag } from "./Services/RuntimeEventStore.js"
import type { ReadError } from "./Services/RuntimeEventStore.js"

export type { Decision } from "./Domain/Rules/Decide.js"

/**
 * Which ledger a workspace holds.
 *
 * @since 0.1.0
 * @category models
 */
export type StoreName = "sqlite" | "jsonl"

const PAGE_SIZE = 4096

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) =>
    Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))
  )

const platform = Layer.merge(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)

/**
 * A read-only handle on a workspace's ledger.
 *
 * @since 0.1.0
 * @category entry points
 */
export class RuntimeEventStore {
  private constructor(
    /** The workspace folder. */
    readonly workspacePath: string,
    /** Which ledger it holds. */
    readonly store: StoreName
  ) {}

  /**
   * Opens a workspace read-only. Rejects only with `WorkspaceNotFound` (no ledger) or `WorkspaceAmbiguous`
   * (both kinds, and no `store` named). Takes no lock and creates no file.
   */
  static open(
    workspacePath: string,
    options: { readonly store?: StoreName } = {}
  ): Promise<RuntimeEventStore> {
    return run(
      NodeRuntimeEventStore.detectStore(workspacePath, options.store).pipe(
        Effect.map((store) => new RuntimeEventStore(workspacePath, store)),
        // Name this facade's option, not the CLI's flag.
        Effect.catchTag("WorkspaceAmbiguous", (e) =>
          Effect.fail(
            new WorkspaceAmbiguous({
              workspace: e.workspace,
              message: `the workspace ${e.workspace} holds both runtime.sqlite and runtime-events.jsonl: name the one to ` +
                `use with RuntimeEventStore.open(workspace, { store: "sqlite" }) or { store: "jsonl" }`
            })
          )),
        Effect.provide(NodeFileSystem.layer)
      ) as Effect.Effect<RuntimeEventStore, WorkspaceNotFound | WorkspaceAmbiguous>
    )
  }

  /** Runs an Effect against a fresh read-only store instance, closed when it ends. @internal */
  use<A, E>(f: (store: typeof StoreTag.Service) => Effect.Effect<A, E>): Promise<A> {
    const layer = NodeRuntimeEventStore.layerWorkspace({
      workspace: this.workspacePath,
      store: this.store,
      readOnly: true
    })
    return run(Effect.flatMap(StoreTag, f).pipe(Effect.provide(layer), Effect.provide(platform)))
  }
}

/**
 * Options of `computeResumePlan`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ComputeResumePlanOptions {
  /** The run to judge; without it, the whole workspace (the most severe word over its runs). */
  readonly runId?: string
  /**
   * The high-water the caller expects of `runId` (without `runId`: of the run whose first event was committed last,
   * which is then the one run judged); a different one resolves to `"indeterminate"`.
   */
  readonly expectedHighWater?: ExpectedHighWaterInput
}

/**
 * The words from the most severe down: a workspace answers the first that any of its runs answers.
 *
 * @since 0.1.0
 * @category constants
 */
export const SEVERITY: ReadonlyArray<Decision> = ["corruption", "indeterminate", "blocked", "safe_replay", "completed"]


/**
 * The workspace's word from its runs and the run headers: `RecoveryState.workspaceState`'s verdict (docs/recovery.md),
 * the one `inspect` exits with. The most severe over its runs, where a run continued by a live continuation (a header
 * naming it as `parentRunId` or `continuationSource`, not closed as `continuation_abandoned_before_provider_call`,
 * whose run has events) counts through that continuation, and a run every unsettled operation of which a person
 * abandoned (`resolve --abort`) is settled. A run's own `corruption` or `indeterminate` still counts. A run given
 * only its word (no `plan`) is judged by that word. No runs: `completed`.
 *
 * @since 0.1.0
 * @category entry points
 */
export const workspaceDecision = (
  runs: ReadonlyArray<{ readonly runId: string; readonly decision: Decision } | RunInspection>,
  headers: ReadonlyArray<RunHeader>
): Decision => {
  const inspection = { runs: runs.map((run): RunInspection => "plan" in run && run.plan !== undefined || "error" in run && run.error !== undefined ? run as RunInspection : wordOnly(run.runId, run.decision)) }
  return recoveryStates(inspection, headers, { ownerLive: false, store: "sqlite" }).verdict
}

// A run known only by its word, as a plan view that gives that word (for callers of `workspaceDecision` without plans).
const wordOnly = (runId: string, decision: Decision): RunInspection => {
  const highWater = { seq: 0, digest: "" }
  const plan = (planDecision: "safe_replay" | "blocked", terminal?: "completed" | "failed") => ({
    decision: planDecision,
    reasons: [],
    highWater,
    requiresVerification: false,
    operations: [],
    replay: [],
    ...(terminal !== undefined ? { terminal: { status: terminal, seq: 1 } } : {})
  })
  switch (decision) {
    case "corruption":
      return { runId, decision, error: new LedgerCorruption({ runId, reason: "schema_invalid", message: "corrupt" }) }
    case "indeterminate":
      return {
        runId,
        decision,
        error: new RuntimeOffsetMismatch({ runId, expected: highWater, actual: highWater, message: "indeterminate" })
      }
    case "completed":
      return { runId, decision, status: "completed", plan: plan("safe_replay", "completed") }
    case "safe_replay":
      return { runId, decision, status: "open", plan: plan("safe_replay") }
    case "blocked":
      return { runId, decision, status: "failed", plan: plan("blocked", "failed") }
  }
}

/**
 * Resolves a workspace's recovery state to the user-level word of docs/spec/02-resume-plan.md.
 *
 * @since 0.1.0
 * @category entry points
 */
export class RecoveryResolver {
  constructor(
    /** The read-only store handle. */
    readonly store: RuntimeEventStore
  ) {}

  /**
   * Resolves to `safe_replay`, `blocked`, `completed`, `indeterminate` or `corruption`. With `runId`, that run's word;
   * without it, the workspace's: the most severe over every run (`workspaceDecision`), after the store's own
   * integrity check, reading every run as `inspect` does. It never rejects because of ledger content: corruption (a
   * torn tail, a damaged file, derived rows that disagree with the events) is `"corruption"`, an offset mismatch
   * `"indeterminate"`, a ledger with no runs `"completed"`. It rejects with `RunNotFound` for an unknown `runId`,
   * and with the typed error for an unreadable workspace.
   */
  computeResumePlan(options: ComputeResumePlanOptions = {}): Promise<Decision> {
    const workspacePath = this.store.workspacePath
    const kind = this.store.store
    return this.store.use((store) => {
      // One run, read as `inspect --run` reads it (its derived rows proven too).
      const judgeRun = (runId: RunId) =>
        inspectWorkspace({
          runId,
          pageSize: PAGE_SIZE,
          ...(options.expectedHighWater !== undefined ? { expectedHighWater: options.expectedHighWater } : {})
        }).pipe(
          Effect.provideService(StoreTag, store),
          Effect.map((inspection) => inspection.runs[0]?.decision ?? "completed")
        )
      if (options.runId !== undefined || options.expectedHighWater !== undefined) {
        const which: Effect.Effect<RunId | undefined, ReadError> = options.runId !== undefined
          ? Effect.succeed(RunId.make(options.runId))
          : Effect.map(store.listRuns(), (runs) => runs[runs.length - 1])
        return which.pipe(
            Effect.flatMap((runId) => runId === undefined ? Effect.succeed<Decision>("completed") : judgeRun(runId)),
            Effect.catchTags({
              LedgerCorruption: (e) => Effect.succeed(decide(e)),
              LedgerDamaged: () => Effect.succeed<Decision>("corruption"),
              RunHeaderCorruption: () => Effect.succeed<Decision>("corruption")
            })
          )
      }
      return Effect.gen(function*() {
        const inspection = yield* inspectWorkspace({ pageSize: PAGE_SIZE }).pipe(Effect.provideService(StoreTag, store))
        const headers = yield* Effect.flatMap(RunHeaderStoreTag, (h) => h.list()).pipe(
          Effect.provide(kind === "sqlite"
            ? SqliteRunHeaderStore.layer({ workspace: workspacePath, readOnly: true })
            : JsonlRunHeaderStore.layer({ workspace: workspacePath, readOnly: true })),
          Effect.provide(NodeLedgerFileSystem.layer)
        )
        return workspaceDecision(inspection.runs, headers)
      }).pipe(
        Effect.catchTags({
          LedgerCorruption: () => Effect.succeed<Decision>("corruption"),
          LedgerDamaged: () => Effect.succeed<Decision>("corruption"),
          RunHeaderCorruption: () => Effect.succeed<Decision>("corruption")
        })
      )
    })
  }
}
