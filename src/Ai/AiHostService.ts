// The AiHost service: an @effect/ai host started on a workspace in one layer (startup repair, reconcile, continuation
// with the flag or a person's confirmation), and its durable turns. The Tag and its interface; the layer is AiHost.ts.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import type { ContinuationOutcome } from "../Domain/ContinuationOutcome.js"
import type { Authorization, ParkFinding } from "../Domain/ContinuationPlan.js"
import type { RepairReport } from "../Domain/RepairReport.js"
import type { ReconcileReport } from "../Domain/Settlement.js"
import type * as ContinuationExecutor from "../Programs/ContinuationExecutor.js"
import type * as HostStartup from "../Programs/HostStartup.js"
import type * as DurableTurn from "./DurableTurn.js"
import type { RunIds } from "../Domain/Rules/EventBuilder.js"
import type { OwnerLockError } from "../Services/WorkspaceOwner.js"

/**
 * What became of one run startup repair closed as interrupted: continued, awaiting a person, parked, or failed.
 *
 * @since 0.1.0
 * @category models
 */
export interface BootContinuation {
  readonly sourceRunId: string
  readonly outcome: "continued" | "awaiting_confirmation" | "parked" | "failed"
  /** The continuation run (`continued`). */
  readonly continuationRunId?: string
  /** Who allowed it (`continued`): the flag, or a person's confirmation (the host's `confirmContinuation`). */
  readonly authorizedBy?: Authorization
  /** The park reasons (`parked`), or the error's tag and code (`failed`). */
  readonly codes: ReadonlyArray<string>
  /**
   * What parked it (`parked`, when the plan parked): each failing gate with its ref and, for a changed MCP tool, the
   * server and tool its T1 recorded (`ParkFinding.source`, docs/mcp.md).
   */
  readonly findings?: ReadonlyArray<ParkFinding>
}

/**
 * What the host's startup did under the exclusive owner lock: repair's report, reconcile's, each continuation attempt.
 *
 * @since 0.1.0
 * @category models
 */
export interface BootReport {
  readonly repair: RepairReport
  /** Reconcile's report (docs/spec/05-reconciliation.md), or the error that stopped it (the start went on). */
  readonly reconcile: Either.Either<ReconcileReport, { readonly _tag: string; readonly message: string }>
  readonly continuations: ReadonlyArray<BootContinuation>
}

/**
 * The operations of a started @effect/ai host.
 *
 * @since 0.1.0
 * @category models
 */
export interface AiHostShape {
  readonly workspace: string
  /** The workspace identity (the marker file's UUID) every run header records. */
  readonly workspaceId: string
  /** Whether startup repair (and continuation) ran, with its report, or was skipped because a live host holds the lock. */
  readonly startup: HostStartup.StartupRepair<BootReport>
  /** Runs one durable turn (`DurableTurn.run`) on a new run with these ids. */
  readonly turn: (input: { readonly ids: RunIds; readonly prompt: string }) => Effect.Effect<DurableTurn.TurnResult, AiHostTurnError>
  /**
   * Continues run `runId` now, on a person's explicit confirmation (docs/spec/04-continuation.md "The flag": the API's `confirmed: true`,
   * as `runtime-resume resume --yes`), with no flag needed — for a run a person resolved (`resolve --edit/--retry`) or
   * one the boot reported `awaiting_confirmation`. Plans with `confirmed: true` (`ContinuationExecutor.prepare`); a
   * plan that parks is `NotContinued` (`parked`, its reasons), nothing taken or written. A `Continue` plan
   * (`authorizedBy: "confirmation"`) waits for this host's turns in flight to end (new turns wait for it), lets go of
   * the host's shared owner hold, executes under the exclusive owner lock (`ContinuationExecutor.execute`: revalidate,
   * claim, `ContinuationStarted`, the continued turn through this host's LanguageModel and toolkit, each of its tool
   * calls durable), then takes the shared hold again. Another live host on the workspace means `WorkspaceLocked`
   * (after the owner wait), nothing written. Call it only on a person's word: the host's own code must never call it
   * on its own behalf (that is what the flag is for).
   */
  readonly continueConfirmed: (runId: string) => Effect.Effect<ContinuationOutcome, ContinueConfirmedError>
}

/**
 * What `continueConfirmed` can fail with: planning's and execution's typed errors, and the owner lock's.
 *
 * @since 0.1.0
 * @category models
 */
export type ContinueConfirmedError =
  | Effect.Effect.Error<ReturnType<typeof ContinuationExecutor.prepare>>
  | Effect.Effect.Error<ReturnType<typeof ContinuationExecutor.execute>>
  | OwnerLockError

/**
 * What a host's turn can fail with: the turn's errors and those of the run header store.
 *
 * @since 0.1.0
 * @category models
 */
export type AiHostTurnError = DurableTurn.DurableTurnError | { readonly _tag: string; readonly message: string }

/**
 * A started @effect/ai host (its layer: `AiHost.layer` in `runtime-resume/ai`).
 *
 * @since 0.1.0
 * @category tags
 */
export class AiHost extends Context.Tag("runtime-resume/AiHost")<AiHost, AiHostShape>() {}
