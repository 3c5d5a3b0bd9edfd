// Rows of the SQLite ledger tables: their shapes, the tail state and call index they hold, and the read-side
// checks of one run's event rows, decoded and verified row by row so the first problem is at the lowest seq.
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import type { LedgerCorruption, RunNotFound } from "../../Domain/Errors.js"
import { describeParseError } from "../../Domain/ParseIssues.js"
import { CommittedRow, decodeStoredText, RecoveryMode, TerminalStatus, ToolBoundary, unsafeMake } from "../../Domain/RuntimeEvent.js"
import * as LedgerRules from "../../Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import { runNotFound } from "./verifyRows.js"

/** The columns of an `events` row, as read back (`bytes` is checked by hand: it must be a BLOB). */
export const EventRow = Schema.Struct({
  run_id: Schema.String,
  seq: Schema.Int,
  end_seq: Schema.Int,
  event_id: Schema.String,
  digest: Schema.String,
  bytes: Schema.Unknown
})
/** The columns of an `events` row. */
export type EventRow = typeof EventRow.Type

/** The columns every events query selects, in `EventRow`'s order. */
export const EVENT_COLUMNS = "run_id, seq, end_seq, event_id, digest, bytes"

/** The columns of a `runs` row: a run's identity and its tail state. */
export const RunRow = Schema.Struct({
  run_id: Schema.String,
  session_id: Schema.String,
  invocation_id: Schema.String,
  turn_id: Schema.String,
  tool_boundary: ToolBoundary,
  tail_seq: Schema.Int,
  tail_digest: Schema.String,
  terminal_seq: Schema.NullOr(Schema.Int),
  terminal_status: Schema.NullOr(TerminalStatus),
  terminal_failure_class: Schema.NullOr(Schema.String),
  terminal_abort_source: Schema.NullOr(Schema.String)
})
/** The columns of a `runs` row. */
export type RunRow = typeof RunRow.Type

/** The columns every runs query selects. */
export const RUN_COLUMNS =
  "run_id, session_id, invocation_id, turn_id, tool_boundary, tail_seq, tail_digest, terminal_seq, terminal_status, terminal_failure_class, terminal_abort_source"

/** The columns of a `calls` row: one entry of a run's call index. */
export const CallRow = Schema.Struct({
  call_id: Schema.String,
  name: Schema.String,
  args_hash: Schema.String,
  call_seq: Schema.Int,
  hidden: Schema.Literal(0, 1),
  dispatch_seq: Schema.NullOr(Schema.Int),
  operation_id: Schema.NullOr(Schema.String),
  response_seq: Schema.NullOr(Schema.Int),
  is_error: Schema.NullOr(Schema.Literal(0, 1)),
  recovery_mode: Schema.NullOr(RecoveryMode),
  idempotency_key: Schema.NullOr(Schema.String),
  evidence_digest: Schema.NullOr(Schema.String),
  recovery_kind: Schema.NullOr(Schema.Literal("reconciler", "manual")),
  recovery_disposition: Schema.NullOr(Schema.Literal("completed", "parked")),
  recovery_reason: Schema.NullOr(Schema.String),
  recovery_actor: Schema.NullOr(Schema.String),
  recovery_seq: Schema.NullOr(Schema.Int)
})
/** The columns of a `calls` row. */
export type CallRow = typeof CallRow.Type

/** The columns every calls query selects. */
export const CALL_COLUMNS = "call_id, name, args_hash, call_seq, hidden, dispatch_seq, operation_id, response_seq, is_error, " +
  "recovery_mode, idempotency_key, evidence_digest, recovery_kind, recovery_disposition, recovery_reason, recovery_actor, recovery_seq"

/** `CALL_COLUMNS` over a `calls` table older than format 3 (opened read-only, so not migrated): no recovery state. */
export const CALL_COLUMNS_BEFORE_3 = "call_id, name, args_hash, call_seq, hidden, dispatch_seq, operation_id, response_seq, is_error, " +
  "NULL AS recovery_mode, NULL AS idempotency_key, NULL AS evidence_digest, NULL AS recovery_kind, NULL AS recovery_disposition, " +
  "NULL AS recovery_reason, NULL AS recovery_actor, NULL AS recovery_seq"

/** Decodes one row of a table, or says why it does not fit. */
export const decodeRow = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "first" })
  return (raw: unknown): Either.Either<A, string> =>
    Either.mapLeft(decode(raw), (error) => describeParseError(error))
}

