// Opens the SQLite ledger file for the SQLite store: created 0600, pragmas set on every open, format version checked,
// tables migrated in one transaction; and the BEGIN IMMEDIATE write transaction every append runs in.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import { globalValue } from "effect/GlobalValue"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { join } from "node:path"
import { type OwnershipLost, StoreReadFailed, WorkspaceNotFound } from "../../Domain/Errors.js"
import { ensureSqliteEpoch, expectedEpoch, ownershipLost, SQLITE_EPOCH_READ } from "./ownerFence.js"
import * as SqliteClient from "./sqliteClient.js"
import { dispatchedCallsSql, RECOVERY_COLUMN_NAMES, recoveryBackfillOf } from "./sqlLedger/recoveryBackfill.js"
import { refuseSymlinks } from "./symlinks.js"

/**
 * The format version this code writes and reads, kept in `PRAGMA user_version` (2 adds the tool projections; 3 adds
 * the recovery columns of the call index, docs/spec/05-reconciliation.md; 4 turns the tool projections into views over the call index).
 *
 * @since 0.1.0
 * @category constants
 */
export const FORMAT_VERSION = 4

/**
 * Format 4 (docs/spec/03-tool-boundary.md's projections, at no write cost): `tool_operations` and `tool_operation_journal` are views over the
 * call index, which T1 and T2 already write in their transactions, joined with the transition events (their id and
 * `ts`). Their rows are those `ToolProjection.rebuild` gives: a dispatched call is an operation (`prepared`, version
 * 1) until its response commits its outcome (`outcome_committed`, version 2); journal ids are `<operationId>:<version>`.
 * Format 2 and 3 files kept them as tables, written by every T1 and T2: two more B-tree pages per transaction.
 *
 * @since 0.1.0
 * @category constants
 */
export const TOOL_PROJECTION_VIEWS: ReadonlyArray<string> = [
  `CREATE VIEW tool_operations AS
    SELECT c.operation_id AS operation_id, c.run_id AS run_id, c.call_id AS call_id,
      CASE WHEN c.response_seq IS NULL THEN 'prepared' ELSE 'outcome_committed' END AS state,
      CASE WHEN c.response_seq IS NULL THEN 1 ELSE 2 END AS version,
      c.dispatch_seq AS dispatch_seq, c.response_seq AS outcome_seq,
      json_extract(CAST(e.bytes AS TEXT), '$.ts') AS committed_at
    FROM calls c JOIN events e ON e.run_id = c.run_id AND e.seq = COALESCE(c.response_seq, c.dispatch_seq)
    WHERE c.dispatch_seq IS NOT NULL AND c.operation_id IS NOT NULL`,
  `CREATE VIEW tool_operation_journal AS
    SELECT c.operation_id || ':1' AS journal_id, c.operation_id AS operation_id, 1 AS version, 'prepared' AS state,
      c.run_id AS run_id, c.dispatch_seq AS seq, e.event_id AS event_id,
      json_extract(CAST(e.bytes AS TEXT), '$.ts') AS committed_at
    FROM calls c JOIN events e ON e.run_id = c.run_id AND e.seq = c.dispatch_seq
    WHERE c.dispatch_seq IS NOT NULL AND c.operation_id IS NOT NULL
    UNION ALL
    SELECT c.operation_id || ':2', c.operation_id, 2, 'outcome_committed', c.run_id, c.response_seq, e.event_id,
      json_extract(CAST(e.bytes AS TEXT), '$.ts')
    FROM calls c JOIN events e ON e.run_id = c.run_id AND e.seq = c.response_seq
    WHERE c.dispatch_seq IS NOT NULL AND c.operation_id IS NOT NULL AND c.response_seq IS NOT NULL`
]

/**
 * The names of the projection objects (tables in formats 2 and 3, views from format 4).
 *
 * @since 0.1.0
 * @category constants
 */
export const PROJECTION_NAMES = ["tool_operations", "tool_operation_journal"] as const

/**
 * The tables, created in one transaction when the file is new or of an older format (every statement is
 * idempotent; the projection views of format 4 follow them in `migrate`). `events.pos` is the commit order; `runs` holds
 * each run's identity and tail, `calls` its call index, so appends read only indexed rows inside the transaction.
 *
 * @since 0.1.0
 * @category constants
 */
