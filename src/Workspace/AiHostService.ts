// The AiHost service (issue 15): an @effect/ai host started on a workspace in one layer (startup repair, reconcile,
// continuation with the flag), and its durable turns. This file holds the Tag and its interface; the layer is in Layers/.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import type { RepairReport } from "../Domain/RepairReport.js"
import type { ReconcileReport } from "../Domain/Settlement.js"
import type * as HostStartup from "../Programs/HostStartup.js"
import type * as DurableTurn from "../Programs/DurableTurn.js"
import type { RunIds } from "../Programs/EventBuilder.js"

/** What became of one run startup repair closed as interrupted: continued, awaiting a person, parked, or failed. */
export interface BootContinuation {
  readonly sourceRunId: string
  readonly outcome: "continued" | "awaiting_confirmation" | "parked" | "failed"
  /** The continuation run (`continued`). */
  readonly continuationRunId?: string
  /** The park reasons (`parked`), or the error's tag and code (`failed`). */
  readonly codes: ReadonlyArray<string>
}

/** What the host's startup did under the exclusive owner lock: repair's report, reconcile's, each continuation attempt. */
export interface BootReport {
  readonly repair: RepairReport
  /** Reconcile's report (spec 05), or the error that stopped it (the start went on). */
  readonly reconcile: Either.Either<ReconcileReport, { readonly _tag: string; readonly message: string }>
  readonly continuations: ReadonlyArray<BootContinuation>
}

/** The operations of a started @effect/ai host. */
export interface AiHostShape {
  readonly workspace: string
  /** The workspace identity (the marker file's UUID) every run header records. */
  readonly workspaceId: string
  /** Whether startup repair (and continuation) ran, with its report, or was skipped because a live host holds the lock. */
  readonly startup: HostStartup.StartupRepair<BootReport>
  /** Runs one durable turn (`DurableTurn.run`) on a new run with these ids. */
  readonly turn: (input: { readonly ids: RunIds; readonly prompt: string }) => Effect.Effect<DurableTurn.TurnResult, AiHostTurnError>
}

/** What a host's turn can fail with: the turn's errors and those of the run header store. */
export type AiHostTurnError = DurableTurn.DurableTurnError | { readonly _tag: string; readonly message: string }

/** A started @effect/ai host (its layer: `AiHost.layer` in `runtime-resume/ai`). */
export class AiHost extends Context.Tag("runtime-resume/AiHost")<AiHost, AiHostShape>() {}
