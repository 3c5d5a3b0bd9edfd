// `inspect` (docs/spec/06-cli.md): every run of the store, in order of first commit, with its status and its plan or its typed error.
// It reads through `ScanRuns.scanRuns` (one pass where the store can) and plans with `planResume`'s planner.
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { LedgerCorruption, RuntimeOffsetMismatch } from "../Domain/Errors.js"
import { RunNotFound } from "../Domain/Errors.js"
import type { ExpectedHighWaterInput } from "../Domain/HighWater.js"
import { RunId } from "../Domain/Ids.js"
import type { ResumePlan } from "../Domain/ResumePlan.js"
import { TerminalFact } from "../Domain/ResumePlan.js"
import type { TerminalStatus } from "../Domain/RuntimeEvent.js"
import { isUnsettled, ToolOperation, ToolOperationStatus } from "../Domain/ToolOperation.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { Decision } from "../Domain/Rules/Decide.js"
import { decide, exitCode } from "../Domain/Rules/Decide.js"
import * as ResumePlanner from "../Domain/Rules/ResumePlanner.js"
import type * as RunVerifier from "../Domain/Rules/RunVerifier.js"
import * as VerifiedRead from "../Domain/Rules/VerifiedRead.js"
import { checkIntegrity, scanRuns } from "../Services/ScanRuns.js"

/**
 * How many rows `inspect` and `verify` read per page.
 *
 * @since 0.1.0
 * @category constants
 */
export const PAGE_SIZE = 1000

/**
 * What `inspectWorkspace` looks at.
 *
 * @since 0.1.0
 * @category models
 */
export interface InspectOptions {
  /** Only this run; absent from the store: `RunNotFound`. */
  readonly runId?: string
  /** `planResume`'s expectation over the run's whole committed prefix; only with `runId`. */
  readonly expectedHighWater?: ExpectedHighWaterInput
  readonly pageSize?: number
}

/**
 * A run's status: open, or the status its `RunTerminated` sealed it with.
 *
 * @since 0.1.0
 * @category models
 */
export type RunStatus = "open" | TerminalStatus

/**
 * A plan as `inspect --json` shows it: the ResumePlan's fields, with `replay` as event ids in replay order.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanView {
  readonly decision: ResumePlan["decision"]
  readonly reasons: ReadonlyArray<string>
  readonly highWater: { readonly seq: number; readonly digest: string }
  readonly requiresVerification: boolean
  readonly directive?: string
  readonly operations: ReadonlyArray<typeof ToolOperation.Encoded>
  readonly replay: ReadonlyArray<string>
  readonly terminal?: typeof TerminalFact.Encoded
}

/**
 * The errors a run's plan can fail with; each is shown on its run.
 *
 * @since 0.1.0
 * @category models
 */
export type RunError = LedgerCorruption | RuntimeOffsetMismatch

/**
 * One run as `inspect` shows it: `plan` when it was computed, `error` when it failed.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunInspection {
  readonly runId: string
  /** The session of the run's first event, when a row could be read. */
  readonly sessionId?: string
  /** Present with the plan. */
  readonly status?: RunStatus
  readonly decision: Decision
  readonly plan?: PlanView
  readonly error?: RunError
  /**
   * Present when every unsettled operation of the run was abandoned by a person (`manual_abandon`, docs/spec/05-reconciliation.md): the run
   * stays `blocked`, and this says so and by whom (the actors, in operation order).
   */
  readonly abandoned?: { readonly by: ReadonlyArray<string> }
}

/**
 * Whether a plan's only unsettled operations are `manual_abandon` parks, and by whom; `undefined` otherwise.
 *
 * @since 0.1.0
 * @category programs
 */
export const abandonedBy = (plan: ResumePlan): { readonly by: ReadonlyArray<string> } | undefined => {
  const unsettled = plan.operations.filter(isUnsettled)
  if (unsettled.length === 0) return undefined
  const by: Array<string> = []
  for (const op of unsettled) {
    if (op.status !== "parked" || op.recovery?.reasonCode !== "manual_abandon") return undefined
    if (!by.includes(op.recovery.provenance.actor)) by.push(op.recovery.provenance.actor)
  }
  return { by }
}

