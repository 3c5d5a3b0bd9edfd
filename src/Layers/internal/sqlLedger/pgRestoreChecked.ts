// `import`'s one pass into a PostgreSQL workspace that does not exist yet (`restoreChecked`, docs/stores.md
// "PostgreSQL"): ONE transaction creates the schema and tables and writes the checked runs by binary `COPY`, so a file
// the pass does not take (refused, late refusal included) rolls back and leaves nothing: no schema, no table, no row.
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import { StoreWriteFailed } from "../../../Domain/Errors.js"
import * as LedgerRules from "../../../Domain/Rules/LedgerRules.js"
import type { CheckedPiece, RuntimeEventStoreShape } from "../../../Services/RuntimeEventStore.js"
import { createLock, migration, type PgLedger, runHeaderTables } from "../pgConnection.js"
import { type CopyColumn, copyIn, CopyRows } from "../pgCopy.js"
import { restoreDiverged } from "../restorePieces.js"
import { CALLS_PG_TYPES, CALLS_TABLE } from "../sqlDerived.js"
import { callParams, runParams } from "../sqlRows.js"
import { dollar, ledgerStatements } from "./statements.js"

// A row's group end while its run's last seq is not known yet (the largest integer): set by one UPDATE at the run's
// end. Rows of a run's last piece, rows up to the caller's hint, and the rows of a run held until it ends
// (`HOLD_BYTES`) are written with their end at once.
const PENDING_END = 2_147_483_647
// The most text (bytes, or UTF-16 units) of one run's pieces held until the run ends.
const HOLD_BYTES = 32 * 1024 * 1024
// The copy data sent as one `COPY` while a held run is written (so the buffer stays near this size).
const COPY_BYTES = 8 * 1024 * 1024
// Parameters per statement (PostgreSQL allows 65535).
const MAX_PARAMS = 60_000
const RUN_PARAMS = 12

// The calls columns in `callParams` order, and their binary copy types.
const CALL_COPY_COLUMNS = `(${CALLS_TABLE.columns.join(", ")})`
const CALL_TYPES: ReadonlyArray<CopyColumn> = CALLS_PG_TYPES.map((type) =>
  type === "integer" ? "int4" : type === "smallint" ? "int2" : "text"
)

// A failure of the client or a statement (not a refusal): the transaction is rolled back.
interface Failed {
  readonly _tag: "Failed"
  readonly phase: "statement" | "commit" | "connect"
  readonly detail: string
}

/**
 * `restoreChecked` on a PostgreSQL workspace opened `absent` (`OpenInternal.createInWrite`): in one READ COMMITTED
 * transaction on a client of its own, it takes the workspace's creation lock (`createLock`, tried: an import or host
 * creating it meanwhile makes this one fail, and the caller then imports by the two passes), checks again that no
 * schema of that name exists, creates the schema and tables (`migration`, `runHeaderTables`), then writes each chunk
 * of pieces: its events by one binary `COPY`, the `runs` rows and call index of the runs it ends, and the group end of
 * rows written before it was known (the events' append-only row trigger is created after that UPDATE, before COMMIT). The caller's digests are written as chained (each piece's seqs must follow on).
 * Any failure, of the stream included, rolls everything back; a SIGKILL of the process drops the connection, and the
 * server rolls it back: nothing is ever visible before COMMIT.
 *
 * @since 0.1.0
 * @category layers
 */
