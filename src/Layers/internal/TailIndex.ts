// In-memory tail state for the memory and JSONL stores: per-run tail and call index, store-wide ids and invocations.
// Appends are checked against it without scans, so their cost does not depend on the ledger's size.
import * as Either from "effect/Either"
import type { AppendRejected, RunSealed, RuntimeOffsetMismatch } from "../../Domain/Errors.js"
import * as HighWater from "../../Domain/HighWater.js"
import { CommittedRow } from "../../Domain/RuntimeEvent.js"
import type { RunBatch } from "../../Services/RuntimeEventStore.js"
import * as AppendCheck from "../../Programs/AppendCheck.js"
import * as LedgerRules from "../../Programs/LedgerRules.js"
import { malformedAppend, offsetMismatch, refusedError } from "./appendErrors.js"

/** One run's tail state and call index. */
export interface RunState {
  tail: LedgerRules.RunTail
  readonly calls: Map<string, LedgerRules.CallEntry>
}

/** A checked batch, ready to be written and then applied. */
export interface PlannedRun {
  readonly runId: string
  readonly accepted: AppendCheck.AppendAccepted
  /** The committed rows this append will produce (`end` is the last seq of the group). */
  readonly rows: ReadonlyArray<CommittedRow>
}

/** The in-memory index itself. */
export class TailIndex {
  readonly runs = new Map<string, RunState>()
  readonly ids = new Set<string>()
  readonly invocations = new Map<string, string>()
  readonly runOrder: Array<string> = []

  /** The tail of a run, or an empty tail. */
  tailOf(runId: string): LedgerRules.RunTail {
    return this.runs.get(runId)?.tail ?? LedgerRules.emptyTail(runId)
  }

  /** Checks a batch of appends (several runs, all or nothing) without changing anything. */
  check(
    batches: ReadonlyArray<RunBatch>,
    mode: Exclude<LedgerRules.Mode, "read">
  ): Either.Either<ReadonlyArray<PlannedRun>, AppendRejected | RunSealed | RuntimeOffsetMismatch> {
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
      const lookups: LedgerRules.Lookups = {
        call: (callId) => state?.calls.get(callId),
        eventIdTaken: (id) => this.ids.has(id) || batchIds.has(id),
        invocationOwner: (inv) => this.invocations.get(inv) ?? batchInvocations.get(inv)
      }
      const accepted = AppendCheck.checkAppend(tail, lookups, batch.events, mode)
      if (accepted._tag === "Refused") return Either.left(refusedError(runId, tail, accepted))
      for (const row of accepted.rows) batchIds.add(row.event.id)
      if (tail.identity === undefined) batchInvocations.set(batch.events[0]!.invocationId, runId)
      const end = accepted.tail.seq
      const rows = accepted.rows.map((r) =>
        new CommittedRow({ digest: r.digest, end, event: r.event, seq: r.seq }, true)
      )
      planned.push({ runId, accepted, rows })
    }
    return Either.right(planned)
  }

  /** Applies checked batches after they were written. */
  apply(planned: ReadonlyArray<PlannedRun>): void {
    for (const p of planned) this.applyRun(p.runId, p.accepted.tail, p.accepted.calls.values(), p.rows)
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
