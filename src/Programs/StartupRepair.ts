// Startup repair (docs/spec/04-continuation.md): brings every managed, non-terminal run to a terminal state from durable facts alone.
// The caller holds the workspace owner lock exclusively; every step is idempotent, so a killed repair converges.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { EventId } from "../Domain/Ids.js"
import { RepairedRun, RepairFailure, RepairReport } from "../Domain/RepairReport.js"
import { isTerminalStatus, RunHeader, type StatusReason } from "../Domain/RunHeader.js"
import { RunTerminated, RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { planResume } from "../Domain/Rules/PlanResume.js"

/**
 * The `failureClass` of the `RunTerminated` repair appends to an interrupted run.
 *
 * @since 0.1.0
 * @category constants
 */
export const INTERRUPTED = "process_interrupted"

/** Rows per page when repair reads (and verifies) a run. */
const PAGE = 1000

/**
 * The id of the `RunTerminated` repair appends to a run: derived from the run, so a rerun can never add a second.
 *
 * @since 0.1.0
 * @category programs
 */
export const terminatedEventId = (runId: string): EventId => EventId.make(`${runId}:repair:terminated`, true)

const failureOf = (runId: RunHeader["runId"], error: { readonly _tag: string; readonly message: string }): RepairFailure =>
  new RepairFailure({
    runId,
    error: error._tag,
    ...("reason" in error && typeof error.reason === "string" ? { reason: error.reason } : {}),
    message: error.message
  })

// One managed, non-terminal run: read (and verify) its whole ledger, then act on what it holds.
const repairRun = (header: RunHeader) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const runId = header.runId
    const plan = yield* planResume(store.readRunPages(runId, PAGE), { runId }).pipe(
      Effect.map(Option.some),
      Effect.catchTag("RunNotFound", () => Effect.succeed(Option.none()))
    )
    const now = yield* Clock.currentTimeMillis
    if (Option.isNone(plan)) {
      // A header and no events: a continuation whose start never committed. Nothing is appended.
      const reason: StatusReason = "continuation_abandoned_before_provider_call"
      yield* headers.setStatus(runId, "failed", { reason, at: now })
      return new RepairedRun({ runId, action: "abandoned_continuation_closed", status: "failed", statusReason: reason })
    }
    const terminal = plan.value.terminal
    if (terminal !== undefined) {
      // The terminal event committed before the header (the order of 04): bring the header in line. A terminal event
      // repair itself appended keeps its reason, so a repair killed between its two writes ends where one that was not killed ends.
      const reason: StatusReason | undefined = terminal.failureClass === INTERRUPTED ? "process_interrupted" : undefined
      yield* headers.setStatus(runId, terminal.status, { ...(reason !== undefined ? { reason } : {}), at: now })
      return new RepairedRun({ runId, action: "header_caught_up", status: terminal.status, ...(reason !== undefined ? { statusReason: reason } : {}) })
    }
    // Events but no terminal event: seal the run at the prefix just verified, then the header.
    const [row] = yield* store.append(runId, [
      new RuntimeEvent({
        id: terminatedEventId(runId),
        sessionId: header.sessionId,
        invocationId: header.invocationId,
        runId,
        turnId: header.turnId,
        ts: now,
        body: new RunTerminated({ status: "failed", failureClass: INTERRUPTED })
      })
    ], { expectedHighWater: plan.value.highWater })
    yield* headers.setStatus(runId, "failed", { reason: "process_interrupted", at: now })
    return new RepairedRun({
      runId,
      action: "interrupted_run_closed",
      status: "failed",
      statusReason: "process_interrupted",
      ...(row !== undefined ? { terminatedSeq: row.seq } : {})
    })
  })

/**
 * Repairs the workspace behind the `RuntimeEventStore` and `RunHeaderStore` (docs/spec/04-continuation.md's table). Every managed run whose
 * header is not terminal is read and verified whole, then: terminal event present → header brought in line; no events →
 * header `failed` / `continuation_abandoned_before_provider_call`, nothing appended; events without a terminal event →
 * `RunTerminated` failed / `process_interrupted` appended at the verified high-water, then the header. A run that cannot
 * be read or written is reported in `failed` and left as it is; runs without a header are reported as `unmanaged` and
 * never touched. Run it under the exclusive owner lock. Running it again, or after it was killed, converges.
 *
 * @since 0.1.0
 * @category programs
 */
