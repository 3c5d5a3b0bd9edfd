// An @effect/ai host in one layer: the workspace identity, the stores, startup repair under the owner lock, reconcile
// over the toolkit (docs/spec/05-reconciliation.md), then continuation of interrupted runs (the flag, or a person's confirmation, docs/spec/04-continuation.md).
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as AiTool from "@effect/ai/Tool"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type * as ContinuationOutcome from "../Domain/ContinuationOutcome.js"
import type { RepairReport } from "../Domain/RepairReport.js"
import * as ContinuationExecutor from "../Programs/ContinuationExecutor.js"
import * as AiToolkit from "./AiToolkit.js"
import type * as FileWriteTool from "../Programs/FileWriteTool.js"
import * as Reconcile from "../Programs/Reconcile.js"
import * as DurableTurn from "./DurableTurn.js"
import * as HostStartup from "../Programs/HostStartup.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import * as WorkspaceIdentity from "../Services/WorkspaceIdentity.js"
import {
  AiHost,
  type AiHostShape,
  type AiHostTurnError,
  type BootContinuation,
  type BootReport,
  type ContinueConfirmedError
} from "./AiHostService.js"
import { type OwnerLockError, WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import * as JsonlRunHeaderStore from "../Layers/JsonlRunHeaderStore.js"
import * as LanguageModelProvider from "./LanguageModelProvider.js"
import * as NodeContinuationSafetyInspector from "../Layers/NodeContinuationSafetyInspector.js"
import * as NodeRuntimeEventStore from "../Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../Layers/NodeWorkspaceOwner.js"
import * as SqliteRunHeaderStore from "../Layers/SqliteRunHeaderStore.js"

/**
 * How the host starts: the workspace and its store, the turn configuration, and the hooks.
 *
 * @since 0.1.0
 * @category models
 */
export interface AiHostOptions<Tools extends Record<string, AiTool.Any>, R = never> extends DurableTurn.TurnConfig<Tools, R> {
  readonly workspace: string
  /** The ledger's store (default `sqlite`). */
  readonly store?: "sqlite" | "jsonl"
  /**
   * The tools' fingerprints now, for the continuation's catalog gate (docs/spec/04-continuation.md): with MCP tools,
   * `McpToolset.catalog(client)` re-listed at each inspection (docs/mcp.md). Default: the fingerprints the toolkit's
   * tools carry (`AiToolkit.fingerprintsOf`: an MCP toolset as loaded for this host), so a dispatched MCP tool whose
   * server now lists it otherwise (hints, description, input schema), or a tool of that name without one, parks.
   */
  readonly toolFingerprints?: Effect.Effect<Readonly<Record<string, string>>>
  /** Whether the host's background work is settled (a continuation gate of docs/spec/04-continuation.md); default always. */
  readonly backgroundSettled?: Effect.Effect<boolean>
  /**
   * A person's confirmation for this start (docs/spec/05-reconciliation.md): reconcile re-runs `idempotent` tools without the flag. Default:
   * not confirmed (only `MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1` lets them be re-run). It confirms no continuation: that
   * is `confirmContinuation`.
   */
  readonly confirmed?: boolean
  /**
   * A person's confirmation of the continuations this start runs (docs/spec/04-continuation.md "The flag"; the API's `confirmed: true`):
   * `"all"` for every eligible run the boot finds, or the source run ids a person confirmed (say, the run they just
   * resolved). A confirmed run continues without the flag, `authorizedBy: "confirmation"` (the `plan_approved` event
   * and `BootContinuation.authorizedBy`), exactly as `resume --yes` would; any other is `awaiting_confirmation` unless
   * the flag is set. Default: none. A running host takes a person's confirmation with `continueConfirmed(runId)`.
   */
  readonly confirmContinuation?: ContinuationConfirmation
  /**
   * Set when the toolkit has the built-in file-write tool (`AiFileWrite`): reconcile then also observes file writes
   * whose tool the host no longer lists, and removes each observed write's leftover temporary file (under `root`, or
   * the root its evidence recorded). Needs the file services (`AiFileWrite.Requirements`) in the host's context.
   */
  readonly fileWrite?: { readonly root?: string }
}

/**
 * Which continuations a person confirmed for a host's start: all it finds, or these source runs.
 *
 * @since 0.1.0
 * @category models
 */
export type ContinuationConfirmation = "all" | ReadonlyArray<string>

/**
 * Whether `confirmation` covers source run `runId`.
 *
 * @since 0.1.0
 * @category ai
 */
export const confirms = (confirmation: ContinuationConfirmation | undefined, runId: string): boolean =>
  confirmation === "all" || (confirmation !== undefined && confirmation.includes(runId))

// The permits of the host's turn gate: each turn takes one, `continueConfirmed` takes them all.
const GATE_PERMITS = 1 << 30

/**
 * What building the host can fail with: the workspace identity, opening the stores, the owner lock.
 *
 * @since 0.1.0
 * @category models
 */
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
 * (`HostStartup.start`, the shared hold kept for the layer's lifetime). When startup repair runs, the start is
 * `HostStartup.startupSteps` in ONE exclusive hold: repair; reconcile (docs/spec/05-reconciliation.md) over the toolkit's tools
 * (`AiToolkit.toTools` with the overrides, so `read_only` and `idempotent` tools are re-run through the same handlers,
 * `idempotent` ones only confirmed or with the flag, and `reconcilable` ones observed; with `fileWrite`, the built-in
 * file-write observation and temp-file removal too); then, for each run repair closed as interrupted (now or at an
 * earlier start, never continued), `ContinuationExecutor.prepare` (confirmed when `confirmContinuation` names it) and,
 * when the plan is `Continue` (with `MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1`, or a person's confirmation),
 * `executeHoldingLock` through a `LanguageModelProvider` over the host's LanguageModel and toolkit, so the continued
 * turn's tool calls are durable too. Reconcile's report and each continuation attempt are in `startup`; a failed
 * reconcile or attempt never fails the start. The service runs new durable turns (`turn`) and continues a run on a
 * person's confirmation while it runs (`continueConfirmed`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: {
  <
    Tools extends Record<string, AiTool.Any>,
    O extends AiToolkit.Overrides<Tools, any> = {},
    F extends { readonly root?: string } | undefined = undefined
  >(
    options: AiHostOptions<Tools, any> & { readonly overrides?: O; readonly fileWrite?: F }
  ): Layer.Layer<
    AiHost,
    LayerError,
    | LanguageModel.LanguageModel
    | AiTool.HandlersFor<Tools>
    | AiToolkit.OverridesRequirements<O>
    | (undefined extends F ? never : FileWriteTool.FileWriteRequirements)
  >
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
        toolFingerprints: options.toolFingerprints ?? Effect.sync(() => AiToolkit.fingerprintsOf(options.toolkit)),
        backgroundSettled: options.backgroundSettled ?? Effect.succeed(true)
      }))
      const bootContext = Context.merge(Context.merge(turnContext, provider), inspector)
      const tools = yield* AiToolkit.toTools<Tools, any>(options.toolkit, options.overrides).pipe(Effect.provide(env))
      const fileWrite = options.fileWrite !== undefined
        ? yield* (Reconcile.builtinFileWrite(options.fileWrite.root !== undefined ? { root: options.fileWrite.root } : {}).pipe(
          Effect.provide(env as Context.Context<any>)
        ) as Effect.Effect<Reconcile.BuiltinFileWrite>)
        : undefined
      // The runs a boot tries to continue: the ones this start's repair closed, and every run an earlier start closed
      // (`process_interrupted`) that was never continued (no claim): a crash after reconcile's bundle and before the
      // claim, or a person's `resolve` on a turn an earlier boot parked, converge on the next start (docs/spec/05-reconciliation.md).
      const candidates = (report: RepairReport) =>
        Effect.gen(function*() {
          const runIds: Array<string> = report.repaired.filter((run) => run.action === "interrupted_run_closed").map((run) => run.runId)
          const headers = Context.get(stores, RunHeaderStore)
          const earlier = yield* headers.list().pipe(
            Effect.flatMap((all) =>
              Effect.filter(
                all.filter((h) => h.statusReason === "process_interrupted" && !runIds.includes(h.runId)),
                (h) => Effect.map(headers.claims(h.runId), (claims) => claims.length === 0)
              )
            ),
            Effect.tapError((error) =>
              Effect.logWarning(`AiHost boot: the run headers could not be read (${error._tag}); only the runs this start repaired are continued`)
            ),
            Effect.orElseSucceed(() => [])
          )
          return [...runIds, ...earlier.map((h) => h.runId)]
        })
      const continueRuns = (report: RepairReport) =>
        Effect.gen(function*() {
          const continuations: Array<BootContinuation> = []
          for (const runId of yield* candidates(report)) {
            const run = { runId }
            // A person's confirmation (the option) or none: then only the flag lets the run continue (docs/spec/04-continuation.md).
            const confirmed = confirms(options.confirmContinuation, run.runId)
            const attempt = Effect.gen(function*() {
              const prepared = yield* ContinuationExecutor.prepare(workspace, run.runId, { confirmed })
              if (prepared.plan._tag === "AwaitingConfirmation") {
                return { sourceRunId: run.runId, outcome: "awaiting_confirmation", codes: [] } satisfies BootContinuation
              }
              const outcome = yield* ContinuationExecutor.executeHoldingLock(workspace, prepared, { confirmed })
              return outcome._tag === "Continued"
                ? {
                  sourceRunId: run.runId,
                  outcome: "continued",
                  continuationRunId: outcome.continuationRunId,
                  authorizedBy: outcome.authorizedBy,
                  codes: []
                } satisfies BootContinuation
                : {
                  sourceRunId: run.runId,
                  outcome: outcome.reason === "parked" ? "parked" : "awaiting_confirmation",
                  codes: [...outcome.parkReasons],
                  ...(outcome.reason === "parked" && prepared.plan._tag === "Park" ? { findings: [...prepared.plan.findings] } : {})
                } satisfies BootContinuation
            })
            continuations.push(
              yield* attempt.pipe(
                Effect.catchAll((error: { readonly _tag: string }) =>
                  Effect.succeed<BootContinuation>({ sourceRunId: run.runId, outcome: "failed", codes: codesOf(error) })
                )
              )
            )
          }
          return continuations
        })
      const boot = HostStartup.startupSteps({
        tools,
        ...(options.confirmed !== undefined ? { confirmed: options.confirmed } : {}),
        ...(fileWrite !== undefined ? { fileWrite } : {}),
        continuation: continueRuns
      }).pipe(
        Effect.map((steps) => ({ repair: steps.repair, reconcile: steps.reconcile, continuations: steps.continuation ?? [] }) satisfies BootReport),
        Effect.provide(bootContext),
        Effect.withSpan("AiHost.boot")
      ) as Effect.Effect<BootReport, never, never>
      // The shared hold lives in a scope of its own inside the layer's, as long as the host, except while
      // `continueConfirmed` lets go of it to take the lock exclusively.
      const owner = yield* Layer.build(NodeWorkspaceOwner.layerNode)
      const layerScope = yield* Effect.scope
      const hold = { scope: yield* Scope.fork(layerScope, ExecutionStrategy.sequential), held: true }
      const started = yield* HostStartup.start(workspace, { repair: boot }).pipe(Effect.provide(owner), Scope.extend(hold.scope))
      // Turns take one permit each; `continueConfirmed` takes them all, so it runs alone and no turn runs unheld.
      const gate = yield* Effect.makeSemaphore(GATE_PERMITS)
      // Takes the shared hold again when `continueConfirmed` could not (another process held the lock exclusively);
      // one at a time, so that concurrent turns take one hold, never two.
      const holding = yield* Effect.makeSemaphore(1)
      const ensureHeld = holding.withPermits(1)(Effect.suspend((): Effect.Effect<void, OwnerLockError> => {
        if (hold.held) return Effect.void
        return Effect.gen(function*() {
          const scope = yield* Scope.fork(layerScope, ExecutionStrategy.sequential)
          const taken = yield* Effect.exit(Context.get(owner, WorkspaceOwner).acquire(workspace, "shared").pipe(Scope.extend(scope)))
          if (Exit.isFailure(taken)) {
            yield* Scope.close(scope, Exit.void)
            return yield* Effect.asVoid(taken)
          }
          hold.scope = scope
          hold.held = true
        })
      }))
      const continueConfirmed = (runId: string): Effect.Effect<ContinuationOutcome.ContinuationOutcome, ContinueConfirmedError> =>
        gate.withPermits(GATE_PERMITS)(Effect.gen(function*() {
          const prepared = yield* ContinuationExecutor.prepare(workspace, runId, { confirmed: true })
          // A park is `NotContinued` at once: no lock taken, nothing written.
          if (prepared.plan._tag !== "Continue") {
            return yield* ContinuationExecutor.execute(workspace, prepared, { confirmed: true })
          }
          if (hold.held) {
            yield* Scope.close(hold.scope, Exit.void)
            hold.held = false
          }
          // The shared hold again, whatever execution did (interrupted too); when it cannot be had, the next turn tries.
          return yield* ContinuationExecutor.execute(workspace, prepared, { confirmed: true }).pipe(
            Effect.ensuring(ensureHeld.pipe(
              Effect.catchAll((error) =>
                Effect.logWarning(`AiHost: the shared owner hold could not be taken again (${error._tag}); the next turn tries again`)
              )
            ))
          )
        }).pipe(
          Effect.provide(Context.merge(bootContext, owner)),
          Effect.withSpan("AiHost.continueConfirmed", { attributes: { sourceRunId: runId } })
        )) as Effect.Effect<ContinuationOutcome.ContinuationOutcome, ContinueConfirmedError>
      return {
        workspace,
        workspaceId,
        startup: started.repair,
        turn: (input) =>
          gate.withPermits(1)(Effect.zipRight(
            ensureHeld,
            // Every requirement is in the captured context (the generic types cannot show it inside this body).
            DurableTurn.run({ ids: input.ids, workspaceId, prompt: input.prompt }, options).pipe(
              Effect.provide(turnContext)
            )
          )) as Effect.Effect<DurableTurn.TurnResult, AiHostTurnError>,
        continueConfirmed
      } satisfies AiHostShape
    })
  )
