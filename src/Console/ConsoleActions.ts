// The two state-changing actions of the recovery console (docs/spec/06-cli.md, "The recovery console"): reconcile a run, resolve one operation.
// The console never implements them: a layer maps them onto the programs the CLI verbs run (`Reconcile`, `Resolve`).
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

/**
 * A person's choice on one operation (docs/spec/05-reconciliation.md): retry, edit (the result the model sees), abort.
 *
 * @since 0.1.0
 * @category models
 */
export type ConsoleChoice =
  | { readonly _tag: "retry" }
  | { readonly _tag: "edit"; readonly result: unknown; readonly isError: boolean }
  | { readonly _tag: "abort" }

/**
 * How a notice reads: `settled` (green) only when the action settled something and left nothing for a person;
 * `attention` (amber) when it parked an operation, left one for a person, or settled nothing.
 *
 * @since 0.1.0
 * @category models
 */
export type NoticeTone = "settled" | "attention"

/**
 * What an action did, as the page shows it: one line saying what happened, its tone, the program's own report.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsoleActionOutcome {
  readonly summary: string
  readonly tone: NoticeTone
  readonly report: unknown
}

/**
 * An action that failed: its tag and message (the program's typed error), shown on the page.
 *
 * @since 0.1.0
 * @category errors
 */
export class ConsoleActionFailed extends Schema.TaggedError<ConsoleActionFailed>()("ConsoleActionFailed", {
  action: Schema.String,
  reason: Schema.String,
  message: Schema.String
}) {}

/**
 * The actions the console's buttons call.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsoleActionsShape {
  /** Reconciles one run with the built-in file-write observation (as `runtime-resume reconcile --run`). */
  readonly reconcile: (runId: string) => Effect.Effect<ConsoleActionOutcome, ConsoleActionFailed>
  /** Records a person's decision on one operation (as `runtime-resume resolve`). */
  readonly resolve: (
    runId: string,
    callId: string,
    choice: ConsoleChoice,
    actor: string
  ) => Effect.Effect<ConsoleActionOutcome, ConsoleActionFailed>
}

/**
 * The console's actions service.
 *
 * @since 0.1.0
 * @category tags
 */
export class ConsoleActions extends Context.Tag("runtime-resume/ConsoleActions")<ConsoleActions, ConsoleActionsShape>() {}

const notWired = (action: string) =>
  new ConsoleActionFailed({
    action,
    reason: "not_wired",
    message: `the ${action} action is not connected in this build: use the CLI (runtime-resume ${action} --help)`
  })

/**
 * The actions before the reconcile/resolve programs are part of the build: every action fails with `not_wired`, and
 * nothing is written. `ConsoleActionsLive.layer` is the one place where the programs are connected.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerUnwired: Layer.Layer<ConsoleActions> = Layer.succeed(ConsoleActions, {
  reconcile: () => Effect.fail(notWired("reconcile")),
  resolve: () => Effect.fail(notWired("resolve"))
})
