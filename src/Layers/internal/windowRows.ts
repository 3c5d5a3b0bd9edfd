// A window of one run's rows read by seq (`readRunFrom`), for the SQL stores: each raw `events` row is decoded
// strictly and linked to the one before it by the digest chain; the window starts from the stored digest of the row
// before it (or the run's genesis digest). No fold of the run's rules: the window is not verified from the run's start.
import * as Either from "effect/Either"
import * as Digest from "../../Domain/Digest.js"
import { LedgerCorruption } from "../../Domain/Errors.js"
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import { acceptLoneRow, decodeRow, EventRow } from "./sqlRows.js"

const decodeEventRow = decodeRow(EventRow)
const DIGEST = /^sha256:[0-9a-f]{64}$/

/**
 * The SQL of a window: the row before `fromSeq` (the chain's anchor) and up to `limit` rows from it, by seq.
 *
 * @since 0.1.0
 * @category layers
 */
export const windowBounds = (fromSeq: number, limit: number) => {
  const from = Math.max(1, Math.floor(fromSeq) || 1)
  const size = Math.max(0, Math.floor(limit) || 0)
  return { from, size, firstSeq: from === 1 ? 1 : from - 1, count: from === 1 ? size : size + 1 }
}

/**
 * Decodes a window's raw rows (selected from seq `from - 1`, or from seq 1) and checks each one as `readRowsAt` does
 * (`acceptLoneRow`: columns, run id, strict UTF-8 and canonical decode, the event id column, the digest chained from
 * the row before), the seqs dense from the anchor on. Returns the rows from seq `from` on, or the first corruption.
 *
 * @since 0.1.0
 * @category layers
 */
export const acceptWindow = (
  runId: string,
  from: number,
  raws: ReadonlyArray<unknown>
): ReadonlyArray<CommittedRow> | LedgerCorruption => {
  let previous = Digest.genesis(runId)
  let expected = from
  let start = 0
  if (from > 1) {
    if (raws.length === 0) return []
    const anchor = decodeEventRow(raws[0])
    if (Either.isLeft(anchor)) {
      return RunVerifier.corruption(runId, "schema_invalid", `the events row of seq ${from - 1} has malformed columns: ${anchor.left}`, {})
    }
    const a = anchor.right
    if (a.run_id !== runId || a.seq !== from - 1 || !DIGEST.test(a.digest)) {
      return RunVerifier.corruption(runId, "seq_gap", `expected the row of seq ${from - 1} before the window, found seq ${a.seq} of run ${a.run_id}`, { seq: from - 1 })
    }
    previous = a.digest
    start = 1
  }
  const out: Array<CommittedRow> = []
  for (let i = start; i < raws.length; i++) {
    const raw = raws[i]
    // A row missing from the window is named by the seq found in its place; the row itself is checked on its own.
    const found = typeof raw === "object" && raw !== null && "seq" in raw && typeof raw.seq === "number" ? raw.seq : expected
    if (found !== expected) return RunVerifier.corruption(runId, "seq_gap", `expected seq ${expected} but found seq ${found}`, { seq: found })
    const row = acceptLoneRow(runId, expected, raw, previous)
    if (row instanceof LedgerCorruption) return row
    out.push(row)
    previous = row.digest
    expected = row.seq + 1
  }
  return out
}