const decodeEventRow = decodeRow(EventRow)

// The columns of an events row when they certainly decode (the common case, without the Schema's cost);
// `undefined` leaves the row to `decodeEventRow`, which words what is wrong.
const eventColumns = (raw: unknown): EventRow | undefined => {
  if (
    typeof raw !== "object" || raw === null || !("run_id" in raw) || !("seq" in raw) || !("end_seq" in raw) ||
    !("event_id" in raw) || !("digest" in raw)
  ) return undefined
  const { digest, end_seq, event_id, run_id, seq } = raw
  return typeof run_id === "string" && typeof seq === "number" && Number.isSafeInteger(seq) && typeof end_seq === "number" &&
      Number.isSafeInteger(end_seq) && typeof event_id === "string" && typeof digest === "string"
    ? { run_id, seq, end_seq, event_id, digest, bytes: "bytes" in raw ? raw.bytes : undefined }
    : undefined
}

// Whether a raw events row certainly has `EventRow`'s column types (`eventColumns` without the copy).
const hasEventColumns = (raw: unknown): raw is EventRow =>
  typeof raw === "object" && raw !== null && typeof (raw as EventRow).run_id === "string" &&
  typeof (raw as EventRow).seq === "number" && Number.isSafeInteger((raw as EventRow).seq) &&
  typeof (raw as EventRow).end_seq === "number" && Number.isSafeInteger((raw as EventRow).end_seq) &&
  typeof (raw as EventRow).event_id === "string" && typeof (raw as EventRow).digest === "string" && "bytes" in raw

/** A run's tail state as the rules use it, from its `runs` row. */
export const toTail = (row: RunRow): LedgerRules.RunTail => ({
  runId: row.run_id,
  seq: row.tail_seq,
  digest: row.tail_digest,
  identity: {
    sessionId: row.session_id,
    invocationId: row.invocation_id,
    turnId: row.turn_id,
    toolBoundary: row.tool_boundary
  },
  terminal: row.terminal_seq !== null && row.terminal_status !== null
    ? {
      seq: row.terminal_seq,
      status: row.terminal_status,
      ...(row.terminal_failure_class !== null ? { failureClass: row.terminal_failure_class } : {}),
      ...(row.terminal_abort_source !== null ? { abortSource: row.terminal_abort_source } : {})
    }
    : undefined
})

/** A call index entry as the rules use it, from its `calls` row. */
export const toCallEntry = (row: CallRow): LedgerRules.CallEntry => ({
  callId: row.call_id,
  name: row.name,
  argsHash: row.args_hash,
  callSeq: row.call_seq,
  hidden: row.hidden === 1,
  ...(row.dispatch_seq !== null ? { dispatchSeq: row.dispatch_seq } : {}),
  ...(row.operation_id !== null ? { operationId: row.operation_id } : {}),
  ...(row.response_seq !== null ? { responseSeq: row.response_seq } : {}),
  ...(row.is_error !== null ? { isError: row.is_error === 1 } : {}),
  ...(row.recovery_mode !== null ? { recoveryMode: row.recovery_mode } : {}),
  ...(row.idempotency_key !== null ? { idempotencyKey: row.idempotency_key } : {}),
  ...(row.evidence_digest !== null ? { evidenceDigest: row.evidence_digest } : {}),
  ...(row.recovery_kind !== null && row.recovery_disposition !== null && row.recovery_reason !== null &&
      row.recovery_actor !== null && row.recovery_seq !== null
    ? {
      recovery: {
        kind: row.recovery_kind,
        disposition: row.recovery_disposition,
        reasonCode: row.recovery_reason,
        actor: row.recovery_actor,
        decidedSeq: row.recovery_seq
      }
    }
    : {})
})

/** The parameters of a `runs` upsert row after an append, in `RUNS_UPSERT` column order (the run id twice). */
export const runParams = (tail: LedgerRules.RunTail): ReadonlyArray<string | number | null> => {
  const identity = tail.identity
  return [
    tail.runId,
    tail.runId,
    identity?.sessionId ?? null,
    identity?.invocationId ?? null,
    identity?.turnId ?? null,
    identity?.toolBoundary ?? null,
    tail.seq,
    tail.digest,
    tail.terminal?.seq ?? null,
    tail.terminal?.status ?? null,
    tail.terminal?.failureClass ?? null,
    tail.terminal?.abortSource ?? null
  ]
}

