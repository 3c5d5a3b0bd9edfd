// In-memory tail state for the memory and JSONL stores: per-run tail and call index, store-wide ids and invocations.
// Appends are checked against it without scans, so their cost does not depend on the ledger's size.
import * as Either from "effect/Either"
import { AppendRejected } from "../../Domain/Errors.js"
import type { RunNotSealed, RunSealed, RuntimeOffsetMismatch } from "../../Domain/Errors.js"
import * as HighWater from "../../Domain/HighWater.js"
import { canonicalText, type CommittedRow, makeCommittedRow } from "../../Domain/RuntimeEvent.js"
import type { RuntimeEvent } from "../../Domain/RuntimeEvent.js"
import type { FailpointSite } from "../../Services/Failpoints.js"
import type {
  AppendOptions,
  DispatchFacts,
  RunBatch,
  ToolCallState,
  UnsettledCalls,
  UnsettledOperation
} from "../../Services/RuntimeEventStore.js"
import { RunId as RunIdSchema } from "../../Domain/Ids.js"
import * as AppendCheck from "../../Domain/Rules/AppendCheck.js"
import * as LedgerRules from "../../Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import { malformedAppend, offsetMismatch, refusedError } from "./appendErrors.js"

/**
 * One run's tail state and call index.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunState {
  tail: LedgerRules.RunTail
  readonly calls: Map<string, LedgerRules.CallEntry>
}

/**
 * A checked batch, ready to be written and then applied.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlannedRun {
  readonly runId: string
  readonly accepted: AppendCheck.AppendAccepted
  /** The committed rows this append will produce (`end` is the last seq of the group). */
  readonly rows: ReadonlyArray<CommittedRow>
}

/**
 * What `TailIndex.applyJournaled` changed: the ids and invocations it added, and each run's state before.
 *
 * @since 0.1.0
 * @category layers
 */
export class IndexJournal {
  readonly ids: Array<string> = []
  readonly invocations: Array<string> = []
  readonly runs = new Map<
    string,
    { readonly existed: boolean; readonly tail: LedgerRules.RunTail | undefined; readonly calls: Map<string, LedgerRules.CallEntry | undefined> }
  >()
  constructor(readonly runOrder: number) {}
}

// What `check` looks up for one batch: the index and the batches before it in the same write (a class, so an append
// makes no closures).
class BatchLookups implements LedgerRules.Lookups {
  constructor(
    readonly index: TailIndex,
    readonly state: RunState | undefined,
    readonly batchIds: Set<string>,
    readonly batchInvocations: Map<string, string>
  ) {}
  call(callId: string): LedgerRules.CallEntry | undefined {
    return this.state?.calls.get(callId)
  }
  eventIdTaken(id: string): boolean {
    return this.index.ids.has(id) || this.batchIds.has(id)
  }
  invocationOwner(inv: string): string | undefined {
    return this.index.invocations.get(inv) ?? this.batchInvocations.get(inv)
  }
}

/**
 * The in-memory index itself.
 *
 * @since 0.1.0
 * @category layers
 */
export class TailIndex {
  readonly runs = new Map<string, RunState>()
  readonly ids = new Set<string>()
  readonly invocations = new Map<string, string>()
  readonly runOrder: Array<string> = []

  /** The tail of a run, or an empty tail. */
  tailOf(runId: string): LedgerRules.RunTail {
    return this.runs.get(runId)?.tail ?? LedgerRules.emptyTail(runId)
  }

  /** The run's protocol, seal and the committed state of one call (for `toolCallState`). */
  callState(runId: string, callId: string): ToolCallState {
    const state = this.runs.get(runId)
    return callStateOf(state?.tail, state?.calls.get(callId))
  }

  /** The run's calls with no response, in call order (for `unsettledCalls`). */
  unanswered(runId: string): UnsettledCalls {
    const state = this.runs.get(runId)
    return unsettledOf(state?.tail, state?.calls.values() ?? [])
  }

