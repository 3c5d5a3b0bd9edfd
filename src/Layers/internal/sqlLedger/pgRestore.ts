// The PostgreSQL store's streamed restore of runs the caller checked (`restoreProven`, docs/stores.md): `import`'s write
// pass into PostgreSQL as ONE transaction cut into pieces, each piece's events one multi-row INSERT, so an import holds
// one piece of events at a time (not the whole file) and neither decodes nor checks an event again.
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { StoreWriteFailed } from "../../../Domain/Errors.js"
import * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"
import type { AppendError, RuntimeEventStoreShape } from "../../../Services/RuntimeEventStore.js"
import { offsetMismatch, refusedError } from "../appendErrors.js"
import { type PgLedger, PgWriteFailure } from "../pgConnection.js"
import { chainPiece, forEachPiece, PIECE_EVENTS, provenPlanIdentity, restoreDiverged } from "../restorePieces.js"
import { decodeRunRow } from "../sqlRowGuards.js"
import { CALL_PARAMS, callParams, decodeRow, RUN_COLUMNS, runIdOf, runParams, toTail } from "../sqlRows.js"
import { decodeOwnerRow, TailUnreadable } from "./indexRows.js"
import { dollar, ledgerStatements, plainRow } from "./statements.js"

// Parameters per statement (PostgreSQL allows 65535).
const MAX_PARAMS = 60_000

const decodeEventIdRunRow = decodeRow(Schema.Struct({ event_id: Schema.String, run_id: Schema.String, seq: Schema.Int }))

// A failure inside the transaction's body that is not a statement's (which `transact` rolls back, retries or reports).
const isSqlError = (error: unknown): error is SqlError =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "SqlError"

/**
 * `restoreProven` on a PostgreSQL workspace: what `sqliteDriver`'s does, in one READ COMMITTED transaction (`transact`:
 * the owner epoch checked first, a conflict with another host's write retried from the start, which reads the file
 * again). What only the store sees is refused as `restoreStream`'s check refuses it: a run already stored, an invocation
 * owned by a stored run, an event id already used (found by the insert itself, `ON CONFLICT (event_id) DO NOTHING` and
 * the rows it returns; the ids are looked up only then). Each event's bytes are chained in the step that writes them,
 * and the run must end at its plan's tail, else nothing is written. The run's row and its call index are written as the
 * SQLite store writes them (each call's final entry, in call-id order).
 *
 * @since 0.1.0
 * @category layers
 */