/**
 * The parameters of a `calls` upsert row, in `CALLS_UPSERT` column order. An entry from a reader that deferred its
 * args hash never gets here (a defect if it does: a row must never hold anything but the hash).
 */
export const callParams = (runId: string, call: LedgerRules.CallEntry): ReadonlyArray<string | number | null> => {
  if (call.argsHash === LedgerRules.DEFERRED_ARGS_HASH) {
    throw new Error(`call ${call.callId} of run ${runId}: a call index entry with a deferred args hash reached a derived row`)
  }
  return callRow(runId, call)
}

const callRow = (runId: string, call: LedgerRules.CallEntry): ReadonlyArray<string | number | null> => [
  runId,
  call.callId,
  call.name,
  call.argsHash,
  call.callSeq,
  call.hidden ? 1 : 0,
  call.dispatchSeq ?? null,
  call.operationId ?? null,
  call.responseSeq ?? null,
  call.isError === undefined ? null : call.isError ? 1 : 0,
  call.recoveryMode ?? null,
  call.idempotencyKey ?? null,
  call.evidenceDigest ?? null,
  call.recovery?.kind ?? null,
  call.recovery?.disposition ?? null,
  call.recovery?.reasonCode ?? null,
  call.recovery?.actor ?? null,
  call.recovery?.decidedSeq ?? null
]

/** The number of parameters of one `calls` row (`callParams`). */
export const CALL_PARAMS = 18

/**
 * The state of reading one run's rows in seq order: the shared verifier, the append group of the last row,
 * and the run's `runs` row, which must agree with the rows (identity, and the chain at its high-water).
 */
export interface RunReader {
  readonly runId: string
  readonly verifier: RunVerifier.RunVerifier
  /** The run's `runs` row (`undefined` when the table has none), read no later than the rows it accounts for. */
  runRow: RunRow | undefined
  lastSeq: number
  lastEnd: number
  /** The commit position (`pos`) of the last row, when the query selected it: a run's rows are committed in seq order. */
  lastPos: number
  /** Reading to rebuild the derived rows: the `runs` row is not compared (it is what gets rebuilt). */
  readonly rebuilding?: boolean
}

/**
 * A reader for one run. `store` adds store-wide lookups (export checks invocations across runs). Event ids need no
 * set: `UNIQUE(event_id)` keeps them unique store-wide, and each row's event is checked against its column.
 * `options`: the verifier's (`deferArgsHash` only for reads whose call index feeds no derived-row check).
 */
export const makeRunReader = (
  runId: string,
  runRow: RunRow | undefined,
  store?: RunVerifier.StoreLookups,
  options?: RunVerifier.VerifierOptions
): RunReader => ({
  runId,
  verifier: RunVerifier.make(runId, { ...store, eventIdsUnique: true }, options),
  runRow,
  lastSeq: 0,
  lastEnd: 0,
  lastPos: 0
})

/**
 * Decodes and verifies the next raw `events` row of the run: column types, density, strict UTF-8, canonical
 * bytes and strict decode, columns against the event, the shared ledger rules, append groups, and the
 * run's `runs` row. Returns the committed row or the first corruption.
 */
