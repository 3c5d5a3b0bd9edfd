// The console's one source of recovery advice (docs/recovery.md): the facts the console reads about a run, given to
// `RecoveryState.runState` (the function every CLI verb takes its advice from), and what that state admits on a page.
import type { HintContext } from "../../Cli/internal/nextCommand.js"
import { shellCommand } from "../../Cli/internal/nextCommand.js"
import type {
  ContinuationFacts,
  HeaderFacts,
  NextStep,
  OperationFacts,
  PlanErrorFacts,
  PlanFacts,
  RecoveryVerb,
  RunFacts,
  RunState,
  StoreKind
} from "../../Domain/RecoveryState.js"
import { continuationsOf, runState } from "../../Domain/RecoveryState.js"
import type { RecoveryMode } from "../../Domain/RuntimeEvent.js"
import type { RunInspection } from "../../Programs/InspectWorkspace.js"
import type { RunGlance } from "./data.js"

/**
 * An operation the console can draw and, when its run's state admits it, resolve.
 *
 * @since 0.1.0
 * @category models
 */
export interface StateOperation {
  readonly callId: string
  readonly name: string
  readonly status: OperationFacts["status"]
  readonly recovery?: {
    readonly disposition: "completed" | "parked"
    readonly reasonCode: string
    readonly provenance: { readonly kind: string; readonly actor: string }
  }
}

/**
 * What a run's state admits on its page: the reconcile button, and the operations a person may resolve.
 *
 * @since 0.1.0
 * @category models
 */
export interface Admitted {
  /** "Reconcile this run" is shown: the one next step is `reconcile` (an operation the CLI can observe). */
  readonly reconcile: boolean
  /** The operations with a resolve form (indeterminate, or parked by a reconciler), in run order. */
  readonly resolve: ReadonlyArray<StateOperation>
}

/**
 * A run's state (`RecoveryState.runState`) and what it admits.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsoleRunState {
  readonly run: RunState
  readonly admitted: Admitted
}

/**
 * How the console reads a run's dispatch facts: its recovery mode, and whether the CLI can observe it.
 *
 * @since 0.1.0
 * @category models
 */
export interface DispatchFacts {
  readonly mode: RecoveryMode
  readonly cliObservable: boolean
}

/**
 * The workspace-wide facts beside a run's plan: its headers, which runs have events, the store, a live host.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceFacts {
  readonly store: StoreKind
  readonly headers: ReadonlyArray<HeaderFacts>
  readonly withEvents: ReadonlySet<string>
  /** Whether a live host holds the owner lock (`Data.ownerLive`): exclusive steps are not offered then. */
  readonly ownerLive: boolean
}

/**
 * What one run contributes: its plan (its operations, with their dispatch facts when read) or its plan's error.
 *
 * @since 0.1.0
 * @category models
 */
export type Planned =
  | { readonly _tag: "Plan"; readonly plan: Omit<PlanFacts, "operations">; readonly operations: ReadonlyArray<StateOperation> }
  | { readonly _tag: "Error"; readonly error: PlanErrorFacts }

/**
 * The run's facts as `runState` takes them (the workspace's `ownerLive` as the CLI probes it).
 *
 * @since 0.1.0
 * @category console
 */
export const runFacts = (
  runId: string,
  planned: Planned,
  dispatch: ReadonlyMap<string, DispatchFacts>,
  workspace: WorkspaceFacts
): RunFacts => {
  const header = workspace.headers.find((h) => h.runId === runId)
  const continuations: ReadonlyArray<ContinuationFacts> = continuationsOf(workspace.headers, workspace.withEvents).get(runId) ?? []
  return {
    runId,
    planned: planned._tag === "Error"
      ? planned
      : {
        _tag: "Plan",
        plan: {
          ...planned.plan,
          operations: planned.operations.map((op): OperationFacts => {
            const d = dispatch.get(op.callId)
            return { ...op, ...(d !== undefined ? { dispatch: d } : {}) }
          })
        }
      },
    ...(header !== undefined ? { header } : {}),
    continuations,
    ownerLive: workspace.ownerLive,
    store: workspace.store
  }
}

const operationOf = (op: StateOperation): StateOperation => ({
  callId: op.callId,
  name: op.name,
  status: op.status,
  ...(op.recovery !== undefined
    ? { recovery: { disposition: op.recovery.disposition, reasonCode: op.recovery.reasonCode, provenance: op.recovery.provenance } }
    : {})
})

