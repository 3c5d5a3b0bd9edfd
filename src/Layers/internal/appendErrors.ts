// Turns the outcome of an append check into the typed errors of docs/spec/01-ledger.md.
// Shared by every store so that the same refusal reads the same everywhere.
import { AppendRejected, RunNotSealed, RunSealed, RuntimeOffsetMismatch } from "../../Domain/Errors.js"
import * as HighWater from "../../Domain/HighWater.js"
import type { AppendRefused } from "../../Domain/Rules/AppendCheck.js"
import type { RunTail } from "../../Domain/Rules/LedgerRules.js"

/**
 * The error for a refused append: `RunSealed` for a sealed run, `RunNotSealed` for a recovery bundle on a run that is
 * not sealed, otherwise `AppendRejected` with its reason.
 *
 * @since 0.1.0
 * @category layers
 */
export const refusedError = (runId: string, tail: RunTail, refused: AppendRefused): AppendRejected | RunSealed | RunNotSealed =>
  refused.reason === "not_sealed"
    ? new RunNotSealed({
      runId,
      message: `run ${runId} is not sealed (it has no RunTerminated): recovery bundles settle operations of sealed runs only; ` +
        "seal it first (`runtime-resume repair` for a managed run; the run's own host writes the terminal event of an unmanaged one); nothing was written"
    })
    : refused.reason === "sealed"
    ? new RunSealed({
      runId,
      terminalSeq: tail.terminal?.seq ?? tail.seq,
      message: `run ${runId} is sealed (RunTerminated at seq ${tail.terminal?.seq ?? tail.seq}); generic appends are refused`
    })
    : new AppendRejected({
      runId,
      eventId: refused.eventId,
      reason: refused.reason,
      message: `append to run ${runId} refused at event ${refused.eventId} (#${refused.index + 1} of the append): ${refused.reason}: ${refused.message}; nothing was written`
    })

/**
 * The compare-and-append failure for a run whose high-water is not the expected one.
 *
 * @since 0.1.0
 * @category layers
 */
export const offsetMismatch = (
  runId: string,
  expected: HighWater.ExpectedHighWaterInput,
  actual: { readonly seq: number; readonly digest: string }
): RuntimeOffsetMismatch =>
  new RuntimeOffsetMismatch({
    runId,
    expected: HighWater.expectedFields(expected),
    actual: { seq: actual.seq, digest: actual.digest },
    message: `run ${runId}: expected high-water seq ${expected.seq}${
      expected.digest !== undefined ? ` digest ${expected.digest}` : ""
    }, but it is seq ${actual.seq} digest ${actual.digest}; re-read the run before appending`
  })

/**
 * An `AppendRejected` for an empty append or a batch that names a run twice.
 *
 * @since 0.1.0
 * @category layers
 */
export const malformedAppend = (runId: string, what: string): AppendRejected =>
  new AppendRejected({ runId, reason: "schema_invalid", message: `append to run ${runId} refused: ${what}; nothing was written` })