export const acceptRow = (reader: RunReader, raw: unknown): CommittedRow | LedgerCorruption => {
  const runId = reader.runId
  const expected = reader.verifier.tail.seq + 1
  let bytes: unknown, digest: string, end: number, eventId: string, rowRunId: string, seq: number
  if (hasEventColumns(raw)) {
    // The common case: the columns read in place, no copy of the row.
    bytes = raw.bytes
    digest = raw.digest
    end = raw.end_seq
    eventId = raw.event_id
    rowRunId = raw.run_id
    seq = raw.seq
  } else {
    const decodedColumns = decodeEventRow(raw)
    if (Either.isLeft(decodedColumns)) {
      return RunVerifier.corruption(runId, "schema_invalid", `the events row after seq ${expected - 1} has malformed columns: ${decodedColumns.left}`, {})
    }
    ;({ bytes, digest, end_seq: end, event_id: eventId, run_id: rowRunId, seq } = decodedColumns.right)
  }
  const where = { seq, eventId }
  if (rowRunId !== runId) {
    return RunVerifier.corruption(runId, "identity_mismatch", `the row's run_id column is ${rowRunId}`, where)
  }
  if (seq !== expected) {
    return RunVerifier.corruption(runId, "seq_gap", `expected seq ${expected} but found seq ${seq}`, where)
  }
  if (!(bytes instanceof Uint8Array)) {
    return RunVerifier.corruption(runId, "non_canonical", `the bytes column holds ${bytes === null ? "NULL" : typeof bytes}, not a BLOB`, where)
  }
  const text = CanonicalJson.decodeUtf8(bytes)
  if (text === undefined) {
    return RunVerifier.corruption(runId, "non_canonical", "the stored event bytes are not valid UTF-8", where)
  }
  const decoded = decodeStoredText(text)
  if (Either.isLeft(decoded)) {
    const failure = decoded.left
    // Bytes that do not parse are not the canonical encoding of anything.
    return RunVerifier.corruption(runId, failure.reason === "invalid_json" ? "non_canonical" : failure.reason, failure.message, where)
  }
  const event = decoded.right
  if (event.id !== eventId) {
    return RunVerifier.corruption(runId, "identity_mismatch", `the event_id column says ${eventId} but the stored event's id is ${event.id}`, where)
  }
  // Built before the checks that follow: the verifier marks this very object as verified (see RunVerifier.stepTrusted);
  // if a later check fails, it is dropped.
  const row = unsafeMake(CommittedRow, { digest, end, event, seq })
  const failure = RunVerifier.step(reader.verifier, row)
  if (failure !== undefined) return failure
  const groupOpen = reader.lastEnd > reader.lastSeq
  if (groupOpen ? end !== reader.lastEnd : end < seq) {
    return RunVerifier.corruption(
      runId,
      "seq_gap",
      groupOpen
        ? `the end column says ${end}, but the append group of seq ${reader.lastSeq} ends at seq ${reader.lastEnd}`
        : `the end column says ${end}, before the row's own seq`,
      where
    )
  }
  const pos = typeof raw === "object" && raw !== null && "pos" in raw ? raw.pos : undefined
  if (typeof pos === "number") {
    if (pos <= reader.lastPos) {
      return RunVerifier.corruption(runId, "seq_gap", `the row was committed (pos) before seq ${seq - 1} of its run`, where)
    }
    reader.lastPos = pos
  }
  reader.lastSeq = seq
  reader.lastEnd = end
  const runRow = reader.runRow
  if (seq === 1 && reader.rebuilding !== true) {
    const identity = reader.verifier.tail.identity
    if (runRow === undefined) {
      return RunVerifier.corruption(runId, "identity_mismatch", "the run has rows but no row in the runs table", where)
    }
    if (
      identity === undefined || identity.sessionId !== runRow.session_id || identity.invocationId !== runRow.invocation_id ||
      identity.turnId !== runRow.turn_id || identity.toolBoundary !== runRow.tool_boundary
    ) {
      return RunVerifier.corruption(
        runId,
        "identity_mismatch",
        `the runs table records session/invocation/turn/boundary ${runRow.session_id}/${runRow.invocation_id}/${runRow.turn_id}/${runRow.tool_boundary}, ` +
          `the first event has ${event.sessionId}/${event.invocationId}/${event.turnId}/${identity?.toolBoundary ?? "?"}`,
        where
      )
    }
  }
  if (runRow !== undefined && seq === runRow.tail_seq && digest !== runRow.tail_digest) {
    return RunVerifier.corruption(
      runId,
      "digest_mismatch",
      `the runs table records high-water digest ${runRow.tail_digest} at seq ${seq}, the chain gives ${digest}`,
      where
    )
  }
  return row
}

/**
 * Ends a run's read: `RunNotFound` when it had no row and no `runs` row. When the whole run was read
 * (`complete`), its last append group must be whole and its rows must reach the runs table's high-water.
 */
export const finishRun = (reader: RunReader, complete: boolean): LedgerCorruption | RunNotFound | undefined => {
  const runRow = reader.runRow
  if (reader.lastSeq === 0) {
    return runRow === undefined
      ? runNotFound(reader.runId)
      : RunVerifier.corruption(reader.runId, "seq_gap", `the runs table records high-water seq ${runRow.tail_seq} but the run has no rows`, {})
  }
  const cut = RunVerifier.finish(reader.verifier)
  if (cut !== undefined) return cut
  if (!complete) return undefined
  if (reader.lastEnd !== reader.lastSeq) {
    return RunVerifier.corruption(
      reader.runId,
      "seq_gap",
      `the append group of seq ${reader.lastSeq} ends at seq ${reader.lastEnd}, but the run's rows end at seq ${reader.lastSeq}`,
      { seq: reader.lastSeq + 1 }
    )
  }
  if (runRow !== undefined && reader.lastSeq < runRow.tail_seq) {
    return RunVerifier.corruption(
      reader.runId,
      "seq_gap",
      `the runs table records high-water seq ${runRow.tail_seq} but the run's rows end at seq ${reader.lastSeq}`,
      { seq: reader.lastSeq + 1 }
    )
  }
  return undefined
}