export const repair: Effect.Effect<RepairReport, never, RuntimeEventStore | RunHeaderStore> = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const headers = yield* RunHeaderStore
  const repaired: Array<RepairedRun> = []
  const failed: Array<RepairFailure> = []
  let alreadyTerminal = 0
  const all = yield* Effect.either(headers.list())
  if (all._tag === "Left") {
    // The header store itself cannot be read: nothing is managed for sure, so nothing is changed.
    return new RepairReport({
      repaired,
      failed: [failureOf("" as RunHeader["runId"], all.left)],
      unmanaged: [],
      alreadyTerminal
    })
  }
  for (const header of all.right) {
    if (isTerminalStatus(header.status)) {
      alreadyTerminal++
      continue
    }
    const result = yield* Effect.either(repairRun(header).pipe(Effect.withSpan("StartupRepair.run", { attributes: { runId: header.runId } })))
    if (result._tag === "Right") repaired.push(result.right)
    else failed.push(failureOf(header.runId, result.left))
  }
  const managed = new Set<string>(all.right.map((h) => h.runId))
  const listed = yield* Effect.either(store.listRuns())
  const unmanaged = listed._tag === "Right" ? listed.right.filter((runId) => !managed.has(runId)) : []
  if (listed._tag === "Left") failed.push(failureOf("" as RunHeader["runId"], listed.left))
  return new RepairReport({ repaired, failed, unmanaged, alreadyTerminal })
}).pipe(Effect.withSpan("StartupRepair.repair"))

/**
 * What `adopt` did: the unmanaged runs it wrote a header for, and those it could not read or write (left as they are).
 *
 * @since 0.1.0
 * @category models
 */
export interface AdoptReport {
  readonly adopted: ReadonlyArray<RunHeader["runId"]>
  readonly failed: ReadonlyArray<RepairFailure>
}

/**
 * `repair --adopt` (docs/recovery.md, state `unmanaged`): writes a run header for every run of the ledger that has
 * none, from the ledger's own facts (the session, invocation and turn of its first event), status `running`, in
 * `workspaceId`. Nothing in the ledger is touched; `repair` then closes each adopted run like any managed one (sealing
 * an open one with `RunTerminated` failed/process_interrupted), so reconcile and resolve can settle it. Run it under
 * the exclusive owner lock. A header written meanwhile by someone else counts as adopted (`RunHeaderExists`).
 *
 * @since 0.1.0
 * @category programs
 */
export const adopt = (workspaceId: string): Effect.Effect<AdoptReport, never, RuntimeEventStore | RunHeaderStore> =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const adopted: Array<RunHeader["runId"]> = []
    const failed: Array<RepairFailure> = []
    const all = yield* Effect.either(headers.list())
    if (all._tag === "Left") return { adopted, failed: [failureOf("" as RunHeader["runId"], all.left)] }
    const managed = new Set<string>(all.right.map((h) => h.runId))
    const listed = yield* Effect.either(store.listRuns())
    if (listed._tag === "Left") return { adopted, failed: [failureOf("" as RunHeader["runId"], listed.left)] }
    for (const runId of listed.right) {
      if (managed.has(runId)) continue
      const first = yield* Effect.either(store.readRunPages(runId, 1).pipe(Stream.take(1), Stream.runHead))
      if (first._tag === "Left") {
        failed.push(failureOf(runId, first.left))
        continue
      }
      if (Option.isNone(first.right)) continue
      const event = first.right.value.event
      const now = yield* Clock.currentTimeMillis
      const created = yield* Effect.either(headers.create(
        new RunHeader({
          runId,
          sessionId: event.sessionId,
          invocationId: event.invocationId,
          turnId: event.turnId,
          status: "running",
          workspaceId,
          createdAt: now,
          updatedAt: now
        })
      ))
      if (created._tag === "Left" && created.left._tag !== "RunHeaderExists") failed.push(failureOf(runId, created.left))
      else adopted.push(runId)
    }
    return { adopted, failed }
  }).pipe(Effect.withSpan("StartupRepair.adopt"))
