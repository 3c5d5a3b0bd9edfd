// An @effect/ai host in one layer (issue 15): the workspace identity, the stores, startup repair under the owner lock,
// a hook for Phase 3's reconcile, then continuation of interrupted runs (with the flag) through the LanguageModel.
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as AiTool from "@effect/ai/Tool"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { RepairReport } from "../Domain/RepairReport.js"
import * as ContinuationExecutor from "../Programs/ContinuationExecutor.js"
import type * as AiToolkit from "../Programs/AiToolkit.js"
import * as DurableTurn from "../Programs/DurableTurn.js"
import * as HostStartup from "../Programs/HostStartup.js"
import * as StartupRepair from "../Programs/StartupRepair.js"
import * as WorkspaceIdentity from "../Services/WorkspaceIdentity.js"
import { AiHost, type AiHostShape, type AiHostTurnError, type BootContinuation, type BootReport } from "./AiHostService.js"
import type { RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { OwnerLockError } from "../Services/WorkspaceOwner.js"
import type { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import * as JsonlRunHeaderStore from "../Layers/JsonlRunHeaderStore.js"
import * as LanguageModelProvider from "./LanguageModelProvider.js"
import * as NodeContinuationSafetyInspector from "../Layers/NodeContinuationSafetyInspector.js"
import * as NodeRuntimeEventStore from "../Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../Layers/NodeWorkspaceOwner.js"
import * as SqliteRunHeaderStore from "../Layers/SqliteRunHeaderStore.js"

/** How the host starts: the workspace and its store, the turn configuration, and the hooks. */
export interface AiHostOptions<Tools extends Record<string, AiTool.Any>, R = never> extends DurableTurn.TurnConfig<Tools, R> {
  readonly workspace: string
  /** The ledger's store (default `sqlite`). */
  readonly store?: "sqlite" | "jsonl"
  /** Whether the host's background work is settled (a continuation gate of spec 04); default always. */
  readonly backgroundSettled?: Effect.Effect<boolean>
  /**
   * Runs after startup repair and before any continuation, under the exclusive owner lock, with the stores: the place
   * for Phase 3's reconcile (spec 05) over the toolkit's tools (`AiToolkit.toTools`). Default: nothing.
   */
  readonly afterRepair?: (report: RepairReport) => Effect.Effect<void, never, RuntimeEventStore | RunHeaderStore>
}

/** What building the host can fail with: the workspace identity, opening the stores, the owner lock. */
export type LayerError = Layer.Layer.Error<ReturnType<typeof storesLayer>> | WorkspaceIdentity.WorkspaceIdentityError | OwnerLockError

// The ledger and the run headers of one store over the workspace, as a writer.
const storesLayer = (store: "sqlite" | "jsonl", workspace: string) =>
  Layer.mergeAll(
    NodeRuntimeEventStore.layerStore(store, { workspace, readOnly: false }),
    store === "sqlite" ? SqliteRunHeaderStore.layer({ workspace, readOnly: false }) : JsonlRunHeaderStore.layer({ workspace, readOnly: false })
  ).pipe(Layer.provide(Layer.mergeAll(NodeFileSystem.layer, NodeWorkspaceLock.layerNode)))

const codesOf = (error: { readonly _tag: string }): ReadonlyArray<string> =>
  "reason" in error && typeof error.reason === "string"
    ? [error._tag, error.reason]
    : "code" in error && typeof error.code === "string"
    ? [error._tag, error.code]
    : [error._tag]

/**
 * The host layer: ensures the workspace identity, opens the stores (writer), and starts the host under the owner lock
 * (`HostStartup.start`, the shared hold kept for the layer's lifetime). When startup repair runs, then, still under the
 * exclusive lock: `afterRepair` (Phase 3's reconcile goes here), and for each run repair closed as interrupted,
 * `ContinuationExecutor.prepare` (not confirmed) and, when the plan is `Continue` (only with
 * `MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1`), `executeHoldingLock` through a `LanguageModelProvider` over the host's
 * LanguageModel and toolkit, so the continued turn's tool calls are durable too. Each attempt is reported in
 * `startup`; a failed attempt never fails the start. The service runs new durable turns (`turn`).
 */
export const layer: {
  <Tools extends Record<string, AiTool.Any>, O extends AiToolkit.Overrides<Tools, any> = {}>(
    options: AiHostOptions<Tools, any> & { readonly overrides?: O }
  ): Layer.Layer<AiHost, LayerError, LanguageModel.LanguageModel | AiTool.HandlersFor<Tools> | AiToolkit.OverridesRequirements<O>>
} = <Tools extends Record<string, AiTool.Any>, R = never>(
  options: AiHostOptions<Tools, R>
): Layer.Layer<AiHost, LayerError, any> =>
  Layer.scoped(
    AiHost,
    Effect.gen(function*() {
      const workspace = options.workspace
      const workspaceId = yield* WorkspaceIdentity.ensure(workspace).pipe(Effect.provide(NodeFileSystem.layer))
      const stores = yield* Layer.build(storesLayer(options.store ?? "sqlite", workspace))
      const env = yield* Effect.context<LanguageModel.LanguageModel | AiTool.HandlersFor<Tools> | R>()
      const turnContext = Context.merge(env, stores)
      const provider = yield* Layer.build(LanguageModelProvider.layer(options)).pipe(Effect.provide(turnContext))
      const inspector = yield* Layer.build(NodeContinuationSafetyInspector.layerNode({
        toolCatalog: Effect.succeed(Object.keys(options.toolkit.tools)),
        backgroundSettled: options.backgroundSettled ?? Effect.succeed(true)
      }))
      const bootContext = Context.merge(Context.merge(turnContext, provider), inspector)
      const boot = Effect.gen(function*() {
        const report = yield* StartupRepair.repair
        if (options.afterRepair !== undefined) yield* options.afterRepair(report)
        const continuations: Array<BootContinuation> = []
        for (const run of report.repaired) {
          if (run.action !== "interrupted_run_closed") continue
          const attempt = Effect.gen(function*() {
            const prepared = yield* ContinuationExecutor.prepare(workspace, run.runId, { confirmed: false })
            if (prepared.plan._tag === "AwaitingConfirmation") {
              return { sourceRunId: run.runId, outcome: "awaiting_confirmation", codes: [] } satisfies BootContinuation
            }
            const outcome = yield* ContinuationExecutor.executeHoldingLock(workspace, prepared, { confirmed: false })
            return outcome._tag === "Continued"
              ? { sourceRunId: run.runId, outcome: "continued", continuationRunId: outcome.continuationRunId, codes: [] } satisfies BootContinuation
              : { sourceRunId: run.runId, outcome: outcome.reason === "parked" ? "parked" : "awaiting_confirmation", codes: [...outcome.parkReasons] } satisfies BootContinuation
          })
          continuations.push(
            yield* attempt.pipe(
              Effect.catchAll((error: { readonly _tag: string }) =>
                Effect.succeed<BootContinuation>({ sourceRunId: run.runId, outcome: "failed", codes: codesOf(error) })
              )
            )
          )
        }
        return { repair: report, continuations } satisfies BootReport
      }).pipe(Effect.provide(bootContext), Effect.withSpan("AiHost.boot"))
      // Built in the layer's scope: the shared hold lives as long as the host.
      const owner = yield* Layer.build(NodeWorkspaceOwner.layerNode)
      const started = yield* HostStartup.start(workspace, { repair: boot }).pipe(Effect.provide(owner))
      return {
        workspace,
        workspaceId,
        startup: started.repair,
        turn: (input) =>
          // Every requirement is in the captured context (the generic types cannot show it inside this body).
          DurableTurn.run({ ids: input.ids, workspaceId, prompt: input.prompt }, options).pipe(
            Effect.provide(turnContext)
          ) as Effect.Effect<DurableTurn.TurnResult, AiHostTurnError>
      } satisfies AiHostShape
    })
  )