/**
 * Every inspected run, in order of first commit.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceInspection {
  readonly runs: ReadonlyArray<RunInspection>
}

const encodeOperation = Schema.encodeSync(ToolOperation)
const encodeTerminal = Schema.encodeSync(TerminalFact)

const STATUSES: ReadonlySet<unknown> = new Set(ToolOperationStatus.literals)
const OPERATION_ID = /^op_[0-9a-f]{32}$/
// Any UTF-16 surrogate: such an id is left to the schema's own well-formedness check.
const SURROGATE = /[\ud800-\udfff]/
const isPositiveSafeInt = (n: unknown): boolean => typeof n === "number" && Number.isSafeInteger(n) && n > 0
// An optional field of an operation: absent, or present with a value `valid` accepts (never present as undefined).
const optionalValid = (op: ToolOperation, key: "dispatchSeq" | "responseSeq" | "operationId", valid: (v: unknown) => boolean): boolean =>
  op[key] === undefined ? !(key in op) : valid(op[key])

/**
 * `Schema.encodeSync(ToolOperation)(op)` without the schema machinery, for the operations whose every field it would
 * check plainly passes (an operation instance with no recovery, its ids free of surrogates and well formed, its seqs
 * positive safe integers, its status one of the literals): the same object, keys in the schema's order, absent
 * optional fields absent. Any other operation goes through the schema itself (which encodes it or throws as before).
 *
 * @since 0.1.0
 * @category programs
 */
export const encodeOperationView = (op: ToolOperation): typeof ToolOperation.Encoded => {
  if (
    !(op instanceof ToolOperation) || op.recovery !== undefined || "recovery" in op ||
    typeof op.callId !== "string" || op.callId.length === 0 || SURROGATE.test(op.callId) ||
    typeof op.name !== "string" || !STATUSES.has(op.status) || !isPositiveSafeInt(op.callSeq) ||
    !optionalValid(op, "dispatchSeq", isPositiveSafeInt) || !optionalValid(op, "responseSeq", isPositiveSafeInt) ||
    !optionalValid(op, "operationId", (v) => typeof v === "string" && OPERATION_ID.test(v))
  ) return encodeOperation(op)
  const out: { -readonly [K in keyof typeof ToolOperation.Encoded]: (typeof ToolOperation.Encoded)[K] } = {
    callId: op.callId,
    name: op.name,
    status: op.status,
    callSeq: op.callSeq
  }
  if (op.dispatchSeq !== undefined) out.dispatchSeq = op.dispatchSeq
  if (op.responseSeq !== undefined) out.responseSeq = op.responseSeq
  if (op.operationId !== undefined) out.operationId = op.operationId
  return out
}

/**
 * The JSON view of a plan (docs/spec/06-cli.md).
 *
 * @since 0.1.0
 * @category programs
 */
export const planView = (plan: ResumePlan): PlanView => ({
  decision: plan.decision,
  reasons: [...plan.reasons],
  highWater: { seq: plan.highWater.seq, digest: plan.highWater.digest },
  requiresVerification: plan.requiresVerification,
  ...(plan.directive !== undefined ? { directive: plan.directive } : {}),
  operations: plan.operations.map(encodeOperationView),
  replay: plan.replay.map((ref) => ref.id),
  ...(plan.terminal !== undefined ? { terminal: encodeTerminal(plan.terminal) } : {})
})

/**
 * The exit code of an inspection: the maximum over its runs (0 when there is none).
 *
 * @since 0.1.0
 * @category programs
 */
export const inspectionExitCode = (inspection: WorkspaceInspection): 0 | 1 | 2 =>
  inspection.runs.reduce<0 | 1 | 2>((max, run) => {
    const code = exitCode(run.decision)
    return code > max ? code : max
  }, 0)

/**
 * Plans every run of the store (or only `options.runId`) with `planResume`'s planner, after the store's own integrity
 * check (a file that fails it is `LedgerDamaged`). The whole workspace is read in one pass where the store can
 * (`ScanRuns.scanRuns`). A run whose plan fails with `LedgerCorruption` or `RuntimeOffsetMismatch` shows that error;
 * other read errors fail the whole.
 *
 * @since 0.1.0
 * @category programs
 */
