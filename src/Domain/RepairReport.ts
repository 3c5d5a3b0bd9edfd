// What startup repair (docs/spec/04-continuation.md) did: each managed run it closed or brought in line, each run it could not read, and
// the unmanaged runs it left alone. Codes only: no event payloads, prompts or results.
import * as Schema from "effect/Schema"
import { RunId } from "./Ids.js"
import { RunStatus, StatusReason } from "./RunHeader.js"

/**
 * What repair did to one managed, non-terminal run.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RepairAction = Schema.Literal(
  /** The ledger held the terminal event; the header now says so. */
  "header_caught_up",
  /** A header without events (a continuation whose start never committed): no append, the header set to failed. */
  "abandoned_continuation_closed",
  /** Events without a terminal event: `RunTerminated` failed / process_interrupted appended, then the header. */
  "interrupted_run_closed"
)
/**
 * What repair did to one managed, non-terminal run.
 *
 * @since 0.1.0
 * @category models
 */
export type RepairAction = typeof RepairAction.Type

/**
 * One run repair changed.
 *
 * @since 0.1.0
 * @category models
 */
export class RepairedRun extends Schema.Class<RepairedRun>("RepairedRun")({
  runId: RunId,
  action: RepairAction,
  status: RunStatus,
  statusReason: Schema.optionalWith(StatusReason, { exact: true }),
  /** The seq of the `RunTerminated` repair appended (`interrupted_run_closed` only). */
  terminatedSeq: Schema.optionalWith(Schema.Int, { exact: true })
}) {}

/**
 * One managed run repair left untouched because something failed: its ledger or header could not be read or written.
 *
 * @since 0.1.0
 * @category models
 */
export class RepairFailure extends Schema.Class<RepairFailure>("RepairFailure")({
  runId: RunId,
  /** The typed error's tag, for example `LedgerCorruption` or `StoreWriteFailed`. */
  error: Schema.String,
  /** The reason code of a `LedgerCorruption`, when that was the error. */
  reason: Schema.optionalWith(Schema.String, { exact: true }),
  message: Schema.String
}) {}

/**
 * The result of one repair pass.
 *
 * @since 0.1.0
 * @category models
 */
export class RepairReport extends Schema.Class<RepairReport>("RepairReport")({
  repaired: Schema.Array(RepairedRun),
  /** Managed runs whose ledger or header could not be read or written: reported, never changed. */
  failed: Schema.Array(RepairFailure),
  /** Runs of the ledger without a header (imported, or written without the header API): reported, never touched. */
  unmanaged: Schema.Array(RunId),
  /** How many managed runs were already terminal. */
  alreadyTerminal: Schema.Int,
  /** The unmanaged runs `repair --adopt` wrote a header for (docs/recovery.md), then closed like any managed run. */
  adopted: Schema.optionalWith(Schema.Array(RunId), { exact: true })
}) {}