/**
 * A run's plan (or its error) as `inspect` computed it (the verified pages).
 *
 * @since 0.1.0
 * @category console
 */
export const plannedOfInspection = (run: RunInspection): Planned => {
  if (run.plan === undefined) {
    const error = run.error!
    return {
      _tag: "Error",
      error: { _tag: error._tag, ...("reason" in error && typeof error.reason === "string" ? { reason: error.reason } : {}), message: error.message }
    }
  }
  const terminal = run.plan.terminal
  return {
    _tag: "Plan",
    plan: { decision: run.plan.decision, ...(terminal !== undefined ? { terminal: { status: terminal.status } } : {}) },
    operations: run.plan.operations.map(operationOf)
  }
}

/**
 * A run's plan as its glance gives it before it is read in full (indexed reads: its terminal, its unsettled calls):
 * blocked while a call is unsettled. The page that shows it says "not yet verified".
 *
 * @since 0.1.0
 * @category console
 */
export const plannedOfGlance = (glance: RunGlance): Planned => ({
  _tag: "Plan",
  plan: {
    decision: glance.unsettled.length > 0 ? "blocked" : "safe_replay",
    ...(glance.terminal !== undefined ? { terminal: { status: glance.terminal.status } } : {})
  },
  operations: glance.unsettled.map(operationOf)
})

/**
 * The state of a run from its plan (or glance), its dispatch facts and the workspace's facts: THE one way in.
 *
 * @since 0.1.0
 * @category console
 */
export const stateOf = (
  runId: string,
  planned: Planned,
  dispatch: ReadonlyMap<string, DispatchFacts>,
  workspace: WorkspaceFacts
): ConsoleRunState => consoleState(runFacts(runId, planned, dispatch, workspace), planned._tag === "Plan" ? planned.operations : [])

const resolvable = (op: StateOperation): boolean =>
  op.status === "indeterminate" ||
  (op.status === "parked" && op.recovery?.provenance.kind !== "manual" && op.recovery?.reasonCode !== "manual_abandon")

/**
 * THE adapter: the run's state from `runState`, and what it admits. Resolve forms only in the states a person's
 * decision can be recorded in (`unsettled`, `parked`: a sealed run, never an open, settled, abandoned or continued
 * one), for the operations `resolve` accepts; the reconcile button only when reconcile is the one next step.
 *
 * @since 0.1.0
 * @category console
 */
export const consoleState = (facts: RunFacts, operations: ReadonlyArray<StateOperation>): ConsoleRunState => {
  const run = runState(facts)
  const decidable = run.state === "unsettled" || run.state === "parked"
  return {
    run,
    admitted: {
      reconcile: run.person._tag === "Command" && run.person.verb === "reconcile",
      resolve: decidable ? operations.filter(resolvable) : []
    }
  }
}

/**
 * How a next command is printed: the CLI's own hint context (the words that start the tool, store flags, workspace).
 *
 * @since 0.1.0
 * @category models
 */
export type CommandContext = HintContext

/**
 * One command line as the CLI prints it (`shellCommand`: every word quoted by `shellWord`).
 *
 * @since 0.1.0
 * @category console
 */
export const commandLine = (context: CommandContext, verb: RecoveryVerb, args: ReadonlyArray<string>): string =>
  shellCommand({ _tag: "Command", verb, args, why: "" }, context)

/**
 * A next step as the page prints it: one sentence, and the command line(s) to type (a choice: each of them).
 *
 * @since 0.1.0
 * @category models
 */
export interface RenderedStep {
  readonly text: string
  readonly commands: ReadonlyArray<string>
}

/**
 * Renders a next step (`RecoveryState.NextStep`) for a person at a terminal, as the CLI renders it.
 *
 * @since 0.1.0
 * @category console
 */
export const renderStep = (step: NextStep, context: CommandContext): RenderedStep => {
  if (step._tag !== "Command") return { text: step.text, commands: [] }
  return { text: step.why, commands: (step.choices ?? [step.args]).map((args) => shellCommand(step, context, args)) }
}

/**
 * The short word of a state for a badge (`RecoveryStateName` with spaces).
 *
 * @since 0.1.0
 * @category console
 */
export const stateLabel = (run: RunState): string => run.state.replace(/_/g, " ")