  /** The dispatched calls with no response and no recovery bundle, of every run (or of `runId`): `reconcile`'s candidates. */
  unsettled(runId?: string): ReadonlyArray<UnsettledOperation> {
    const out: Array<UnsettledOperation> = []
    for (const id of runId === undefined ? this.runOrder : this.runs.has(runId) ? [runId] : []) {
      const calls = [...this.runs.get(id)!.calls.values()].filter(isUnsettledCall).sort((x, y) => x.callSeq - y.callSeq)
      for (const call of calls) out.push({ runId: RunIdSchema.make(id, true), call })
    }
    return out
  }

  /**
   * Checks a batch of appends (several runs, all or nothing) without changing anything. `piece` describes one piece
   * of a streamed restore: whether it ends the write (a write may not end inside a recovery bundle) and the `end`
   * of its group (the last seq the whole write gives the run).
   */
  check(
    batches: ReadonlyArray<RunBatch>,
    mode: LedgerRules.WriteMode,
    piece: { readonly endsWrite: boolean; readonly end?: number } = { endsWrite: true }
  ): Either.Either<ReadonlyArray<PlannedRun>, AppendRejected | RunSealed | RunNotSealed | RuntimeOffsetMismatch> {
    const planned: Array<PlannedRun> = []
    const batchIds = new Set<string>()
    const batchInvocations = new Map<string, string>()
    const seen = new Set<string>()
    for (const batch of batches) {
      const runId = batch.runId
      if (batch.events.length === 0) return Either.left(malformedAppend(runId, "an append needs at least one event"))
      if (seen.has(runId)) return Either.left(malformedAppend(runId, "a batch names the run twice"))
      seen.add(runId)
      const state = this.runs.get(runId)
      const tail = state?.tail ?? LedgerRules.emptyTail(runId)
      if (batch.expectedHighWater !== undefined && !HighWater.matches(batch.expectedHighWater, tail)) {
        return Either.left(offsetMismatch(runId, batch.expectedHighWater, tail))
      }
      const lookups = new BatchLookups(this, state, batchIds, batchInvocations)
      const accepted = AppendCheck.checkAppend(tail, lookups, batch.events, mode, piece.endsWrite)
      if (accepted._tag === "Refused") return Either.left(refusedError(runId, tail, accepted))
      for (const row of accepted.rows) batchIds.add(row.event.id)
      if (tail.identity === undefined) batchInvocations.set(batch.events[0]!.invocationId, runId)
      // A piece of a streamed restore belongs to a group that ends where the whole write of the run ends.
      const end = piece.end ?? accepted.tail.seq
      const rows = accepted.rows.map((r) => makeCommittedRow(r.digest, end, r.event, r.seq))
      planned.push({ runId, accepted, rows })
    }
    return Either.right(planned)
  }

  /**
   * Checks recovery bundles of one run (`appendRecoveryBatch`): each in order exactly as `appendRecovery` checks it
   * (`check` in `recovery` mode: one bundle per write, closed), each against the state the bundles before it leave;
   * the first refusal refuses them all. Changes nothing: the state is taken back before it returns.
   */
  checkRecoveryBatch(
    runId: RunBatch["runId"],
    bundles: ReadonlyArray<ReadonlyArray<RuntimeEvent>>
  ): Either.Either<ReadonlyArray<PlannedRun>, AppendRejected | RunSealed | RunNotSealed | RuntimeOffsetMismatch> {
    const journal = new IndexJournal(this.runOrder.length)
    const planned: Array<PlannedRun> = []
    try {
      for (const events of bundles) {
        const checked = this.check([{ runId, events }], "recovery")
        if (Either.isLeft(checked)) return checked
        this.applyJournaled(checked.right, journal)
        planned.push(checked.right[0]!)
      }
      return Either.right(planned)
    } finally {
      this.undo(journal)
    }
  }

  /** Applies checked batches after they were written. */
  apply(planned: ReadonlyArray<PlannedRun>): void {
    for (const p of planned) this.applyRun(p.runId, p.accepted.tail, p.accepted.calls.values(), p.rows)
  }

