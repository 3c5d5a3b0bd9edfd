// A window of one run's rows read by seq (`readRunFrom`), for the SQL stores: each raw `events` row is decoded
// strictly and linked to the one before it by the digest chain; the window starts from the stored digest of the row
// before it (or the run's genesis digest). No fold of the run's rules: the window is not verified from the run's start.
import * as Either from "effect/Either"
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import * as Digest from "../../Domain/Digest.js"
import type { LedgerCorruption } from "../../Domain/Errors.js"
import { CommittedRow, decodeStoredText, unsafeMake } from "../../Domain/RuntimeEvent.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import { decodeRow, EventRow } from "./sqliteRows.js"

const decodeEventRow = decodeRow(EventRow)
const DIGEST = /^sha256:[0-9a-f]{64}$/

/** The SQL of a window: the row before `fromSeq` (the chain's anchor) and up to `limit` rows from it, by seq. */
export const windowBounds = (fromSeq: number, limit: number) => {
  const from = Math.max(1, Math.floor(fromSeq) || 1)
  const size = Math.max(0, Math.floor(limit) || 0)
  return { from, size, firstSeq: from === 1 ? 1 : from - 1, count: from === 1 ? size : size + 1 }
}

/**
 * Decodes a window's raw rows (selected from seq `from - 1`, or from seq 1) and checks each one: its columns, run id,
 * dense seqs, strict UTF-8 and canonical decode, the event id column, and the digest chain from the anchor. Returns
 * the rows from seq `from` on, or the first corruption.
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
    const columns = decodeEventRow(raws[i])
    if (Either.isLeft(columns)) {
      return RunVerifier.corruption(runId, "schema_invalid", `the events row after seq ${expected - 1} has malformed columns: ${columns.left}`, {})
    }
    const { bytes, digest, end_seq: end, event_id: eventId, run_id: rowRunId, seq } = columns.right
    const where = { seq, eventId }
    if (rowRunId !== runId) return RunVerifier.corruption(runId, "identity_mismatch", `the row's run_id column is ${rowRunId}`, where)
    if (seq !== expected) return RunVerifier.corruption(runId, "seq_gap", `expected seq ${expected} but found seq ${seq}`, where)
    if (!(bytes instanceof Uint8Array)) {
      return RunVerifier.corruption(runId, "non_canonical", `the bytes column holds ${bytes === null ? "NULL" : typeof bytes}, not a BLOB`, where)
    }
    const text = CanonicalJson.decodeUtf8(bytes)
    if (text === undefined) return RunVerifier.corruption(runId, "non_canonical", "the stored event bytes are not valid UTF-8", where)
    const decoded = decodeStoredText(text)
    if (Either.isLeft(decoded)) {
      const failure = decoded.left
      return RunVerifier.corruption(runId, failure.reason === "invalid_json" ? "non_canonical" : failure.reason, failure.message, where)
    }
    const event = decoded.right
    if (event.id !== eventId) {
      return RunVerifier.corruption(runId, "identity_mismatch", `the event_id column says ${eventId} but the stored event's id is ${event.id}`, where)
    }
    if (event.runId !== runId) {
      return RunVerifier.corruption(runId, "identity_mismatch", `the stored event belongs to run ${event.runId}`, where)
    }
    const computed = Digest.next(previous, seq, text)
    if (computed !== digest) {
      return RunVerifier.corruption(runId, "digest_mismatch", `the chain does not verify at seq ${seq}: stored ${digest}, computed ${computed}`, where)
    }
    if (end < seq) return RunVerifier.corruption(runId, "seq_gap", `the end column says ${end}, before the row's own seq`, where)
    out.push(unsafeMake(CommittedRow, { digest, end, event, seq }))
    previous = digest
    expected = seq + 1
  }
  return out
}