export const MIGRATION: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT NOT NULL PRIMARY KEY,
    first_pos INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    invocation_id TEXT NOT NULL UNIQUE,
    turn_id TEXT NOT NULL,
    tool_boundary TEXT NOT NULL,
    tail_seq INTEGER NOT NULL CHECK (tail_seq >= 1),
    tail_digest TEXT NOT NULL,
    terminal_seq INTEGER,
    terminal_status TEXT,
    terminal_failure_class TEXT,
    terminal_abort_source TEXT
  )`,
  `CREATE INDEX IF NOT EXISTS runs_first_pos ON runs (first_pos)`,
  `CREATE TABLE IF NOT EXISTS events (
    pos INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    seq INTEGER NOT NULL CHECK (seq >= 1),
    end_seq INTEGER NOT NULL CHECK (end_seq >= seq),
    event_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    bytes BLOB NOT NULL,
    UNIQUE (run_id, seq),
    UNIQUE (event_id)
  )`,
  `CREATE TABLE IF NOT EXISTS calls (
    run_id TEXT NOT NULL REFERENCES runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    call_id TEXT NOT NULL,
    name TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    call_seq INTEGER NOT NULL,
    hidden INTEGER NOT NULL,
    dispatch_seq INTEGER,
    operation_id TEXT,
    response_seq INTEGER,
    is_error INTEGER,
    PRIMARY KEY (run_id, call_id)
  ) WITHOUT ROWID`
]

/**
 * Format 3 (docs/spec/05-reconciliation.md): the call index keeps what the recovery writer checks, so a bundle's append is O(1): each
 * call's recorded mode, idempotency key and evidence digest (from its `ToolDispatched`) and its last recovery decision.
 * `ALTER TABLE` is not idempotent: these run only on a file older than format 3, and each only when the column is
 * missing (a new file gets them after the format 1 and 2 tables). The backfill (`backfillRecovery`) reads every dispatch of the older file once.
 *
 * @since 0.1.0
 * @category constants
 */
export const RECOVERY_COLUMNS_MIGRATION: ReadonlyArray<string> = [
  "ALTER TABLE calls ADD COLUMN recovery_mode TEXT",
  "ALTER TABLE calls ADD COLUMN idempotency_key TEXT",
  "ALTER TABLE calls ADD COLUMN evidence_digest TEXT",
  "ALTER TABLE calls ADD COLUMN recovery_kind TEXT",
  "ALTER TABLE calls ADD COLUMN recovery_disposition TEXT",
  "ALTER TABLE calls ADD COLUMN recovery_reason TEXT",
  "ALTER TABLE calls ADD COLUMN recovery_actor TEXT",
  "ALTER TABLE calls ADD COLUMN recovery_seq INTEGER"
]

/** The columns of a format 3 `calls` table that migration step adds, in order (shared with PostgreSQL). */
export { RECOVERY_COLUMN_NAMES }

/**
 * Fills the format 3 columns of an older file's dispatched calls from their `ToolDispatched` events (inside the
 * migration's transaction, synchronously). Older formats could hold no recovery bundle (every reader refused
 * them), so the recovery decision columns stay NULL. A dispatch whose stored bytes do not parse is left NULL: the
 * reader reports that row as corrupt anyway.
 *
 * @since 0.1.0
 * @category layers
 */
export const backfillRecovery = (handle: Pick<SqliteClient.SqliteHandle, "all" | "run">): void => {
  for (const raw of handle.all(dispatchedCallsSql(identity), [])) {
    const params = recoveryBackfillOf(raw)
    if (params === undefined) continue
    handle.run("UPDATE calls SET recovery_mode = ?, idempotency_key = ?, evidence_digest = ? WHERE run_id = ? AND call_id = ?", params)
  }
}

/**
 * Brings a file of format `from` to `FORMAT_VERSION`, synchronously on the migration's connection.
 *
 * @since 0.1.0
 * @category layers
 */
export const migrate = (handle: Pick<SqliteClient.SqliteHandle, "all" | "run">, from: number): void => {
  for (const statement of MIGRATION) handle.run(statement, [])
  if (from < 3) {
    // Only the columns the table lacks (a file whose version was lowered by hand may have them already).
    const present = new Set(
      handle.all("PRAGMA table_info(calls)", []).map((c) => (c as { name?: unknown }).name)
    )
    RECOVERY_COLUMNS_MIGRATION.forEach((statement, i) => {
      if (!present.has(RECOVERY_COLUMN_NAMES[i])) handle.run(statement, [])
    })
    // `reconcile`'s candidates (dispatched, no response, no bundle) without a scan of the call index.
    handle.run(
      "CREATE INDEX IF NOT EXISTS calls_unsettled ON calls (run_id, call_seq) " +
        "WHERE dispatch_seq IS NOT NULL AND response_seq IS NULL AND recovery_kind IS NULL",
      []
    )
    backfillRecovery(handle)
  }
  if (from < 4) {
    // The projection tables of formats 2 and 3 become views (their rows were derived from the same calls and events).
    for (const name of PROJECTION_NAMES) {
      const kind = handle.all("SELECT type FROM sqlite_master WHERE name = ?", [name])[0] as { type?: unknown } | undefined
      if (kind?.type === "table") handle.run(`DROP TABLE ${name}`, [])
      else if (kind?.type === "view") handle.run(`DROP VIEW ${name}`, [])
    }
    for (const statement of TOOL_PROJECTION_VIEWS) handle.run(statement, [])
  }
  handle.run(`PRAGMA user_version = ${FORMAT_VERSION}`, [])
}

/**
 * Why a write transaction failed outside the ledger's rules: a statement, or the COMMIT itself.
 *
 * @since 0.1.0
 * @category errors
 */
export class WriteFailure extends Data.TaggedError("WriteFailure")<{
  readonly phase: "statement" | "commit"
  readonly error: SqlError
  /** What the last ROLLBACK after the failure reported, when it was not "no transaction is active". */
  readonly rollback?: string
}> {}

/**
 * An open ledger file: its client (one connection), where it is, and how to write to it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteLedger {
  readonly sql: SqlClient.SqlClient
  /**
   * The same connection's statements, run synchronously: only inside `transact` (which holds the connection), where
   * a throw is caught as a failed statement and rolled back.
   */
  readonly statements: Pick<SqliteClient.SqliteHandle, "all" | "run" | "values" | "namedValues">
  /**
   * Runs synchronous statements on the connection, outside any write transaction (when another fiber's transaction
   * is open on it, after that one, holding the connection); a throw becomes the `SqlError` the client would report.
   */
  readonly read: <A>(f: () => A) => Effect.Effect<A, SqlError>
  /** The database file (the real path of the workspace joined with the file name). */
  readonly path: string
  readonly readOnly: boolean
  /** True when a read-only open found a file no writer has initialised yet (no tables): it holds no runs. */
  readonly uninitialised: boolean
  /** The file's format version as opened (`FORMAT_VERSION` after a writer's migration; older for a read-only open). */
  readonly formatVersion: number
  /**
   * Every write: one `BEGIN IMMEDIATE` transaction, after every earlier write to this file from this process, whose
   * `body` runs synchronously on the held connection. `Left` rolls it back and fails with its error; a throw rolls it back as a failed statement;
   * `Right` runs `beforeCommit` (a failpoint), then COMMIT (a failing COMMIT is rolled back: `WriteFailure`).
   * A writer's transaction first checks the workspace's owner epoch (docs/stores.md "Fencing"): when it moved
   * since this process took its hold, the transaction is rolled back before `body` runs and fails `OwnershipLost`.
   */
  readonly transact: <A, E, R = never>(
    body: () => Either.Either<A, E>,
    beforeCommit?: Effect.Effect<void, never, R>
  ) => Effect.Effect<A, E | WriteFailure | OwnershipLost, R>
  /**
   * `transact` with no `beforeCommit`, run in the caller's synchronous step when no other write of this process holds
   * the file (then nothing can run between its BEGIN IMMEDIATE and its COMMIT); `undefined` when one does, and nothing
   * was run (the caller then takes `transact`, which waits for it).
   */
  readonly transactNow: <A, E>(body: () => Either.Either<A, E>) => Either.Either<A, E | WriteFailure | OwnershipLost> | undefined
  /**
   * One `BEGIN IMMEDIATE` transaction whose body is an Effect (a streamed restore, piece by piece): `body` runs its
   * statements synchronously on the held connection (through `step`, which turns a throw into a failed statement),
   * then COMMIT. A failure, a defect or a failing COMMIT rolls it back. Holds the gate and the connection throughout,
   * uninterruptibly: a transaction is never left open on the connection.
   */
  readonly transactEffect: <A, E, R>(
    body: (step: <B>(f: () => B) => Effect.Effect<B, WriteFailure>) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | WriteFailure | OwnershipLost, R>
}

/**
 * What `open` needs.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenOptions {
  readonly workspace: string
  readonly fileName: string
  readonly readOnly: boolean
}

/**
 * A short description of an SQL error's cause, for error messages.
 *
 * @since 0.1.0
 * @category layers
 */
export const describeSqlError = (error: SqlError): string =>
  error.cause instanceof Error ? `${error.cause.name}: ${error.cause.message}` : String(error.cause ?? error.message)

const isNoTransaction = (error: SqlError): boolean =>
  error.cause instanceof Error && /no transaction is active/.test(error.cause.message)

// One write gate per database file per process. Two store instances over one file in one process must not
// interleave their transactions: better-sqlite3 waits for a busy lock synchronously, so a BEGIN IMMEDIATE
// behind another connection of the same thread would block the very event loop that must finish the first.
// Other processes are kept apart by SQLite's own locks and busy timeout. Reference-counted per open store.
class WriteGate {
  readonly semaphore = Effect.unsafeMakeSemaphore(1)
  users = 0
  /** True while a fiber holds the gate: set once the permit is taken, cleared before it is given back. */
  held = false
  /** Runs `effect` holding the gate. */
  readonly withGate = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    this.semaphore.withPermits(1)(
      Effect.suspend(() => {
        this.held = true
        return Effect.ensuring(effect, Effect.sync(() => void (this.held = false)))
      })
    )
  /**
   * True when no fiber of this process holds the gate: then a write that runs start to end in one synchronous
   * step (BEGIN IMMEDIATE … COMMIT, no yield between) cannot interleave with any other transaction of this
   * process on the file, and needs no permit. A fiber that took the permit but has not yet set `held` has not
   * touched the database; one that cleared it is done with it.
   */
  get free(): boolean {
    return !this.held
  }
}

const writeGates = globalValue(
  Symbol.for("runtime-resume/SqliteRuntimeEventStore/writeGates/v2"),
  () => new Map<string, WriteGate>()
)

const acquireGate = (path: string): Effect.Effect<WriteGate, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      let gate = writeGates.get(path)
      if (gate === undefined) writeGates.set(path, gate = new WriteGate())
      gate.users++
      return gate
    }),
    () =>
      Effect.sync(() => {
        const gate = writeGates.get(path)
        if (gate !== undefined && --gate.users === 0) writeGates.delete(path)
      })
  )

const UserVersionRows = Schema.Tuple(Schema.Struct({ user_version: Schema.Int }))
const TableRows = Schema.Array(Schema.Struct({ name: Schema.String }))

/**
 * The ledger tables each format version holds (a later version adds its tables here). Version 0 is a file no
 * writer initialised: it holds none of them.
 *
 * @since 0.1.0
 * @category constants
 */
export const TABLES_OF_VERSION: ReadonlyArray<ReadonlyArray<string>> = [
  [],
  ["runs", "events", "calls"],
  ["runs", "events", "calls", "tool_operations", "tool_operation_journal"],
  // 3 adds columns to calls (docs/spec/05-reconciliation.md's recovery state), no table.
  ["runs", "events", "calls", "tool_operations", "tool_operation_journal"],
  // 4: the two projections are views (the header check lists tables and views alike).
  ["runs", "events", "calls", "tool_operations", "tool_operation_journal"]
]

/**
 * Why a header's `user_version` does not fit the ledger tables present, or `undefined` when it does.
 *
 * @since 0.1.0
 * @category layers
 */
export const headerMismatch = (version: number, present: ReadonlySet<string>): string | undefined => {
  const expected = TABLES_OF_VERSION[version]
  if (expected === undefined) {
    return version < 0 ? "no format version is negative" : undefined
  }
  const ours = new Set(TABLES_OF_VERSION.flat())
  const missing = expected.filter((t) => !present.has(t))
  const extra = [...ours].filter((t) => present.has(t) && !expected.includes(t))
  if (missing.length === 0 && extra.length === 0) return undefined
  return [
    missing.length > 0 ? `the tables ${missing.join(", ")} that format ${version} has are missing` : undefined,
    extra.length > 0 ? `the file holds the tables ${extra.join(", ")}, which format ${version} does not have` : undefined
  ].filter((x) => x !== undefined).join(", and ")
}
const JournalModeRows = Schema.Tuple(Schema.Struct({ journal_mode: Schema.String }))

/**
 * The ledger's own transaction tag. Its transactions never nest (so a caller's own `SqlClient` transaction, whose
 * `TransactionConnection` may be in the context, is never mistaken for ours), and the statements inside run
 * synchronously on the held connection, never through the client (whose permit the transaction holds).
 */
class LedgerTransaction extends Context.Tag("runtime-resume/SqliteLedgerTransaction")<
  LedgerTransaction,
  readonly [conn: SqlConnection.Connection, counter: number]
>() {}

/**
 * Builds the write transaction of stack.md: `SqlClient.makeWithTransaction` over the ledger's own tag, the client's
 * one connection held throughout (its permit, as `sql.reserve` takes it), and `BEGIN IMMEDIATE`, so a
 * transaction that reads the tail and then writes never fails with SQLITE_BUSY_SNAPSHOT. A failing COMMIT is
 * rolled back while the connection is still held, so no other fiber ever sees the half-done transaction.
 */
const makeTransaction = (handle: SqliteClient.SqliteHandle) => {
  const exec = (statement: string) =>
    Effect.suspend(() => {
      try {
        handle.run(statement, [])
        return Effect.void
      } catch (cause) {
        return Effect.fail(SqliteClient.sqlError(cause))
      }
    })
  // The connection is held for the whole transaction by `handle.exclusive` (the permit `sql.reserve` would take,
  // without a scope per transaction); its statements run synchronously on it.
  const transaction = SqlClient.makeWithTransaction({
    transactionTag: LedgerTransaction,
    spanAttributes: [["db.system.name", "sqlite"]],
    acquireConnection: Effect.succeed([undefined, handle.connection] as const),
    begin: () => exec("BEGIN IMMEDIATE"),
    savepoint: (_, id) => exec(`SAVEPOINT effect_sql_${id}`),
    commit: () => exec("COMMIT").pipe(Effect.tapError(() => Effect.ignore(exec("ROLLBACK")))),
    rollback: () => exec("ROLLBACK").pipe(Effect.catchIf(isNoTransaction, () => Effect.void)),
    rollbackSavepoint: (_, id) => exec(`ROLLBACK TO SAVEPOINT effect_sql_${id}`)
  })
  return <A, E, R>(effect: Effect.Effect<A, E, R>) => handle.exclusive(transaction(effect))
}

// The append path's transaction (`SqliteLedger.transact`): the file's gate, the connection held, BEGIN IMMEDIATE,
// rollback on any failure before the gate opens, in synchronous steps instead of the SQL package's transaction
// machinery (which the migration uses), whose span and fiber-ref bookkeeping cost more than an append's statements.
// Without `beforeCommit` the whole transaction is one synchronous step: when the gate is free (no other fiber of this
// process is inside a write on this file) it runs straight away, with no permit to take, since nothing can run
// between its BEGIN and its COMMIT; otherwise it waits for the gate. With `beforeCommit` (a failpoint, which may
// suspend) it holds the gate and the connection, uninterruptibly: a transaction is never left open on the connection.
const makeTransact = (
  handle: SqliteClient.SqliteHandle,
  gate: WriteGate,
  fence: () => OwnershipLost | undefined
): Pick<SqliteLedger, "transact" | "transactEffect" | "transactNow"> => {
  const rollback = (): string | undefined => {
    try {
      handle.run("ROLLBACK", [])
      return undefined
    } catch (cause) {
      const error = SqliteClient.sqlError(cause)
      return isNoTransaction(error) ? undefined : describeSqlError(error)
    }
  }
  const failed = (phase: WriteFailure["phase"], cause: unknown): WriteFailure => {
    const rolledBack = rollback()
    return new WriteFailure({ phase, error: SqliteClient.sqlError(cause), ...(rolledBack !== undefined ? { rollback: rolledBack } : {}) })
  }
  const commit = <A>(value: A): Effect.Effect<A, WriteFailure> => {
    try {
      handle.run("COMMIT", [])
      return Effect.succeed(value)
    } catch (cause) {
      return Effect.fail(failed("commit", cause))
    }
  }
  // BEGIN IMMEDIATE, the owner epoch's check, and the body; the transaction is left open only on `Right`.
  const begin = <A, E>(body: () => Either.Either<A, E>): Either.Either<A, E | WriteFailure | OwnershipLost> => {
    try {
      handle.run("BEGIN IMMEDIATE", [])
    } catch (cause) {
      return Either.left(failed("statement", cause))
    }
    let result: Either.Either<A, E | OwnershipLost>
    try {
      const lost = fence()
      result = lost !== undefined ? Either.left(lost) : body()
    } catch (cause) {
      return Either.left(failed("statement", cause))
    }
    if (Either.isLeft(result)) rollback()
    return result
  }
  // The whole transaction, synchronously: BEGIN, the body, COMMIT (or ROLLBACK).
  const wholeNow = <A, E>(body: () => Either.Either<A, E>): Either.Either<A, E | WriteFailure | OwnershipLost> => {
    const result = begin(body)
    if (Either.isLeft(result)) return result
    try {
      handle.run("COMMIT", [])
      return result
    } catch (cause) {
      return Either.left(failed("commit", cause))
    }
  }
  const whole = <A, E>(body: () => Either.Either<A, E>): Effect.Effect<A, E | WriteFailure | OwnershipLost> => {
    const result = wholeNow(body)
    return Either.isLeft(result) ? Effect.fail(result.left) : Effect.succeed(result.right)
  }
  const transactNow: SqliteLedger["transactNow"] = (body) => gate.free && !handle.inTransaction() ? wholeNow(body) : undefined
  const held = <A, E, R>(effect: Effect.Effect<A, E, R>) => gate.withGate(handle.exclusive(Effect.uninterruptible(effect)))
  const step = <B>(f: () => B): Effect.Effect<B, WriteFailure> =>
    Effect.suspend(() => {
      try {
        return Effect.succeed(f())
      } catch (cause) {
        return Effect.fail(failed("statement", cause))
      }
    })
  const transactEffect: SqliteLedger["transactEffect"] = <A, E, R>(
    body: (step: <B>(f: () => B) => Effect.Effect<B, WriteFailure>) => Effect.Effect<A, E, R>
  ) =>
    held(Effect.suspend((): Effect.Effect<A, E | WriteFailure | OwnershipLost, R> => {
      const started = begin(() => Either.right(undefined))
      if (Either.isLeft(started)) return Effect.fail(started.left)
      return Effect.onExit(
        Effect.flatMap(body(step), (value) => Effect.suspend(() => commit(value))),
        (exit) => exit._tag === "Failure" ? Effect.sync(rollback) : Effect.void
      )
    }))
  const transact = <A, E, R = never>(body: () => Either.Either<A, E>, beforeCommit?: Effect.Effect<void, never, R>) => {
    if (beforeCommit === undefined) {
      return Effect.suspend(() =>
        gate.free && !handle.inTransaction() ? whole(body) : held(Effect.suspend(() => whole(body)))
      )
    }
    return held(Effect.suspend((): Effect.Effect<A, E | WriteFailure | OwnershipLost, R> => {
      const result = begin(body)
      if (Either.isLeft(result)) return Effect.fail(result.left)
      const value = result.right
      // The failpoint runs inside the open transaction; if it dies, the transaction is rolled back before the gate opens.
      return Effect.onExit(
        Effect.flatMap(beforeCommit, () => Effect.suspend(() => commit(value))),
        (exit) => exit._tag === "Failure" ? Effect.sync(rollback) : Effect.void
      )
    }))
  }
  return { transact, transactEffect, transactNow }
}

/**
 * Opens (writer: creating the folder 0700 and the file 0600 if missing, then migrating) or opens read-only
 * (the file must exist; nothing is created) the ledger file, with `synchronous=FULL` on every writer open.
 *
 * @since 0.1.0
 * @category layers
 */
export const open = (
  options: OpenOptions
): Effect.Effect<SqliteLedger, WorkspaceNotFound | StoreReadFailed, Scope.Scope | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const given = join(options.workspace, options.fileName)
    // SQLite's "unable to open" on a file that exists is a folder it may not write (its -wal/-shm side files), or a
    // full or read-only disk: say what to do next.
    const hint = (cause: string) =>
      /unable to open database file|readonly|read-only/i.test(cause)
        ? "; SQLite must create runtime.sqlite-wal and -shm beside the ledger, even to read it: on a read-only disk, " +
          "copy the workspace to a writable one and run the command there"
        : /disk is full|SQLITE_FULL/i.test(cause)
        ? "; the disk is full: free some space, then run the command again"
        : ""
    const readFailed = (path: string, what: string, cause: string) =>
      new StoreReadFailed({ path, cause, message: `SQLite ledger ${path}: ${what}: ${cause}${hint(cause)}` })
    const fsFailed = (path: string, what: string) => (error: { readonly message: string }) =>
      readFailed(path, what, error.message)

    // File hygiene: never open a workspace or ledger file that is a symbolic link (best-effort, before any open).
    const { fileName } = options
    yield* refuseSymlinks(fs, options.workspace, [fileName, `${fileName}-wal`, `${fileName}-shm`, `${fileName}-journal`])
    if (options.readOnly) {
      const info = yield* fs.stat(given).pipe(Effect.option)
      if (Option.isNone(info) || info.value.type !== "File") {
        return yield* new WorkspaceNotFound({
          workspace: options.workspace,
          message: `no SQLite ledger at ${given}: ${
            Option.isNone(info) ? "the file does not exist" : "it is not a file"
          }; nothing was created`
        })
      }
    } else {
      const folder = yield* fs.stat(options.workspace).pipe(Effect.option)
      if (Option.isNone(folder)) {
        yield* fs.makeDirectory(options.workspace, { recursive: true, mode: 0o700 }).pipe(
          Effect.mapError(fsFailed(given, "could not create the workspace folder"))
        )
      } else if (folder.value.type !== "Directory") {
        return yield* readFailed(given, "the workspace is not a folder", `${options.workspace} is a ${folder.value.type}`)
      }
    }
    const real = yield* fs.realPath(options.workspace).pipe(
      Effect.mapError(fsFailed(given, "could not resolve the workspace folder"))
    )
    const path = join(real, options.fileName)

    const gate = yield* acquireGate(path)
    const opened = Effect.gen(function*() {
      if (!options.readOnly) {
        // better-sqlite3 would create the file 0644; create it empty 0600 first (-wal and -shm inherit it).
        yield* Effect.scoped(fs.open(path, { flag: "ax", mode: 0o600 })).pipe(
          Effect.catchIf((error) => error._tag === "SystemError" && error.reason === "AlreadyExists", () => Effect.void),
          Effect.mapError(fsFailed(path, "could not create the database file"))
        )
      }
      const handle = yield* SqliteClient.make({
        filename: path,
        readonly: options.readOnly,
        disableWAL: options.readOnly
      }).pipe(
        Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make),
        Effect.catchAllDefect((defect) =>
          Effect.fail(readFailed(path, "could not open the database", defect instanceof Error ? defect.message : String(defect)))
        )
      )
      const { sql } = handle
      const query = <A, I>(what: string, rows: Schema.Schema<A, I>, statement: Effect.Effect<ReadonlyArray<unknown>, SqlError>) =>
        statement.pipe(
          Effect.mapError((error) => readFailed(path, what, describeSqlError(error))),
          Effect.flatMap((result) =>
            Either.match(Schema.decodeUnknownEither(rows)(result), {
              onLeft: (error) => Effect.fail(readFailed(path, what, `unexpected answer: ${error.message}`)),
              onRight: Effect.succeed
            })
          )
        )
      const exec = (what: string, statement: Effect.Effect<ReadonlyArray<unknown>, SqlError>) =>
        Effect.asVoid(Effect.mapError(statement, (error) => readFailed(path, what, describeSqlError(error))))

      if (!options.readOnly) {
        // A reopened WAL connection reports NORMAL; the ledger needs every commit on disk before it succeeds.
        yield* exec("could not set synchronous=FULL", sql.unsafe("PRAGMA synchronous = FULL"))
        yield* exec("could not enable foreign keys", sql.unsafe("PRAGMA foreign_keys = ON"))
        const [{ journal_mode }] = yield* query("could not read the journal mode", JournalModeRows, sql.unsafe("PRAGMA journal_mode"))
        if (journal_mode.toLowerCase() !== "wal") {
          return yield* readFailed(path, "the database is not in WAL mode", `journal_mode is ${journal_mode}`)
        }
      }
      const readVersion = query("could not read the format version", UserVersionRows, sql.unsafe("PRAGMA user_version"))
      const [{ user_version }] = yield* readVersion
      if (user_version > FORMAT_VERSION) {
        return yield* readFailed(
          path,
          "the file is of a newer format",
          `format version ${user_version} is newer than ${FORMAT_VERSION}, the newest this version of runtime-resume reads; upgrade runtime-resume`
        )
      }
      // The header must agree with the tables the file holds: a header reading 0 (or an older format) over tables a
      // newer format made would have readers report no runs, or a writer migrate over them. Refused, naming both.
      const tables = yield* query("could not list the tables", TableRows, sql.unsafe("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
      const mismatch = headerMismatch(user_version, new Set(tables.map((t) => t.name)))
      if (mismatch !== undefined) {
        return yield* readFailed(
          path,
          "the file's header does not match its tables",
          `PRAGMA user_version (the format version in the database header) reads ${user_version}, but ${mismatch}. ` +
            "The header was changed or the file is damaged; nothing was read or written. Restore the file from a " +
            "backup, or set the header back with the sqlite3 shell (`PRAGMA user_version = " + FORMAT_VERSION + "`) " +
            "only if you know the file was written by this version, then run `runtime-resume verify`"
        )
      }
      if (!options.readOnly && user_version < FORMAT_VERSION) {
        yield* makeTransaction(handle)(
          // Synchronous on the held connection. Another process may have migrated between the read above and this
          // transaction: read the version again inside it.
          Effect.suspend((): Effect.Effect<void, StoreReadFailed | SqlError> => {
            try {
              const current = Schema.decodeUnknownEither(UserVersionRows)(handle.all("PRAGMA user_version", []))
              if (Either.isLeft(current)) {
                return Effect.fail(readFailed(path, "could not read the format version", `unexpected answer: ${current.left.message}`))
              }
              if (current.right[0].user_version < FORMAT_VERSION) migrate(handle, current.right[0].user_version)
              return Effect.void
            } catch (cause) {
              return Effect.fail(SqliteClient.sqlError(cause))
            }
          })
        ).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(readFailed(path, "could not create the tables", describeSqlError(error)))),
          Effect.catchAllDefect((defect) =>
            Effect.fail(readFailed(path, "could not commit the new tables", defect instanceof SqlError ? describeSqlError(defect) : String(defect)))
          )
        )
      }
      // Fencing (docs/stores.md "Fencing"): a writer makes sure the `owner_epoch` table exists (an older file is
      // migrated so, in its own short transaction); each write transaction then checks, right after BEGIN IMMEDIATE,
      // the epoch this process holds the workspace under (when it holds the owner lock).
      if (!options.readOnly) {
        const epochNow = (): number | undefined => {
          const row = handle.all(SQLITE_EPOCH_READ, [])[0] as { epoch?: unknown } | undefined
          return typeof row?.epoch === "number" ? row.epoch : typeof row?.epoch === "bigint" ? Number(row.epoch) : undefined
        }
        yield* Effect.try({
          try: () => {
            const present = handle.all("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'owner_epoch'", []).length > 0
            if (!present || epochNow() === undefined) {
              handle.run("BEGIN IMMEDIATE", [])
              try {
                ensureSqliteEpoch(handle.run, real)
                handle.run("COMMIT", [])
              } catch (cause) {
                if (handle.inTransaction()) handle.run("ROLLBACK", [])
                throw cause
              }
            }
          },
          catch: (cause) => readFailed(path, "could not create the owner_epoch table", cause instanceof Error ? cause.message : String(cause))
        })
      }
      const fence = (): OwnershipLost | undefined => {
        if (options.readOnly) return undefined
        const expected = expectedEpoch(real)
        if (expected === undefined) return undefined
        const row = handle.all(SQLITE_EPOCH_READ, [])[0] as { epoch?: unknown } | undefined
        const found = typeof row?.epoch === "number" ? row.epoch : typeof row?.epoch === "bigint" ? Number(row.epoch) : undefined
        return found === expected ? undefined : ownershipLost(path, expected, found)
      }
      return {
        sql,
        statements: { all: handle.all, run: handle.run, values: handle.values, namedValues: handle.namedValues },
        read: (f) => {
          const attempt = Effect.suspend(() => {
            try {
              return Effect.succeed(f())
            } catch (cause) {
              return Effect.fail(SqliteClient.sqlError(cause))
            }
          })
          // A read runs start to end in one synchronous step. Outside any transaction on the connection nothing can
          // run between its statements, so it needs no permit (taking one costs more than a tool cycle's first read);
          // inside another fiber's transaction (a write suspended at its failpoint, the migration) it waits for it.
          // The waiting effect is built only then.
          return Effect.suspend(() => handle.inTransaction() ? handle.exclusive(attempt) : attempt)
        },
        path,
        readOnly: options.readOnly,
        uninitialised: options.readOnly && user_version === 0,
        formatVersion: options.readOnly ? user_version : FORMAT_VERSION,
        ...makeTransact(handle, gate, fence)
      } satisfies SqliteLedger
    })
    // Opening and migrating are writes too: keep them apart from other instances' transactions in this process.
    return yield* (options.readOnly ? opened : gate.withGate(opened))
  })