  /** `apply`, recording in `journal` what it changes, so that `undo` can take it back. */
  applyJournaled(planned: ReadonlyArray<PlannedRun>, journal: IndexJournal): void {
    for (const p of planned) {
      let before = journal.runs.get(p.runId)
      if (before === undefined) {
        const state = this.runs.get(p.runId)
        before = { existed: state !== undefined, tail: state?.tail, calls: new Map() }
        journal.runs.set(p.runId, before)
      }
      const state = this.runs.get(p.runId)
      for (const call of p.accepted.calls.values()) {
        if (!before.calls.has(call.callId)) before.calls.set(call.callId, state?.calls.get(call.callId))
      }
      for (const row of p.rows) journal.ids.push(row.event.id)
      if (state === undefined && p.rows.length > 0) journal.invocations.push(p.rows[0]!.event.invocationId)
    }
    this.apply(planned)
  }

  /** Takes back what `applyJournaled` did since `journal` was made. */
  undo(journal: IndexJournal): void {
    for (const id of journal.ids) this.ids.delete(id)
    for (const inv of journal.invocations) this.invocations.delete(inv)
    for (const [runId, before] of journal.runs) {
      const state = this.runs.get(runId)
      if (!before.existed) this.runs.delete(runId)
      else if (state !== undefined) {
        state.tail = before.tail!
        for (const [callId, call] of before.calls) {
          if (call === undefined) state.calls.delete(callId)
          else state.calls.set(callId, call)
        }
      }
    }
    this.runOrder.length = journal.runOrder
  }

  /** Applies one run's rows (used by `apply` and when a store rebuilds its index at open). */
  applyRun(
    runId: string,
    tail: LedgerRules.RunTail,
    calls: Iterable<LedgerRules.CallEntry>,
    rows: ReadonlyArray<{ readonly event: { readonly id: string; readonly invocationId: string } }>
  ): void {
    let state = this.runs.get(runId)
    if (state === undefined) {
      state = { tail, calls: new Map() }
      this.runs.set(runId, state)
      this.runOrder.push(runId)
      if (rows.length > 0) this.invocations.set(rows[0]!.event.invocationId, runId)
    }
    state.tail = tail
    for (const c of calls) state.calls.set(c.callId, c)
    for (const r of rows) this.ids.add(r.event.id)
  }
}

/**
 * Whether a call is a candidate of `reconcile`: dispatched, no response, no recovery bundle.
 *
 * @since 0.1.0
 * @category layers
 */
export const isUnsettledCall = (call: LedgerRules.CallEntry): boolean =>
  call.dispatchSeq !== undefined && call.responseSeq === undefined && call.recovery === undefined

/**
 * A `ToolCallState` from a run's tail (when it has one) and a call entry (when committed).
 *
 * @since 0.1.0
 * @category layers
 */
export const callStateOf = (tail: LedgerRules.RunTail | undefined, call: LedgerRules.CallEntry | undefined): ToolCallState => ({
  toolBoundary: tail?.identity?.toolBoundary,
  terminalSeq: tail?.terminal?.seq,
  call
})

/**
 * An `UnsettledCalls` from a run's tail and its call entries (those without a response are kept, in call order).
 *
 * @since 0.1.0
 * @category layers
 */
export const unsettledOf = (
  tail: LedgerRules.RunTail | undefined,
  calls: Iterable<LedgerRules.CallEntry>
): UnsettledCalls => {
  const open: Array<LedgerRules.CallEntry> = []
  for (const c of calls) if (c.responseSeq === undefined) open.push(c)
  open.sort((a, b) => a.callSeq - b.callSeq)
  return { toolBoundary: tail?.identity?.toolBoundary, terminalSeq: tail?.terminal?.seq, calls: open }
}

/**
 * The events T1 writes, in order, or why the facts are malformed (nothing is written).
 *
 * @since 0.1.0
 * @category layers
 */
export const dispatchEvents = (runId: string, facts: DispatchFacts): Either.Either<ReadonlyArray<RuntimeEvent>, AppendRejected> => {
  if (facts.dispatch.body._tag !== "ToolDispatched") {
    return Either.left(malformedWriter(runId, facts.dispatch, `the T1 writer's dispatch is a ${facts.dispatch.body._tag}, not a ToolDispatched`))
  }
  if (facts.call === undefined) return Either.right([facts.dispatch])
  const call = facts.call.body
  if (call._tag !== "FunctionCall" || call.callId !== facts.dispatch.body.callId) {
    return Either.left(malformedWriter(runId, facts.call, "the T1 writer's call must be the FunctionCall of the dispatched callId"))
  }
  return Either.right([facts.call, facts.dispatch])
}

