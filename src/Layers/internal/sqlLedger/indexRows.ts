// The SQL ledger's index rows as a write or a point read takes them (a run's `runs` row, its call index rows, the
// owners of invocations, a retry's tail rows), decoded the same way in every dialect, with the same errors.
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { LedgerCorruption, StoreWriteFailed } from "../../../Domain/Errors.js"
import { RunId } from "../../../Domain/Ids.js"
import { CommittedRow, decodeStoredText } from "../../../Domain/RuntimeEvent.js"
import type * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"
import type { ToolCallState, UnsettledCalls, UnsettledOperation } from "../../../Services/RuntimeEventStore.js"
import { decodeCallRow, decodeRunRow } from "../sqlRowGuards.js"
import { decodeRow, runIdOf, type RunRow, toCallEntry, toTail } from "../sqlRows.js"
import { callStateOf, type TailIndex, unsettledOf } from "../TailIndex.js"

/**
 * The tail state an append needs does not decode (a tampered row): the append cannot be checked, so it fails.
 *
 * @since 0.1.0
 * @category errors
 */
export class TailUnreadable extends Data.TaggedError("TailUnreadable")<{ readonly runId: string; readonly detail: string }> {}

/**
 * The `StoreWriteFailed` of an append refused for a malformed tail state (nothing was written).
 *
 * @since 0.1.0
 * @category layers
 */
export const tailUnreadableFailed = (label: string, runId: string, failure: TailUnreadable): StoreWriteFailed =>
  new StoreWriteFailed({
    runId,
    cause: failure.detail,
    message: `${label}: the tail state of run ${failure.runId} is malformed (${failure.detail}); nothing was written`
  })

/**
 * A malformed index row, as a point read reports it: `<label>: <what>`.
 *
 * @since 0.1.0
 * @category layers
 */
export const malformedRow = (label: string, runId: string, what: string): LedgerCorruption =>
  new LedgerCorruption({ runId, reason: "schema_invalid", message: `${label}: ${what}` })

/**
 * Puts a run's `runs` row into the write's index (with no call rows yet), or says why it cannot be read.
 *
 * @since 0.1.0
 * @category layers
 */
export const indexRunRow = (index: TailIndex, raw: unknown): TailUnreadable | undefined => {
  const row = decodeRunRow(raw)
  if (Either.isLeft(row)) return new TailUnreadable({ runId: runIdOf(raw), detail: row.left })
  index.runs.set(row.right.run_id, { tail: toTail(row.right), calls: new Map() })
  return undefined
}

/**
 * Puts a call index row of `runId` into `calls`, or says why it cannot be read.
 *
 * @since 0.1.0
 * @category layers
 */
export const indexCallRow = (calls: Map<string, LedgerRules.CallEntry>, runId: string, raw: unknown): TailUnreadable | undefined => {
  const row = decodeCallRow(raw)
  if (Either.isLeft(row)) return new TailUnreadable({ runId, detail: `call index: ${row.left}` })
  calls.set(row.right.call_id, toCallEntry(row.right))
  return undefined
}

const decodeOwnerRow = decodeRow(Schema.Struct({ run_id: Schema.String, invocation_id: Schema.String }))

/**
 * Records which run owns an invocation (a `runs` row's `run_id, invocation_id`), or says why it cannot be read.
 *
 * @since 0.1.0
 * @category layers
 */
export const indexOwnerRow = (index: TailIndex, raw: unknown): TailUnreadable | undefined => {
  const row = decodeOwnerRow(raw)
  if (Either.isLeft(row)) return new TailUnreadable({ runId: runIdOf(raw), detail: `invocations: ${row.left}` })
  index.invocations.set(row.right.invocation_id, row.right.run_id)
  return undefined
}

/** An owner row decoded alone (`restoreProven`'s check of one invocation). */
export { decodeOwnerRow }

const EventRowForRetry = Schema.Struct({ seq: Schema.Int, end_seq: Schema.Int, digest: Schema.String, bytes: Schema.Unknown })
const decodeEventRowForRetry = decodeRow(EventRowForRetry)

/**
 * The last rows of a run (an exact retry's evidence), decoded; none when any of them does not decode.
 *
 * @since 0.1.0
 * @category layers
 */
export const tailRowsOf = (raws: Iterable<unknown>): Array<CommittedRow> => {
  const out: Array<CommittedRow> = []
  for (const raw of raws) {
    const row = decodeEventRowForRetry(raw)
    if (Either.isLeft(row) || !(row.right.bytes instanceof Uint8Array)) return []
    const event = decodeStoredText(Buffer.from(row.right.bytes).toString("utf8"))
    if (Either.isLeft(event)) return []
    out.push(new CommittedRow({ digest: row.right.digest, end: row.right.end_seq, event: event.right, seq: row.right.seq }, true))
  }
  return out
}

/**
 * A run's `runs` row read by a point read, decoded, or its corruption.
 *
 * @since 0.1.0
 * @category layers
 */
export const runRowOf = (label: string, runId: string, raw: unknown): RunRow | LedgerCorruption => {
  const run = decodeRunRow(raw)
  return Either.isLeft(run) ? malformedRow(label, runId, `a row of the runs table is malformed: ${run.left}`) : run.right
}

/**
 * `toolCallState` from the run's row and the call's index row (`undefined`: the call has none).
 *
 * @since 0.1.0
 * @category layers
 */
export const callStateFrom = (
  label: string,
  runId: string,
  callId: string,
  run: RunRow,
  callRaw: unknown | undefined
): ToolCallState | LedgerCorruption => {
  if (callRaw === undefined) return callStateOf(toTail(run), undefined)
  const row = decodeCallRow(callRaw)
  if (Either.isLeft(row)) return malformedRow(label, runId, `the call index row of ${callId} in run ${runId} is malformed: ${row.left}`)
  return callStateOf(toTail(run), toCallEntry(row.right))
}

/**
 * `unsettledCalls` from the run's row and its unanswered call index rows.
 *
 * @since 0.1.0
 * @category layers
 */
export const unsettledFrom = (
  label: string,
  runId: string,
  run: RunRow,
  callRaws: Iterable<unknown>
): UnsettledCalls | LedgerCorruption => {
  const entries: Array<LedgerRules.CallEntry> = []
  for (const raw of callRaws) {
    const row = decodeCallRow(raw)
    if (Either.isLeft(row)) return malformedRow(label, runId, `a call index row of run ${runId} is malformed: ${row.left}`)
    entries.push(toCallEntry(row.right))
  }
  return unsettledOf(toTail(run), entries)
}

/**
 * `unsettledOperations` from its rows (`run_id` and the call columns), in their order.
 *
 * @since 0.1.0
 * @category layers
 */
export const operationsFrom = (label: string, raws: Iterable<unknown>): Array<UnsettledOperation> | LedgerCorruption => {
  const out: Array<UnsettledOperation> = []
  for (const raw of raws) {
    const row = decodeCallRow(raw)
    if (Either.isLeft(row)) return malformedRow(label, runIdOf(raw), `a row of the calls table is malformed: ${row.left}`)
    out.push({ runId: RunId.make(runIdOf(raw), true), call: toCallEntry(row.right) })
  }
  return out
}
