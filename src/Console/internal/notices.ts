// What the console's notices say after an action (docs/recovery.md): what happened to each operation — settled, parked
// (as diverged, …) or left for a person — never "reconciled" when nothing was settled.
import type { ReconcileReport } from "../../Domain/Settlement.js"
import type { NoticeTone } from "../ConsoleActions.js"

/**
 * A notice: one line, and whether it may be green.
 *
 * @since 0.1.0
 * @category models
 */
export interface Notice {
  readonly summary: string
  readonly tone: NoticeTone
}

const words = (code: string): string => code.replace(/^reconcile_/, "").replace(/_/g, " ")

const count = (n: number, what: string): string => `${n} ${what}`

/**
 * The notice of one run's reconcile: how many operations it settled, parked and left, then each with its call, tool
 * and reason. Green (`settled`) only when it settled at least one and parked or left none.
 *
 * @since 0.1.0
 * @category console
 */
export const reconcileNotice = (runId: string, report: ReconcileReport): Notice => {
  const ops = report.operations.filter((op) => op.runId === runId)
  const settled = ops.filter((op) => op.outcome === "completed")
  const parked = ops.filter((op) => op.outcome === "parked")
  const left = ops.filter((op) => op.outcome === "left")
  const unreadable = report.unreadable.filter((r) => r.runId === runId || r.runId === "")
  if (report.unmanaged.includes(runId)) {
    return {
      summary: `Reconcile settled nothing: run ${runId} has no run header (it is unmanaged), so reconcile leaves it as it is`,
      tone: "attention"
    }
  }
  if (ops.length === 0 && unreadable.length === 0) {
    return { summary: `Reconcile settled nothing: run ${runId} has no operation it could settle`, tone: "attention" }
  }
  const head = [
    settled.length > 0 ? `settled ${count(settled.length, settled.length === 1 ? "operation" : "operations")}` : "settled nothing",
    ...(parked.length > 0 ? [`parked ${parked.length}`] : []),
    ...(left.length > 0 ? [`${left.length} ${left.length === 1 ? "needs" : "need"} a person`] : [])
  ].join(", ")
  const details = [
    ...settled.map((op) => `${op.callId} (${op.name}) settled: ${words(op.reason)}`),
    ...parked.map((op) => `${op.callId} (${op.name}) parked as ${words(op.reason)}: a person decides (resolve)`),
    ...left.map((op) =>
      op.reason === "needs_person"
        ? `${op.callId} (${op.name}) needs a person: ${op.message}`
        : `${op.callId} (${op.name}) left unsettled (${op.reason}): ${op.message}`
    ),
    ...unreadable.map((r) => `the run could not be read (${r.error}): ${r.message}`)
  ]
  return {
    summary: `Reconcile ${head}. ${details.join("; ")}`,
    tone: settled.length > 0 && parked.length === 0 && left.length === 0 && unreadable.length === 0 ? "settled" : "attention"
  }
}

/**
 * The notice of a recorded decision: what the model will see, or that the turn was abandoned, and by whom.
 *
 * @since 0.1.0
 * @category console
 */
export const resolveNotice = (outcome: {
  readonly callId: string
  readonly reasonCode: "manual_retry" | "manual_edit" | "manual_abandon"
  readonly actor: string
  readonly alreadyRecorded: boolean
}): Notice => {
  const what = outcome.reasonCode === "manual_edit"
    ? "your result is recorded: the model sees it when the turn is continued"
    : outcome.reasonCode === "manual_retry"
    ? "retry is recorded: the model is told the outcome is unknown when the turn is continued"
    : "abandoned: the turn stays stopped"
  return {
    summary: `${outcome.callId}: ${what} (by ${outcome.actor})${outcome.alreadyRecorded ? "; this decision was already recorded" : ""}`,
    tone: "settled"
  }
}