const malformedWriter = (runId: string, event: RuntimeEvent, what: string) =>
  new AppendRejected({
    runId,
    eventId: event.id,
    reason: "reserved_fact",
    message: `append to run ${runId} refused at event ${event.id}: ${what}; nothing was written`
  })

/**
 * An exact retry of a dedicated writer: `events` are, id for id and byte for byte, the last rows of the run
 * (`tailRows` ends at the run's tail and holds at least `events.length` rows, plus the row before them when there
 * is one). Then the committed rows are returned and nothing is written; an expected high-water must be the one
 * the first attempt saw. Otherwise `undefined`: the append is checked as usual (and refused).
 *
 * @since 0.1.0
 * @category layers
 */
export const exactRetry = (
  events: ReadonlyArray<RuntimeEvent>,
  tail: LedgerRules.RunTail,
  tailRows: ReadonlyArray<CommittedRow>,
  options?: AppendOptions
): ReadonlyArray<CommittedRow> | undefined => {
  const n = events.length
  if (n === 0 || tailRows.length < n || tail.seq < n) return undefined
  const last = tailRows[tailRows.length - 1]!
  if (last.seq !== tail.seq || last.digest !== tail.digest) return undefined
  const rows = tailRows.slice(tailRows.length - n)
  for (let i = 0; i < n; i++) {
    const row = rows[i]!
    const event = events[i]!
    if (row.event.id !== event.id || row.end !== tail.seq) return undefined
    const a = canonicalText(row.event)
    const b = canonicalText(event)
    if (Either.isLeft(a) || Either.isLeft(b) || a.right !== b.right) return undefined
  }
  // The group must be exactly these events: the row before them closes an earlier group.
  const before = tailRows.length > n ? tailRows[tailRows.length - n - 1] : undefined
  const firstSeq = tail.seq - n + 1
  if (firstSeq > 1 && (before === undefined || before.seq !== firstSeq - 1 || before.end !== before.seq)) return undefined
  const expected = options?.expectedHighWater
  if (expected !== undefined) {
    const prior = firstSeq === 1 ? LedgerRules.emptyTail(tail.runId) : { seq: before!.seq, digest: before!.digest }
    if (!HighWater.matches(expected, prior)) return undefined
  }
  return rows
}

/**
 * Where the T2 writer hits the `inside_t2` failpoint: the run and the response's operation.
 *
 * @since 0.1.0
 * @category layers
 */
export const siteOf = (runId: string, response: RuntimeEvent): FailpointSite => ({
  runId,
  operationId: response.body._tag === "FunctionResponse" ? response.body.operationId ?? "" : "",
  callId: "callId" in response.body ? response.body.callId : ""
})

/**
 * A `ToolCallState` read off one run's verified rows (for stores that keep no index, such as a JSONL reader): the
 * rows are folded with the shared rules, so the entry is the one a writer's index holds (recovery state included).
 *
 * @since 0.1.0
 * @category layers
 */
export const callStateFromRows = (rows: ReadonlyArray<CommittedRow>, callId: string): ToolCallState => {
  if (rows.length === 0) return { toolBoundary: undefined, terminalSeq: undefined, call: undefined }
  const verifier = foldRows(rows)
  return callStateOf(verifier.tail, verifier.calls.get(callId))
}

/**
 * An `UnsettledCalls` read off one run's verified rows (for stores that keep no index), as `callStateFromRows`.
 *
 * @since 0.1.0
 * @category layers
 */
export const unsettledFromRows = (rows: ReadonlyArray<CommittedRow>): UnsettledCalls => {
  if (rows.length === 0) return { toolBoundary: undefined, terminalSeq: undefined, calls: [] }
  const verifier = foldRows(rows)
  return unsettledOf(verifier.tail, verifier.calls.values())
}

const foldRows = (rows: ReadonlyArray<CommittedRow>) => {
  const verifier = RunVerifier.make(rows[0]!.event.runId, {}, { marks: false })
  for (const row of rows) {
    if (RunVerifier.step(verifier, row) !== undefined) break
  }
  return verifier
}
