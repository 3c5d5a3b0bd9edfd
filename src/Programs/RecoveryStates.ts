// The facts `RecoveryState.runState` needs, gathered from an inspection, the run headers, the owner lock and the
// dispatches of the blocked operations (docs/recovery.md); every verb's advice is `runState` over these facts.
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { FILE_WRITE_EVIDENCE_TOOL } from "../Domain/FileWriteEvidence.js"
import { RunId } from "../Domain/Ids.js"
import type { HeaderFacts, OperationFacts, PlanFacts, RunFacts, RunState, StoreKind } from "../Domain/RecoveryState.js"
import { continuationsOf, runState, workspaceState } from "../Domain/RecoveryState.js"
import { ToolDispatched } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { RunInspection, WorkspaceInspection } from "./InspectWorkspace.js"

/**
 * What a run's dispatches say, by callId: its recovery mode and whether the CLI can observe it.
 *
 * @since 0.1.0
 * @category models
 */
export type DispatchFacts = ReadonlyMap<string, NonNullable<OperationFacts["dispatch"]>>

/** The header fields the state function reads. */
const headerFacts = (header: HeaderFacts): HeaderFacts => ({
  runId: header.runId,
  status: header.status,
  ...(header.statusReason !== undefined ? { statusReason: header.statusReason } : {}),
  ...(header.parentRunId !== undefined ? { parentRunId: header.parentRunId } : {}),
  ...(header.continuationSource !== undefined ? { continuationSource: { runId: header.continuationSource.runId } } : {})
})

/**
 * A run's plan (as `inspect` views it) as `PlanFacts`, with the dispatches read for its blocked operations.
 *
 * @since 0.1.0
 * @category programs
 */
export const planFacts = (run: RunInspection, dispatches?: DispatchFacts): PlanFacts | undefined => {
  const plan = run.plan
  if (plan === undefined) return undefined
  return {
    decision: plan.decision,
    ...(plan.terminal !== undefined ? { terminal: { status: plan.terminal.status } } : {}),
    operations: plan.operations.map((op) => {
      const dispatch = dispatches?.get(op.callId)
      return {
        callId: op.callId,
        name: op.name,
        status: op.status,
        ...(op.recovery !== undefined
          ? {
            recovery: {
              disposition: op.recovery.disposition,
              reasonCode: op.recovery.reasonCode,
              provenance: { kind: op.recovery.provenance.kind, actor: op.recovery.provenance.actor }
            }
          }
          : {}),
        ...(dispatch !== undefined ? { dispatch } : {})
      }
    })
  }
}

/**
 * The facts of every inspected run (docs/recovery.md).
 *
 * @since 0.1.0
 * @category programs
 */
export const runFacts = (
  inspection: WorkspaceInspection,
  headers: ReadonlyArray<HeaderFacts>,
  options: {
    readonly ownerLive: boolean
    readonly store: StoreKind
    readonly dispatches?: ReadonlyMap<string, DispatchFacts>
  }
): ReadonlyArray<RunFacts> => {
  const byRun = new Map(headers.map((h) => [h.runId as string, h]))
  const withEvents = new Set(inspection.runs.map((run) => run.runId))
  const continuations = continuationsOf(headers, withEvents)
  return inspection.runs.map((run): RunFacts => {
    const header = byRun.get(run.runId)
    const plan = planFacts(run, options.dispatches?.get(run.runId))
    return {
      runId: run.runId,
      planned: plan !== undefined
        ? { _tag: "Plan", plan }
        : {
          _tag: "Error",
          error: run.error !== undefined
            ? {
              _tag: run.error._tag,
              ...("reason" in run.error && typeof run.error.reason === "string" ? { reason: run.error.reason } : {}),
              message: run.error.message
            }
            : { _tag: "LedgerCorruption", message: `run ${run.runId} could not be planned` }
        },
      ...(header !== undefined ? { header: headerFacts(header) } : {}),
      continuations: continuations.get(run.runId) ?? [],
      ownerLive: options.ownerLive,
      store: options.store
    }
  })
}

/**
 * Every inspected run's state and the workspace's fold.
 *
 * @since 0.1.0
 * @category programs
 */
export const recoveryStates = (
  inspection: WorkspaceInspection,
  headers: ReadonlyArray<HeaderFacts>,
  options: { readonly ownerLive: boolean; readonly store: StoreKind; readonly dispatches?: ReadonlyMap<string, DispatchFacts> }
) => workspaceState(runFacts(inspection, headers, options).map(runState), { ownerLive: options.ownerLive })

/** Whether a run needs its dispatches read: sealed, with an indeterminate operation that was dispatched. */
const needsDispatches = (run: RunInspection): boolean =>
  run.plan !== undefined && run.plan.terminal !== undefined &&
  run.plan.operations.some((op) => op.status === "indeterminate" && op.dispatchSeq !== undefined)

/**
 * Reads the `ToolDispatched` of every indeterminate operation of the sealed runs (only those rows: `readRowsAt`), for
 * `RecoveryState` to tell what `reconcile` in the CLI can settle from what needs the host or a person. A run whose
 * rows cannot be read gets no entry (its operations then need a person, which is never a wrong step).
 *
 * @since 0.1.0
 * @category programs
 */
export const readDispatches = (inspection: WorkspaceInspection) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const out = new Map<string, DispatchFacts>()
    for (const run of inspection.runs) {
      if (!needsDispatches(run)) continue
      const seqs = run.plan!.operations.flatMap((op) => op.status === "indeterminate" && op.dispatchSeq !== undefined ? [op.dispatchSeq] : [])
      const rows = yield* Effect.either(store.readRowsAt(RunId.make(run.runId, true), seqs))
      if (Either.isLeft(rows)) continue
      const facts = new Map<string, NonNullable<OperationFacts["dispatch"]>>()
      for (const row of rows.right) {
        const body = row.event.body
        if (!(body instanceof ToolDispatched)) continue
        const evidence = body.evidence as unknown
        const tool = typeof evidence === "object" && evidence !== null && "tool" in evidence ? (evidence as { tool: unknown }).tool : undefined
        facts.set(body.callId, {
          mode: body.recoveryMode,
          cliObservable: body.recoveryMode === "reconcilable" && tool === FILE_WRITE_EVIDENCE_TOOL
        })
      }
      out.set(run.runId, facts)
    }
    return out as ReadonlyMap<string, DispatchFacts>
  })

/**
 * The states of the runs that are not settled, in inspection order.
 *
 * @since 0.1.0
 * @category programs
 */
export const pendingStates = (states: ReadonlyArray<RunState>): ReadonlyArray<RunState> =>
  states.filter((state) => state.person._tag !== "Nothing")