export const pgRestoreProven = (
  ledger: PgLedger,
  writeFailed: (runId: string, failure: PgWriteFailure | TailUnreadable) => StoreWriteFailed
): NonNullable<RuntimeEventStoreShape["restoreProven"]> => {
  const { schema: s } = ledger
  const { CALLS_CONFLICT, CALLS_UPSERT, EVENTS_INSERT, RUNS_CONFLICT, RUNS_UPSERT, runsRow } = ledgerStatements(
    (name) => `${s}.${name}`,
    dollar
  )
  const RUNS_BY_ID = `SELECT ${RUN_COLUMNS} FROM ${s}.runs WHERE run_id = $1`
  const OWNERS = `SELECT run_id, invocation_id FROM ${s}.runs WHERE invocation_id = $1`
  const IDS_HELD = `SELECT event_id, run_id, seq FROM ${s}.events WHERE event_id = ANY($1::text[])`
  // Statement texts by row count, built once.
  const eventInserts = new Map<number, string>()
  const eventInsert = (n: number): string => {
    let text = eventInserts.get(n)
    if (text === undefined) {
      const row = plainRow(dollar, 6)
      // The rows inserted come back as one count (not one result row per event).
      text = `WITH ins AS (${EVENTS_INSERT}${Array.from({ length: n }, (_, i) => row(i * 6 + 1)).join(", ")}` +
        " ON CONFLICT (event_id) DO NOTHING RETURNING 1) SELECT count(*)::integer AS n FROM ins"
      eventInserts.set(n, text)
    }
    return text
  }
  const callUpserts = new Map<number, string>()
  const callUpsert = (n: number): string => {
    let text = callUpserts.get(n)
    if (text === undefined) {
      const row = plainRow(dollar, CALL_PARAMS)
      text = CALLS_UPSERT + Array.from({ length: n }, (_, i) => row(i * CALL_PARAMS + 1)).join(", ") + CALLS_CONFLICT
      callUpserts.set(n, text)
    }
    return text
  }

  return (plans, events) =>
    Effect.suspend(() => {
      type Refused = AppendError | TailUnreadable | PgWriteFailure
      const reached: Array<{ readonly seq: number; readonly digest: string }> = []
      return ledger.transact((q) => {
        reached.length = 0
        let seq = 0
        let digest = ""
        const walk = forEachPiece(plans, events, PIECE_EVENTS, (piece) =>
          Effect.gen(function*() {
            const { plan } = piece
            const runId = plan.runId
            const tail = plan.tail
            const identity = provenPlanIdentity(plan)
            if (Either.isLeft(identity)) return yield* Effect.fail<Refused>(identity.left)
            const empty = LedgerRules.emptyTail(runId)
            // The refusal names the event's place in its run's one append (as the in-memory path's `appendBatch`).
            const before = piece.first ? 0 : seq
            const refuse = (index: number, reason: "identity_mismatch" | "duplicate_event_id", message: string) =>
              Effect.fail<Refused>(
                refusedError(runId, empty, { _tag: "Refused", index: before + index, eventId: piece.events[index]!.id, reason, message })
              )
            if (piece.first) {
              for (const raw of yield* q(RUNS_BY_ID, [runId])) {
                const row = decodeRunRow(raw)
                if (Either.isLeft(row)) return yield* Effect.fail<Refused>(new TailUnreadable({ runId: runIdOf(raw), detail: row.left }))
                return yield* Effect.fail<Refused>(offsetMismatch(runId, { seq: 0, digest: empty.digest }, toTail(row.right)))
              }
              const invocation = identity.right.invocationId
              for (const raw of yield* q(OWNERS, [invocation])) {
                const row = decodeOwnerRow(raw)
                if (Either.isLeft(row)) {
                  return yield* Effect.fail<Refused>(new TailUnreadable({ runId: runIdOf(raw), detail: `invocations: ${row.left}` }))
                }
                if (row.right.run_id !== runId) {
                  return yield* refuse(0, "identity_mismatch", `invocation ${invocation} already belongs to run ${row.right.run_id}`)
                }
              }
              seq = 0
              digest = empty.digest
            }
            const params: Array<unknown> = []
            ;({ seq, digest } = chainPiece(runId, plan.events, piece.events, { seq, digest }, params))
            // An id already used (by a stored event or an earlier piece) leaves its row out: fewer rows come back. Only
            // then are the piece's ids looked up, to refuse at the first one a row from before this piece holds; ids
            // repeated only inside this piece fail as the plain insert fails (a unique violation).
            const counted = yield* q(eventInsert(piece.events.length), params)
            if (Number((counted[0] as { readonly n?: unknown } | undefined)?.n) !== piece.events.length) {
              const first = seq - piece.events.length + 1
              const held = new Map<string, { readonly runId: string; readonly seq: number }>()
              for (const raw of yield* q(IDS_HELD, [piece.events.map((e) => e.id)])) {
                const row = decodeEventIdRunRow(raw)
                if (Either.isLeft(row)) return yield* Effect.fail<Refused>(new TailUnreadable({ runId: runIdOf(raw), detail: `event ids: ${row.left}` }))
                held.set(row.right.event_id, { runId: row.right.run_id, seq: row.right.seq })
              }
              for (let i = 0; i < piece.events.length; i++) {
                const at = held.get(piece.events[i]!.id)
                if (at !== undefined && !(at.runId === runId && at.seq >= first && at.seq <= seq)) {
                  return yield* refuse(i, "duplicate_event_id", `event id ${piece.events[i]!.id} is already used by another event`)
                }
              }
              return yield* Effect.fail<Refused>(new PgWriteFailure({ phase: "statement", detail: "duplicate key value violates unique constraint on events.event_id" }))
            }
            if (piece.first) yield* q(RUNS_UPSERT + runsRow(1) + RUNS_CONFLICT, runParams(tail))
            if (!piece.last) return
            if (seq !== tail.seq || digest !== tail.digest) return yield* Effect.fail<Refused>(restoreDiverged(runId, tail, { seq, digest }))
            // The call index a statement's worth at a time, in the table's key order.
            const calls = [...plan.calls].sort((a, b) => (a.callId < b.callId ? -1 : a.callId > b.callId ? 1 : 0))
            const perStatement = Math.floor(MAX_PARAMS / CALL_PARAMS)
            for (let i = 0; i < calls.length; i += perStatement) {
              const callRows: Array<unknown> = []
              const end = Math.min(calls.length, i + perStatement)
              for (let j = i; j < end; j++) for (const value of callParams(runId, calls[j]!)) callRows.push(value)
              yield* q(callUpsert(end - i), callRows)
            }
            reached.push({ seq, digest })
          }))
        // A statement's failure stays a failure (`transact` rolls back and retries or reports it); a refusal, the
        // stream's own failure or a mismatch of the plans is the body's `Left`, which rolls back.
        return walk.pipe(
          Effect.map(() => Either.right<ReadonlyArray<{ readonly seq: number; readonly digest: string }>>([...reached])),
          Effect.catchAll((error) =>
            isSqlError(error) ? Effect.fail(error) : Effect.succeed(Either.left(error)))
        )
      }).pipe(
        Effect.catchIf(
          (error): error is PgWriteFailure | TailUnreadable => error instanceof PgWriteFailure || error instanceof TailUnreadable,
          (failure) => Effect.fail(writeFailed(plans[0]?.runId ?? "", failure))
        )
      )
    })
}