/**
 * Decodes and checks one raw `events` row read on its own (`readRowsAt`): column types, the run and seq asked for,
 * strict UTF-8, canonical bytes and strict decode, its columns and envelope against the event, and its digest
 * chained from `previousDigest` (the row before it, or the run's genesis). The rules of the run as a whole are
 * `readRun`'s (this reads no other row). Returns the committed row or the corruption.
 */
export const acceptLoneRow = (runId: string, seq: number, raw: unknown, previousDigest: string): CommittedRow | LedgerCorruption => {
  let columns = eventColumns(raw)
  if (columns === undefined) {
    const decodedColumns = decodeEventRow(raw)
    if (Either.isLeft(decodedColumns)) {
      return RunVerifier.corruption(runId, "schema_invalid", `the events row at seq ${seq} has malformed columns: ${decodedColumns.left}`, { seq })
    }
    columns = decodedColumns.right
  }
  const { bytes, digest, end_seq: end, event_id: eventId, run_id: rowRunId } = columns
  const where = { seq, eventId }
  if (rowRunId !== runId) return RunVerifier.corruption(runId, "identity_mismatch", `the row's run_id column is ${rowRunId}`, where)
  if (columns.seq !== seq) return RunVerifier.corruption(runId, "seq_gap", `expected seq ${seq} but found seq ${columns.seq}`, where)
  if (end < seq) return RunVerifier.corruption(runId, "seq_gap", `the end column says ${end}, before the row's own seq`, where)
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
  if (event.runId !== runId) return RunVerifier.corruption(runId, "identity_mismatch", `the stored event names run ${event.runId}`, where)
  if (LedgerRules.nextDigest(previousDigest, seq, text) !== digest) {
    return RunVerifier.corruption(runId, "digest_mismatch", `the digest column does not chain from seq ${seq - 1}`, where)
  }
  return unsafeMake(CommittedRow, { digest, end, event, seq })
}

/** The run_id column of a raw row ("" when it is missing or not text). */
export const runIdOf = (raw: unknown): string =>
  typeof raw === "object" && raw !== null && "run_id" in raw && typeof raw.run_id === "string" ? raw.run_id : ""

/** The pos column of a raw row (the previous pos when it is missing, so paging still advances by the query). */
export const posOf = (raw: unknown, previous: number): number =>
  typeof raw === "object" && raw !== null && "pos" in raw && typeof raw.pos === "number" ? raw.pos : previous

/** One run as a rebuild of the derived rows found it: its verified reader (tail, call index) and its first pos. */
export interface RebuiltRun {
  readonly runId: string
  readonly reader: RunReader
  readonly firstPos: number
}

/**
 * `repair --rebuild-derived` on the SQL stores: every `events` row fed in commit order (`accept`, with its `pos`) is
 * verified run by run, the `runs` row aside (that is what is rebuilt); `finish` closes every run. The runs, with their
 * tails and call indexes, are what the derived rows are written from.
 */
export const makeRebuildFold = () => {
  const readers = new Map<string, RunReader>()
  const firstPos = new Map<string, number>()
  const owners = new Map<string, string>()
  const lookups: RunVerifier.StoreLookups = { invocationOwner: (invocation) => owners.get(invocation) }
  return {
    accept: (raw: unknown): LedgerCorruption | undefined => {
      const runId = runIdOf(raw)
      let reader = readers.get(runId)
      if (reader === undefined) {
        readers.set(runId, reader = { ...makeRunReader(runId, undefined, lookups), rebuilding: true })
        firstPos.set(runId, posOf(raw, -1))
      }
      const row = acceptRow(reader, raw)
      if (!(row instanceof CommittedRow)) return row
      if (row.seq === 1) owners.set(row.event.invocationId, runId)
      return undefined
    },
    finish: (): LedgerCorruption | undefined => {
      for (const reader of readers.values()) {
        const failure = finishRun(reader, true)
        if (failure?._tag === "LedgerCorruption") return failure
      }
      return undefined
    },
    runs: (): Array<RebuiltRun> => [...readers].map(([runId, reader]) => ({ runId, reader, firstPos: firstPos.get(runId)! }))
  }
}