export const inspectWorkspace = Effect.fn("InspectWorkspace.inspectWorkspace")(function*(options: InspectOptions = {}) {
  const store = yield* RuntimeEventStore
  yield* checkIntegrity(store)
  const pageSize = options.pageSize ?? PAGE_SIZE
  let only: RunId | undefined
  if (options.runId !== undefined) {
    const wanted = options.runId
    const listed = yield* store.listRuns()
    only = RunId.make(wanted, true)
    if (!listed.includes(only)) return yield* new RunNotFound({ runId: wanted, message: `run ${wanted} has no committed event in this store` })
  }
  const runs = new Map<string, ScannedRun>()
  // The run of the row before: a run's rows mostly come one after another, so the map is asked when the run changes.
  let currentId: string | undefined
  let current: ScannedRun | undefined
  // A store's own verified scan hands each run's reader's verifier over before the run's first row: the run's planner
  // follows it (one call index, built once, by the reader). It is taken up when the run's first item arrives, so the
  // runs keep the order of their items.
  const scan = scanRuns(store, pageSize, only)
  const follow = VerifiedRead.scanFollowOf(scan)
  const verifiers = new Map<string, RunVerifier.RunVerifier>()
  const read = follow === undefined ? scan : follow((verifier) => {
    verifiers.set(verifier.runId, verifier)
  })
  // Chunk by chunk (one effect per chunk, not per row: a million rows would be a million effects), each as its array.
  yield* read.pipe(
    Stream.runForEachChunk((chunk) =>
      Effect.sync(() => {
        const items = Chunk.toReadonlyArray(chunk)
        for (let i = 0; i < items.length; i++) {
          const item = items[i]!
          const runId = item._tag === "Row" ? item.row.event.runId : item.runId
          let run = runId === currentId ? current : runs.get(runId)
          if (run === undefined) {
            runs.set(runId, run = { state: ResumePlanner.initial(runId) })
            const verifier = verifiers.get(runId)
            if (verifier !== undefined) {
              verifiers.delete(runId)
              ResumePlanner.follow(run.state!, verifier)
            }
          }
          currentId = runId
          current = run
          if (run.failed !== undefined) continue
          if (item._tag === "Failed") {
            run.failed = failedRun(runId, run.sessionId, item.error)
            continue
          }
          const state = run.state!
          run.sessionId ??= item.row.event.sessionId
          ResumePlanner.step(state, item.row)
          if (state.failure !== undefined) {
            run.failed = failedRun(runId, run.sessionId, state.failure)
            run.state = undefined
          }
        }
      })
    )
  )
  if (only !== undefined && !runs.has(only)) return yield* new RunNotFound({ runId: only, message: `run ${only} has no committed event in this store` })
  const inspected: Array<RunInspection> = []
  for (const [runId, run] of runs) {
    if (run.failed !== undefined) {
      inspected.push(run.failed)
      continue
    }
    const finished = ResumePlanner.finish(run.state!, {
      runId,
      ...(options.expectedHighWater !== undefined ? { expectedHighWater: options.expectedHighWater } : {})
    })
    // The planner's state (its verifier's call index and ids) is let go before the view is built: only the plan is needed.
    run.state = undefined
    inspected.push(Either.match(finished, {
      onLeft: (error) => failedRun(runId, run.sessionId, error),
      onRight: (plan) => planned(runId, run.sessionId, plan)
    }))
  }
  const inspection: WorkspaceInspection = { runs: inspected }
  return inspection
})

// A run while the scan reads it: its planner's state until it is planned, or what made it fail.
interface ScannedRun {
  state: ResumePlanner.ResumePlannerState | undefined
  sessionId?: string
  failed?: RunInspection
}

const planned = (runId: string, sessionId: string | undefined, plan: ResumePlan): RunInspection => {
  const abandoned = abandonedBy(plan)
  return {
    runId,
    ...(sessionId !== undefined ? { sessionId } : {}),
    status: plan.terminal?.status ?? "open",
    decision: decide(plan),
    plan: planView(plan),
    ...(abandoned !== undefined ? { abandoned } : {})
  }
}

const failedRun = (runId: string, sessionId: string | undefined, error: RunError): RunInspection => ({
  runId,
  ...(sessionId !== undefined ? { sessionId } : {}),
  decision: decide(error),
  error
})
