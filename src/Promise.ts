// The Promise facade of spec 02 for non-Effect callers: `RuntimeEventStore.open` and `RecoveryResolver`.
// Read-only: it takes no lock, creates no file of ours, and opens the ledger per call, holding nothing open.
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { WorkspaceAmbiguous, type WorkspaceNotFound } from "./Domain/Errors.js"
import type { ExpectedHighWaterInput } from "./Domain/HighWater.js"
import { RunId } from "./Domain/Ids.js"
import * as NodeLedgerFileSystem from "./Layers/NodeLedgerFileSystem.js"
import * as NodeRuntimeEventStore from "./Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "./Layers/NodeWorkspaceLock.js"
import { decide } from "./Programs/Decide.js"
import type { Decision } from "./Programs/Decide.js"
import { planResume } from "./Programs/PlanResume.js"
import { RuntimeEventStore as StoreTag } from "./Services/RuntimeEventStore.js"

export type { Decision } from "./Programs/Decide.js"

/** Which ledger a workspace holds. */
export type StoreName = "sqlite" | "jsonl"

const PAGE_SIZE = 4096

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromiseExit(effect).then((exit) =>
    Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))
  )

const platform = Layer.merge(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)

/** A read-only handle on a workspace's ledger. */
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

/** Options of `computeResumePlan`. */
export interface ComputeResumePlanOptions {
  /** The run to judge; without it, the run whose first event was committed last. */
  readonly runId?: string
  /** The high-water the caller expects; a different one resolves to `"indeterminate"`. */
  readonly expectedHighWater?: ExpectedHighWaterInput
}

/** Resolves a workspace's recovery state to the user-level word of spec 02. */
export class RecoveryResolver {
  constructor(
    /** The read-only store handle. */
    readonly store: RuntimeEventStore
  ) {}

  /**
   * Resolves to `safe_replay`, `blocked`, `completed`, `indeterminate` or `corruption`. It never rejects
   * because of ledger content: corruption (a torn tail included) is `"corruption"`, an offset mismatch
   * `"indeterminate"`, a ledger with no runs `"completed"`. It rejects with `RunNotFound` for an unknown
   * `runId`, and with the typed error for an unreadable workspace.
   */
  computeResumePlan(options: ComputeResumePlanOptions = {}): Promise<Decision> {
    return this.store.use((store) =>
      Effect.gen(function*() {
        const runs = yield* store.listRuns()
        const runId = options.runId !== undefined ? RunId.make(options.runId) : runs[runs.length - 1]
        if (runId === undefined) return "completed" as Decision
        const plan = yield* planResume(store.readRunPages(runId, PAGE_SIZE), {
          runId,
          ...(options.expectedHighWater !== undefined ? { expectedHighWater: options.expectedHighWater } : {})
        })
        return decide(plan)
      }).pipe(
        Effect.catchTags({
          LedgerCorruption: (e) => Effect.succeed(decide(e)),
          RuntimeOffsetMismatch: (e) => Effect.succeed(decide(e))
        })
      )
    )
  }
}