export const pgCreateChecked = (ledger: PgLedger): NonNullable<RuntimeEventStoreShape["restoreChecked"]> => {
  const { schema: s, location } = ledger
  const { RUNS_UPSERT, runsRow } = ledgerStatements((name) => `${s}.${name}`, dollar)
  const runsInsert = (n: number) => RUNS_UPSERT + Array.from({ length: n }, (_, i) => runsRow(i * RUN_PARAMS + 1)).join(", ")
  const SET_END = `UPDATE ${s}.events SET end_seq = $1 WHERE run_id = $2`
  // The events' append-only row trigger (`runHeaderTables`) is created last, just before COMMIT, after this
  // transaction set the group ends it wrote as pending: no other session ever sees the tables before then.
  const lastTrigger = (statement: string) => statement.includes("TRIGGER events_never_changed ")
  const ddl = [...migration(s), ...runHeaderTables(s)]
  const first = ddl.filter((statement) => !lastTrigger(statement))
  const last = ddl.filter(lastTrigger)
  const failed = (failure: Failed) =>
    new StoreWriteFailed({
      runId: "",
      cause: failure.detail,
      message: `PostgreSQL workspace ${location}: the one-pass import failed ${
        failure.phase === "commit" ? "at COMMIT" : failure.phase === "connect" ? "to get a connection" : "in a statement"
      } (${failure.detail}); ${failure.phase === "commit" ? "it may have committed (read the workspace again)" : "it was rolled back and nothing of it was written"}`
    })
  const detailOf = (error: unknown): string => {
    const e = error as { readonly message?: unknown; readonly code?: unknown } | null
    const message = typeof e?.message === "string" ? e.message : String(error)
    return ledger.scrub(typeof e?.code === "string" ? `${message} (SQLSTATE ${e.code})` : message)
  }

  return <E>(pieces: Stream.Stream<CheckedPiece, E>) =>
    Effect.scoped(Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => ledger.pool.connect(),
          catch: (error): Failed => ({ _tag: "Failed", phase: "connect", detail: detailOf(error) })
        }),
        (client, exit) =>
          Effect.sync(() => {
            client.off("error", ignore)
            // A client whose transaction may still be open is closed, never given back to the pool.
            client.release(Exit.isFailure(exit) ? true : undefined)
          })
      )
      // While the client is ours the pool listens to none of its events: a lost connection comes through the statement.
      client.on("error", ignore)
      const run = <A>(what: () => Promise<A>, timeout = ledger.timeout, phase: Failed["phase"] = "statement") =>
        Effect.tryPromise({ try: what, catch: (error): Failed => ({ _tag: "Failed", phase, detail: detailOf(error) }) }).pipe(
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: (): Failed => ({ _tag: "Failed", phase, detail: `no answer within ${Duration.format(timeout)}` })
          })
        )
      const q = (text: string, params?: ReadonlyArray<unknown>) => run(() => client.query(text, params as Array<unknown>))
      const copy = (target: string, data: Buffer) => run(() => copyIn(client, target, data))

      const body = Effect.gen(function*() {
        yield* q("BEGIN ISOLATION LEVEL READ COMMITTED")
        yield* q("SET LOCAL synchronous_commit TO on")
        yield* q(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(Duration.toMillis(ledger.timeout)))}`)
        const locked = yield* q(createLock(ledger.workspace, "try"))
        if (locked.rows[0]?.ok !== true) {
          return yield* Effect.fail<Failed>({ _tag: "Failed", phase: "statement", detail: "another process is creating the workspace" })
        }
        const there = yield* q("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS present", [`rr_${ledger.workspace}`])
        if (there.rows[0]?.present !== false) {
          return yield* Effect.fail<Failed>({ _tag: "Failed", phase: "statement", detail: "the workspace exists now (created meanwhile)" })
        }
        for (const statement of first) yield* q(statement)

        const reached: Array<{ readonly seq: number; readonly digest: string }> = []
        // The run being written: its seq and digest so far, and how its earlier rows' group end was written.
        let runId = ""
        let seq = 0
        let digest = ""
        let pending = false
        let hinted: number | undefined
        // One buffer each for the events' and the calls' copy data, reused from chunk to chunk.
        const events = new CopyRows()
        const calls = new CopyRows()
        let runBytes: Uint8Array = new Uint8Array()
        // The pieces of the run being read whose group end is not known yet, held (up to `HOLD_BYTES` of text) so
        // that they are written with it once the run ends, rather than set again by an UPDATE.
        let held: Array<CheckedPiece> = []
        let heldBytes = 0
        const encode = (piece: CheckedPiece, endOf: (at: number) => number) => {
          for (let i = 0; i < piece.ids.length; i++) {
            const at = piece.firstSeq + i
            events.begin(6)
            events.text(runBytes)
            events.int4(at)
            events.int4(endOf(at))
            events.text(piece.ids[i]!)
            // A digest is `sha256:` and hex (the check accepted it, or chained it): ASCII.
            events.ascii(piece.digests[i]!)
            events.text(piece.texts[i]!)
          }
        }
        const pendingEnd = () => PENDING_END
        const EVENTS_TARGET = `${s}.events (run_id, seq, end_seq, event_id, digest, bytes)`
        // Held pieces written one `COPY` of about `COPY_BYTES` at a time.
        const encodeHeld = (pieces: ReadonlyArray<CheckedPiece>, endOf: (at: number) => number) =>
          Effect.forEach(pieces, (piece) => {
            encode(piece, endOf)
            if (events.size < COPY_BYTES) return Effect.void
            return Effect.andThen(copy(EVENTS_TARGET, events.finish()), () => events.reset())
          }, { discard: true })
        const writeChunk = (chunk: Iterable<CheckedPiece>) =>
          Effect.gen(function*() {
            events.reset()
            calls.reset()
            const runs: Array<ReadonlyArray<unknown>> = []
            const ends: Array<readonly [number, string]> = []
            for (const piece of chunk) {
              if (piece.first) {
                if (held.length > 0) {
                  return yield* restoreDiverged(runId, { seq: seq + 1, digest: "(the run's next piece)" }, { seq, digest })
                }
                runId = piece.runId
                runBytes = Buffer.from(runId, "utf8")
                seq = 0
                digest = LedgerRules.emptyTail(runId).digest
                pending = false
                hinted = undefined
              } else if (piece.runId !== runId) {
                return yield* restoreDiverged(piece.runId, { seq: 1, digest: "(the run's first piece)" }, { seq: piece.firstSeq, digest: "(a later piece)" })
              }
              const n = piece.ids.length
              if (n > 0 && piece.firstSeq !== seq + 1) {
                return yield* restoreDiverged(runId, { seq: seq + 1, digest: "(the next event)" }, { seq: piece.firstSeq, digest: piece.digests[0]! })
              }
              const done = piece.done
              const hint = piece.end
              if (done !== undefined) {
                // The run ends here: its held pieces and this one, with its last seq as their group end.
                const last = done.tail.seq
                const endOf = () => last
                yield* encodeHeld(held, endOf)
                encode(piece, endOf)
                held = []
                heldBytes = 0
              } else if (hint !== undefined) {
                // The caller's hint (the file's last row names this run): rows up to it written with it at once.
                encode(piece, (at) => {
                  if (at <= hint) return hinted = hint
                  pending = true
                  return PENDING_END
                })
              } else {
                held.push(piece)
                for (const text of piece.texts) heldBytes += text.length
                if (heldBytes > HOLD_BYTES) {
                  // Too long a run to hold: its rows so far go in now, their end set by one UPDATE at its end.
                  yield* encodeHeld(held, pendingEnd)
                  pending = true
                  held = []
                  heldBytes = 0
                }
              }
              if (n > 0) {
                seq = piece.firstSeq + n - 1
                digest = piece.digests[n - 1]!
              }
              if (done === undefined) continue
              const tail = done.tail
              if (tail.runId !== runId || tail.identity === undefined || seq !== tail.seq || digest !== tail.digest) {
                return yield* restoreDiverged(runId, tail, { seq, digest })
              }
              runs.push(runParams(tail))
              const sorted = [...done.calls].sort((a, b) => (a.callId < b.callId ? -1 : a.callId > b.callId ? 1 : 0))
              for (const call of sorted) calls.row(CALL_TYPES, callParams(runId, call))
              if (pending || (hinted !== undefined && hinted !== seq)) ends.push([seq, runId])
              reached.push({ seq, digest })
            }
            if (events.rows > 0) yield* copy(EVENTS_TARGET, events.finish())
            // Each run's row once its events are in (its `first_pos`); the events' reference to it is checked at COMMIT.
            const perStatement = Math.floor(MAX_PARAMS / RUN_PARAMS)
            for (let i = 0; i < runs.length; i += perStatement) {
              const some = runs.slice(i, i + perStatement)
              yield* q(runsInsert(some.length), some.flat())
            }
            if (calls.rows > 0) yield* copy(`${s}.calls ${CALL_COPY_COLUMNS}`, calls.finish())
            for (const [end, id] of ends) yield* q(SET_END, [end, id])
          })
        yield* Stream.runForEachChunk(pieces, writeChunk)
        for (const statement of last) yield* q(statement)
        yield* run(() => client.query("COMMIT"), Duration.times(ledger.timeout, 4), "commit")
        return reached
      })
      return yield* Effect.onExit(body, (exit) =>
        Exit.isFailure(exit)
          ? run(() => client.query("ROLLBACK"), Duration.seconds(2)).pipe(Effect.ignore)
          : Effect.void)
    })).pipe(
      Effect.catchIf(
        (error): error is Failed => typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "Failed",
        (failure) => Effect.fail(failed(failure))
      )
    )
}

const ignore = (): void => {}
