// Opens a PostgreSQL workspace for the PostgreSQL stores: the pool, the durability check, the workspace's schema
// and tables (created once, under an advisory lock), the format version; and the transaction every write runs in.
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { createHash } from "node:crypto"
import pg from "pg"
import { type OwnershipLost, StoreReadFailed, WorkspaceNotFound } from "../../Domain/Errors.js"
import { expectedEpoch, ownershipLost } from "./ownerFence.js"
import { dispatchedCallsSql, RECOVERY_COLUMN_NAMES, recoveryBackfillOf } from "./sqlLedger/recoveryBackfill.js"

/**
 * The format version of a PostgreSQL workspace, kept in its `meta` table. Format 2 (docs/spec/05-reconciliation.md) adds the recovery
 * columns of the call index (as SQLite's format 3) and the partial index `calls_unsettled`; format 3 turns the tool
 * projections into views over the call index (as SQLite's format 4); format 4 adds the `owner_epoch` row of fencing.
 *
 * @since 0.1.0
 * @category constants
 */
export const PG_FORMAT_VERSION = 4

/**
 * A workspace name: a plain identifier (it names a schema, `rr_<name>`).
 *
 * @since 0.1.0
 * @category constants
 */
export const WORKSPACE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/

/**
 * How long one write transaction (or read) may take before it fails with a typed error (the server is gone).
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_STATEMENT_TIMEOUT = Duration.seconds(15)

/**
 * What `open` needs.
 *
 * @since 0.1.0
 * @category models
 */
export interface PgOpenOptions {
  /** The server, e.g. `postgres://user:password@host:5432/db` (never printed: messages show it without the password). */
  readonly url: Redacted.Redacted<string>
  /** The workspace inside the database (a plain identifier). */
  readonly workspace: string
  /** Do not create the schema: a missing workspace holds no runs. */
  readonly readOnly?: boolean
  /** Pool size (default 4). */
  readonly maxConnections?: number
  /** Connect timeout (default 5 s) and per-operation timeout (default 15 s). */
  readonly connectTimeout?: Duration.DurationInput
  readonly operationTimeout?: Duration.DurationInput
}

/**
 * Why a write transaction failed outside the ledger's rules: a statement, the COMMIT, or the time limit.
 *
 * @since 0.1.0
 * @category errors
 */
export class PgWriteFailure extends Data.TaggedError("PgWriteFailure")<{
  readonly phase: "statement" | "commit" | "timeout" | "connect"
  readonly detail: string
}> {}

/**
 * Runs one statement on a held connection: `$1`-style placeholders.
 *
 * @since 0.1.0
 * @category models
 */
export type Query = (text: string, params?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, SqlError>

/**
 * An opened workspace: its client, its schema (quoted), where it is (without the password), and how to write.
 *
 * @since 0.1.0
 * @category models
 */
export interface PgLedger {
  readonly sql: PgClient.PgClient
  /** The quoted schema name, to prefix tables: `"rr_name".events`. */
  readonly schema: string
  /** `postgres://user@host:port/db#workspace`: what messages name (never the password). */
  readonly location: string
  readonly workspace: string
  /** True when a read-only open found no such workspace: it holds no runs. */
  readonly uninitialised: boolean
  /**
   * True when an open for `import`'s one pass (`OpenInternal.createInWrite`) found no such workspace and created
   * nothing: the one-pass write creates the schema and tables inside its own transaction (sqlLedger/pgRestoreChecked.ts).
   */
  readonly absent: boolean
  /** The pool the client runs over (a raw `pg` client of it serves the one pass's `COPY`). */
  readonly pool: pg.Pool
  /** The workspace's format version (below `PG_FORMAT_VERSION` only when opened read-only and not migrated). */
  readonly formatVersion: number
  /** Runs one statement from the pool (outside any transaction), with the operation timeout. */
  readonly query: Query
  /** Removes the URL's password from a text (errors from the driver). */
  readonly scrub: (text: string) => string
  /**
   * One READ COMMITTED transaction on a connection of its own, `synchronous_commit` on for it whatever the server
   * says: `body` gets the connection's query; `Left` rolls back and fails with its error; `Right` runs `beforeCommit`,
   * then COMMIT. A failed statement or COMMIT rolls back and fails with `PgWriteFailure`; a unique or serialization
   * conflict (another host created the same run, id or invocation at once) retries the whole transaction.
   */
  readonly transact: <A, E, R = never>(
    body: (q: Query) => Effect.Effect<Either.Either<A, E>, SqlError>,
    beforeCommit?: Effect.Effect<void, never, R>
  ) => Effect.Effect<A, E | PgWriteFailure | OwnershipLost, R>
  /**
   * The owner epoch a write must find (docs/stores.md "Fencing"): the one this process holds the workspace under, or
   * `undefined` (nothing to check) while it holds no owner lock of it. `transact` checks it first, under a row lock
   * held to COMMIT; the one-statement append checks it in its own statement.
   */
  readonly fenceEpoch: () => number | undefined
  /**
   * One writing statement on its own (its own transaction, committed durably: the pool's sessions start with
   * `synchronous_commit=on`), run on a pooled `pg` client directly: one round trip, with the operation timeout.
   * `Left("conflict")` is a unique, serialization or deadlock conflict with another host's write (nothing written);
   * an error the server answered fails with `statement` (nothing written), a lost connection or a server going down
   * with `commit` and the time limit with `timeout` (either: it may have committed).
   */
  readonly single: (
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<Either.Either<ReadonlyArray<any>, "conflict">, PgWriteFailure>
  /** The operation timeout. */
  readonly timeout: Duration.Duration
}

/**
 * A short description of an SQL error's cause (with the SQLSTATE), for error messages.
 *
 * @since 0.1.0
 * @category layers
 */
export const describePgError = (error: SqlError): string => {
  const cause = error.cause as { message?: unknown; code?: unknown } | undefined
  if (cause !== null && typeof cause === "object" && typeof cause.message === "string") {
    return typeof cause.code === "string" ? `${cause.message} (SQLSTATE ${cause.code})` : cause.message
  }
  return error.message
}

/**
 * The SQLSTATE of an SQL error, when the server gave one.
 *
 * @since 0.1.0
 * @category layers
 */
export const sqlState = (error: SqlError): string | undefined => {
  const cause = error.cause as { code?: unknown } | undefined
  return cause !== null && typeof cause === "object" && typeof cause.code === "string" ? cause.code : undefined
}

// unique_violation, serialization_failure, deadlock_detected: another host's concurrent write; retried.
const RETRIED = new Set(["23505", "40001", "40P01"])

// SQLSTATE classes after which a statement outside a transaction may have committed: the connection failed (08),
// the server is going down (57, but query_canceled 57014 by a timeout rolls back), a system or internal error (58, XX).
/** The listener a checked-out client carries while a statement runs (its failure comes through the statement). */
const ignoreClientError = (): void => {}

const mayHaveCommitted = (state: string | undefined): boolean =>
  state === undefined || (state !== "57014" && /^(08|57|58|XX)/.test(state))

/**
 * The URL without its password, or a placeholder when it does not parse (never the URL itself).
 *
 * @since 0.1.0
 * @category layers
 */
export const describeUrl = (url: string): { readonly location: string; readonly password: string | undefined } => {
  try {
    const parsed = new URL(url)
    if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") return { location: "(not a postgres:// URL)", password: undefined }
    const password = parsed.password === "" ? undefined : decodeURIComponent(parsed.password)
    const user = parsed.username === "" ? "" : `${decodeURIComponent(parsed.username)}@`
    return { location: `postgres://${user}${parsed.host}${parsed.pathname}`, password }
  } catch {
    return { location: "(unparsable PostgreSQL URL)", password: undefined }
  }
}

const BIGINT_OID = 20
// int8 columns (the events' commit position) as numbers: they stay far below 2^53.
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === BIGINT_OID && format !== "binary" ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as "text")) as never
}

/**
 * The statements that create a workspace's schema and tables (idempotent), given its quoted schema name.
 *
 * @since 0.1.0
 * @category layers
 */
export const migration = (s: string): ReadonlyArray<string> => [
  `CREATE SCHEMA IF NOT EXISTS ${s}`,
  `CREATE TABLE IF NOT EXISTS ${s}.meta (key text PRIMARY KEY, value integer NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS ${s}.runs (
    run_id text NOT NULL PRIMARY KEY,
    first_pos bigint NOT NULL,
    session_id text NOT NULL,
    invocation_id text NOT NULL UNIQUE,
    turn_id text NOT NULL,
    tool_boundary text NOT NULL,
    tail_seq integer NOT NULL CHECK (tail_seq >= 1),
    tail_digest text NOT NULL,
    terminal_seq integer,
    terminal_status text,
    terminal_failure_class text,
    terminal_abort_source text
  )`,
  `CREATE INDEX IF NOT EXISTS runs_first_pos ON ${s}.runs (first_pos)`,
  `CREATE TABLE IF NOT EXISTS ${s}.events (
    pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL REFERENCES ${s}.runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    seq integer NOT NULL CHECK (seq >= 1),
    end_seq integer NOT NULL CHECK (end_seq >= seq),
    event_id text NOT NULL,
    digest text NOT NULL,
    bytes bytea NOT NULL,
    UNIQUE (run_id, seq),
    UNIQUE (event_id)
  )`,
  `CREATE TABLE IF NOT EXISTS ${s}.calls (
    run_id text NOT NULL REFERENCES ${s}.runs (run_id) DEFERRABLE INITIALLY DEFERRED,
    call_id text NOT NULL,
    name text NOT NULL,
    args_hash text NOT NULL,
    call_seq integer NOT NULL,
    hidden smallint NOT NULL,
    dispatch_seq integer,
    operation_id text,
    response_seq integer,
    is_error smallint,
    recovery_mode text,
    idempotency_key text,
    evidence_digest text,
    recovery_kind text,
    recovery_disposition text,
    recovery_reason text,
    recovery_actor text,
    recovery_seq integer,
    PRIMARY KEY (run_id, call_id)
  )`,
  // Format 2: a format 1 workspace's calls table gets the recovery columns (backfilled by `backfillRecovery`).
  ...RECOVERY_COLUMN_NAMES.map((name) =>
    `ALTER TABLE ${s}.calls ADD COLUMN IF NOT EXISTS ${name} ${name === "recovery_seq" ? "integer" : "text"}`
  ),
  // `reconcile`'s candidates (dispatched, no response, no bundle) without a scan of the call index.
  `CREATE INDEX IF NOT EXISTS calls_unsettled ON ${s}.calls (run_id, call_seq)
    WHERE dispatch_seq IS NOT NULL AND response_seq IS NULL AND recovery_kind IS NULL`,
  // Format 3: docs/spec/03-tool-boundary.md's projections are views over the call index and the transition events (the rows
  // `ToolProjection.rebuild` gives), written by T1 and T2 with the calls row at no cost of their own. The tables of
  // formats 1 and 2 are dropped (their rows were derived from the same calls and events).
  `DO $$ BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('${s.replace(/'/g, "''")}.tool_operation_journal')) = 'r' THEN
      DROP TABLE ${s}.tool_operation_journal;
    END IF;
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('${s.replace(/'/g, "''")}.tool_operations')) = 'r' THEN
      DROP TABLE ${s}.tool_operations;
    END IF;
  END $$`,
  `CREATE OR REPLACE VIEW ${s}.tool_operations AS
    SELECT c.operation_id AS operation_id, c.run_id AS run_id, c.call_id AS call_id,
      CASE WHEN c.response_seq IS NULL THEN 'prepared' ELSE 'outcome_committed' END AS state,
      CASE WHEN c.response_seq IS NULL THEN 1 ELSE 2 END AS version,
      c.dispatch_seq AS dispatch_seq, c.response_seq AS outcome_seq,
      (convert_from(e.bytes, 'UTF8')::jsonb ->> 'ts')::bigint AS committed_at
    FROM ${s}.calls c JOIN ${s}.events e ON e.run_id = c.run_id AND e.seq = COALESCE(c.response_seq, c.dispatch_seq)
    WHERE c.dispatch_seq IS NOT NULL AND c.operation_id IS NOT NULL`,
  `CREATE OR REPLACE VIEW ${s}.tool_operation_journal AS
    SELECT c.operation_id || ':1' AS journal_id, c.operation_id AS operation_id, 1 AS version, 'prepared' AS state,
      c.run_id AS run_id, c.dispatch_seq AS seq, e.event_id AS event_id,
      (convert_from(e.bytes, 'UTF8')::jsonb ->> 'ts')::bigint AS committed_at
    FROM ${s}.calls c JOIN ${s}.events e ON e.run_id = c.run_id AND e.seq = c.dispatch_seq
    WHERE c.dispatch_seq IS NOT NULL AND c.operation_id IS NOT NULL
    UNION ALL
    SELECT c.operation_id || ':2', c.operation_id, 2, 'outcome_committed', c.run_id, c.response_seq, e.event_id,
      (convert_from(e.bytes, 'UTF8')::jsonb ->> 'ts')::bigint
    FROM ${s}.calls c JOIN ${s}.events e ON e.run_id = c.run_id AND e.seq = c.response_seq
    WHERE c.dispatch_seq IS NOT NULL AND c.operation_id IS NOT NULL AND c.response_seq IS NOT NULL`,
  `INSERT INTO ${s}.meta (key, value) VALUES ('format_version', ${PG_FORMAT_VERSION}) ON CONFLICT (key) DO NOTHING`,
  // The workspace identity (docs/spec/04-continuation.md's marker): one UUID v4, made once by the server, never changed.
  `CREATE TABLE IF NOT EXISTS ${s}.identity (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    workspace_id text NOT NULL DEFAULT gen_random_uuid()::text
  )`,
  `INSERT INTO ${s}.identity (only_row) VALUES (true) ON CONFLICT (only_row) DO NOTHING`,
  // Format 4: the owner epoch of fencing (docs/stores.md "Fencing"), one row; every exclusive acquisition of the
  // owner lock moves it on, every write checks it under a row lock (FOR SHARE) in its own statement or transaction.
  `CREATE TABLE IF NOT EXISTS ${s}.owner_epoch (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    epoch bigint NOT NULL
  )`,
  `INSERT INTO ${s}.owner_epoch (only_row, epoch) VALUES (true, 0) ON CONFLICT (only_row) DO NOTHING`
]

/**
 * The run header tables (idempotent DDL, in the workspace's schema), created with the ledger's. As on SQLite: a header changes only in its status columns and
 * never once terminal, a claim never changes, neither is deleted or truncated (triggers); one claim per boundary and
 * generation (a unique index), so two hosts' claim transactions for one boundary commit at most once.
 *
 * @since 0.1.0
 * @category layers
 */
export const runHeaderTables = (s: string): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${s}.run_headers (
    pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text NOT NULL UNIQUE,
    session_id text NOT NULL,
    invocation_id text NOT NULL,
    turn_id text NOT NULL,
    status text NOT NULL CHECK (status IN ('created', 'running', 'completed', 'failed', 'cancelled')),
    status_reason text,
    parent_run_id text,
    continuation_source text,
    claim_id text,
    workspace_id text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS ${s}.continuation_claims (
    pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    claim_id text NOT NULL UNIQUE,
    source_run_id text NOT NULL,
    source_seq integer NOT NULL,
    source_digest text NOT NULL,
    generation integer NOT NULL CHECK (generation IN (0, 1)),
    continuation_run_id text NOT NULL UNIQUE REFERENCES ${s}.run_headers (run_id) DEFERRABLE INITIALLY DEFERRED,
    supersedes text REFERENCES ${s}.continuation_claims (claim_id),
    created_at bigint NOT NULL,
    CHECK ((generation = 0) = (supersedes IS NULL))
  )`,
  `CREATE UNIQUE INDEX IF NOT EXISTS continuation_claims_boundary
    ON ${s}.continuation_claims (source_run_id, source_seq, source_digest, generation)`,
  `CREATE OR REPLACE FUNCTION ${s}.run_headers_guard() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP <> 'UPDATE' THEN RAISE EXCEPTION 'run_headers: a header is never deleted'; END IF;
    IF OLD.status IN ('completed', 'failed', 'cancelled') OR NEW.pos IS DISTINCT FROM OLD.pos
      OR NEW.run_id IS DISTINCT FROM OLD.run_id OR NEW.session_id IS DISTINCT FROM OLD.session_id
      OR NEW.invocation_id IS DISTINCT FROM OLD.invocation_id OR NEW.turn_id IS DISTINCT FROM OLD.turn_id
      OR NEW.parent_run_id IS DISTINCT FROM OLD.parent_run_id OR NEW.continuation_source IS DISTINCT FROM OLD.continuation_source
      OR NEW.claim_id IS DISTINCT FROM OLD.claim_id OR NEW.workspace_id IS DISTINCT FROM OLD.workspace_id
      OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
      RAISE EXCEPTION 'run_headers: only the status fields of a non-terminal header may change';
    END IF;
    RETURN NEW;
  END $$`,
  `CREATE OR REPLACE FUNCTION ${s}.never_changed() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION '%: a row is never changed or deleted', TG_TABLE_NAME;
  END $$`,
  `CREATE OR REPLACE TRIGGER run_headers_status_only BEFORE UPDATE OR DELETE ON ${s}.run_headers
    FOR EACH ROW EXECUTE FUNCTION ${s}.run_headers_guard()`,
  `CREATE OR REPLACE TRIGGER run_headers_never_truncated BEFORE TRUNCATE ON ${s}.run_headers
    FOR EACH STATEMENT EXECUTE FUNCTION ${s}.never_changed()`,
  `CREATE OR REPLACE TRIGGER continuation_claims_never_changed BEFORE UPDATE OR DELETE ON ${s}.continuation_claims
    FOR EACH ROW EXECUTE FUNCTION ${s}.never_changed()`,
  `CREATE OR REPLACE TRIGGER continuation_claims_never_truncated BEFORE TRUNCATE ON ${s}.continuation_claims
    FOR EACH STATEMENT EXECUTE FUNCTION ${s}.never_changed()`,
  // The ledger's committed rows are append-only too: an event row is never changed, deleted or truncated.
  `CREATE OR REPLACE TRIGGER events_never_changed BEFORE UPDATE OR DELETE ON ${s}.events
    FOR EACH ROW EXECUTE FUNCTION ${s}.never_changed()`,
  `CREATE OR REPLACE TRIGGER events_never_truncated BEFORE TRUNCATE ON ${s}.events
    FOR EACH STATEMENT EXECUTE FUNCTION ${s}.never_changed()`
]


/**
 * Fills the format 2 columns of a format 1 workspace's dispatched calls from their `ToolDispatched` events (inside
 * the migration's transaction). Format 1 could hold no recovery bundle, so the decision columns stay NULL; a
 * dispatch whose stored bytes do not parse is left NULL (the reader reports that row as corrupt anyway).
 */
const backfillRecovery = (
  s: string,
  q: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, SqlError>
) =>
  Effect.gen(function*() {
    for (const raw of yield* q(dispatchedCallsSql((name) => `${s}.${name}`), [])) {
      const params = recoveryBackfillOf(raw)
      if (params === undefined) continue
      yield* q(
        `UPDATE ${s}.calls SET recovery_mode = $1, idempotency_key = $2, evidence_digest = $3 WHERE run_id = $4 AND call_id = $5`,
        params
      )
    }
  })

const MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('runtime-resume/migration'))"

/**
 * The statement that takes the transaction-level advisory lock of creating one workspace (`wait`: waits, under the
 * transaction's `lock_timeout`; `try`: answers `ok` at once). A migration takes it before the server-wide migration
 * lock, and `import`'s one pass holds it to its COMMIT while it creates the workspace (docs/stores.md "PostgreSQL"): a
 * host opening the same new workspace meanwhile waits for that import, then finds its ledger.
 *
 * @since 0.1.0
 * @category layers
 */
export const createLock = (workspace: string, mode: "wait" | "try"): string =>
  `SELECT ${mode === "wait" ? "pg_advisory_xact_lock" : "pg_try_advisory_xact_lock"}(('x' || substr(md5('runtime-resume/create/' || ` +
  `'${workspace.replace(/'/g, "''")}'), 1, 16))::bit(64)::bigint)${mode === "try" ? " AS ok" : ""}`

/**
 * How `open` is asked by the library itself (not part of `PgOpenOptions`): `createInWrite` opens a writer that does
 * not create a missing workspace but leaves it `absent`, for `import`'s one pass to create in its own transaction.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenInternal {
  readonly createInWrite?: boolean
}

/**
 * Opens (and, unless read-only, creates) a workspace. The pool closes with the scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const open = (
  options: PgOpenOptions,
  internal: OpenInternal = {}
): Effect.Effect<PgLedger, StoreReadFailed | WorkspaceNotFound, Scope.Scope> =>
  Effect.gen(function*() {
    const raw = Redacted.value(options.url)
    const { location: server, password } = describeUrl(raw)
    const location = `${server}#${options.workspace}`
    const scrub = (text: string) => password === undefined || password === "" ? text : text.split(password).join("***")
    const failed = (what: string, cause: string) =>
      new StoreReadFailed({ path: location, cause: scrub(cause), message: scrub(`PostgreSQL workspace ${location}: ${what}: ${cause}`) })
    if (!WORKSPACE_NAME.test(options.workspace)) {
      return yield* new WorkspaceNotFound({
        workspace: options.workspace,
        message: `PostgreSQL workspace name ${JSON.stringify(options.workspace)} at ${server} is not a plain identifier ` +
          `(letters, digits and _, not starting with a digit, at most 48); nothing was opened`
      })
    }
    if (server.startsWith("(")) return yield* failed("the URL is not usable", `${server}; expected postgres://user:password@host:port/database`)
    const timeout = Duration.decode(options.operationTimeout ?? DEFAULT_STATEMENT_TIMEOUT)
    // The pool is ours (the Effect SQL client runs over it), so the one-statement append can use its clients directly.
    // Every connection starts with `synchronous_commit=on` (a startup option outranks the server's, database's and
    // role's settings): a statement outside an explicit transaction commits durably too.
    const connectTimeout = Duration.decode(options.connectTimeout ?? Duration.seconds(5))
    const pool = new pg.Pool({
      connectionString: raw,
      connectionTimeoutMillis: Duration.toMillis(connectTimeout),
      idleTimeoutMillis: 30_000,
      max: options.maxConnections ?? 4,
      application_name: "runtime-resume",
      options: "-c synchronous_commit=on",
      types
    })
    pool.on("error", () => {})
    const sql = yield* PgClient.fromPool({
      acquire: Effect.acquireRelease(
        Effect.succeed(pool),
        (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
      ),
      applicationName: "runtime-resume",
      types
    }).pipe(
      Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make),
      Effect.mapError((error) => failed("could not connect", describePgError(error)))
    )
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(
      Effect.timeoutFail({
        duration: connectTimeout,
        onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
      }),
      Effect.mapError((error) => failed("could not connect", describePgError(error)))
    )
    const schema = pg.escapeIdentifier(`rr_${options.workspace}`)
    // The statement is disconnected from the timeout: a server that is gone must not hold the caller past it.
    const withTimeout = <A, E>(what: string, effect: Effect.Effect<A, E>) =>
      Effect.timeoutFail(Effect.disconnect(effect), {
        duration: timeout,
        onTimeout: () => new SqlError({ cause: new Error(`${what}: no answer within ${Duration.format(timeout)}`), message: "timeout" })
      })
    const query: Query = (text, params = []) => withTimeout("statement", sql.unsafe(text, params as Array<any>))
    const check = (what: string, text: string) =>
      query(text).pipe(Effect.mapError((error) => failed(what, describePgError(error))))

    // Durability: every write transaction sets synchronous_commit on itself; a server without fsync is refused.
    const [fsync] = yield* check("could not read the fsync setting", "SHOW fsync")
    if (fsync?.fsync !== "on") {
      return yield* failed("the server runs with fsync off", "an acknowledged append would not survive a server crash; turn fsync on")
    }

    const readVersion = check(
      "could not read the format version",
      `SELECT (SELECT value FROM ${schema}.meta WHERE key = 'format_version') AS version
       WHERE to_regclass('${schema.replace(/'/g, "''")}.meta') IS NOT NULL`
    ).pipe(
      Effect.catchAll(() => Effect.succeed([] as ReadonlyArray<any>)),
      Effect.map((rows) => rows.length === 0 ? 0 : Number(rows[0]?.version ?? 0))
    )
    // to_regclass in a WHERE does not stop the planner from resolving the table: probe it first.
    const exists = yield* check(
      "could not look for the workspace",
      `SELECT to_regclass('${schema.replace(/'/g, "''")}.meta') IS NOT NULL AS present`
    ).pipe(Effect.map((rows) => rows[0]?.present === true))
    let version = exists ? yield* readVersion : 0
    if (version > PG_FORMAT_VERSION) {
      return yield* failed(
        "the workspace is of a newer format",
        `format version ${version} is newer than ${PG_FORMAT_VERSION}, the newest this version of runtime-resume reads; upgrade runtime-resume`
      )
    }
    if (exists && version === 0) return yield* failed("the schema holds no format version", "it is not a runtime-resume workspace")
    if (!exists && options.readOnly) {
      return yield* new WorkspaceNotFound({
        workspace: options.workspace,
        message: `PostgreSQL workspace ${location} does not exist (no schema ${schema}); nothing was created. ` +
          "Check the workspace name, or create it by writing to it (runtime-resume import --store postgres …)"
      })
    }
    const absent = !exists && internal.createInWrite === true && options.readOnly !== true
    if (!options.readOnly && !absent && version < PG_FORMAT_VERSION) {
      // Created (or migrated) under one advisory lock for the whole server, so hosts opening the same new workspace
      // do not race. A workspace already at this format is never touched: its DDL would wait behind every open write
      // transaction of the other hosts (and hold the lock meanwhile). lock_timeout and the operation timeout bound it.
      const statements = [...migration(schema), ...runHeaderTables(schema)]
      const lockTimeoutMs = Math.max(1, Math.floor(Duration.toMillis(timeout)))
      yield* Effect.scoped(Effect.gen(function*() {
        const conn = yield* sql.reserve
        const q = (text: string) => withTimeout("migration", conn.executeUnprepared(text, [], undefined))
        yield* q("BEGIN")
        const done = Effect.gen(function*() {
          yield* q(`SET LOCAL lock_timeout = ${lockTimeoutMs}`)
          // This workspace's creation lock first (an import creating it in one pass holds it), then the server's.
          yield* q(createLock(options.workspace, "wait"))
          yield* q(MIGRATION_LOCK)
          // Read again under the lock: another host may have created or migrated it meanwhile.
          const [probe] = yield* q(`SELECT to_regclass('${schema.replace(/'/g, "''")}.meta') IS NOT NULL AS present`)
          if (probe?.present === true) {
            const [current] = yield* q(`SELECT value FROM ${schema}.meta WHERE key = 'format_version'`)
            if (Number(current?.value ?? 0) >= PG_FORMAT_VERSION) return yield* q("COMMIT")
          }
          for (const statement of statements) yield* q(statement)
          // A format 1 workspace (read again under the lock): its dispatched calls get their recovery columns.
          const [before] = yield* q(`SELECT value FROM ${schema}.meta WHERE key = 'format_version'`)
          if (Number(before?.value ?? PG_FORMAT_VERSION) < 2) {
            yield* backfillRecovery(schema, (text, params) => conn.executeUnprepared(text, params as Array<any>, undefined))
          }
          yield* q(`UPDATE ${schema}.meta SET value = ${PG_FORMAT_VERSION} WHERE key = 'format_version' AND value < ${PG_FORMAT_VERSION}`)
          yield* q("COMMIT")
        })
        yield* Effect.onError(done, () => Effect.ignore(Effect.timeout(conn.executeUnprepared("ROLLBACK", [], undefined), "2 seconds")))
      })).pipe(Effect.mapError((error) => failed("could not create the workspace's tables", describePgError(error))))
      version = PG_FORMAT_VERSION
    }

    // Fencing: the epoch this process holds the workspace under, while it holds the owner lock.
    const fenceEpoch = () => expectedEpoch(location)

    const transact: PgLedger["transact"] = <A, E, R>(
      body: (q: Query) => Effect.Effect<Either.Either<A, E>, SqlError>,
      beforeCommit?: Effect.Effect<void, never, R>
    ) => {
      const once: Effect.Effect<Either.Either<A, E | OwnershipLost>, PgWriteFailure | SqlError, R> = Effect.scoped(Effect.gen(function*() {
        const conn: Connection = yield* sql.reserve.pipe(
          Effect.mapError((error) => new PgWriteFailure({ phase: "connect", detail: scrub(describePgError(error)) }))
        )
        const q: Query = (text, params = []) => withTimeout("statement", conn.execute(text, params, undefined))
        yield* q("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL synchronous_commit TO on")
        const inside: Effect.Effect<Either.Either<A, E | OwnershipLost>, PgWriteFailure | SqlError, R> = Effect.gen(function*() {
          // The owner epoch first, under a row lock held to COMMIT: an exclusive acquisition's bump waits for this
          // transaction, or this one sees the bump (READ COMMITTED re-reads the locked row) and writes nothing.
          const expected = fenceEpoch()
          if (expected !== undefined) {
            const [fence] = yield* q(`SELECT epoch FROM ${schema}.owner_epoch WHERE only_row FOR SHARE`)
            const found = fence === undefined ? undefined : Number(fence.epoch)
            if (found !== expected) {
              yield* q("ROLLBACK")
              return Either.left(ownershipLost(location, expected, found))
            }
          }
          const result: Either.Either<A, E | OwnershipLost> = yield* body(q)
          if (Either.isLeft(result)) {
            yield* q("ROLLBACK")
            return result
          }
          if (beforeCommit !== undefined) yield* beforeCommit
          yield* q("COMMIT").pipe(
            Effect.catchAll((error): Effect.Effect<never, SqlError | PgWriteFailure> =>
              RETRIED.has(sqlState(error) ?? "")
                ? Effect.fail(error)
                : Effect.fail(new PgWriteFailure({ phase: "commit", detail: scrub(describePgError(error)) })))
          )
          return result
        })
        return yield* Effect.onExit(inside, (exit) =>
          exit._tag === "Failure" ? Effect.ignore(Effect.timeout(conn.execute("ROLLBACK", [], undefined), "2 seconds")) : Effect.void)
      }))
      // A conflict with another host's concurrent write (the same new run, event id or invocation) is retried from
      // the start: the retry reads the committed state and decides again (refuses, or appends after it).
      const attempt = (n: number): Effect.Effect<Either.Either<A, E | OwnershipLost>, PgWriteFailure, R> =>
        Effect.catchIf(
          once,
          (error): error is SqlError => error instanceof SqlError,
          (error) =>
            RETRIED.has(sqlState(error) ?? "") && n < 8
              ? Effect.zipRight(Effect.sleep(Duration.millis(Math.floor(Math.random() * 4 * (n + 1)))), attempt(n + 1))
              : Effect.fail(
                new PgWriteFailure({
                  phase: error.message === "timeout" ? "timeout" : "statement",
                  detail: scrub(describePgError(error))
                })
              )
        )
      return Effect.flatMap(attempt(0), Either.match({ onLeft: (e: E | OwnershipLost) => Effect.fail(e), onRight: (a: A) => Effect.succeed(a) }))
    }

    // The one-statement append runs as a named prepared statement (one per statement shape: its text depends only on
    // how many events and calls it carries): each pooled session parses and plans it once, not at every append.
    const names = new Map<string, string>()
    const nameOf = (text: string): string => {
      let name = names.get(text)
      if (name === undefined) {
        name = `rr_${createHash("sha256").update(text).digest("hex").slice(0, 40)}`
        if (names.size >= 1024) names.delete(names.keys().next().value!)
        names.set(text, name)
      }
      return name
    }

    const single: PgLedger["single"] = (text, params) =>
      Effect.suspend(() => {
        const name = nameOf(text)
        let sent = false
        const run = Effect.async<Either.Either<ReadonlyArray<any>, "conflict">, PgWriteFailure>((resume) => {
          pool.connect((error, client, release) => {
            if (error !== undefined && error !== null || client === undefined) {
              const detail = error instanceof Error ? error.message : "no connection"
              return resume(Effect.fail(new PgWriteFailure({ phase: "connect", detail: scrub(detail) })))
            }
            sent = true
            // While the client is ours the pool listens to none of its events: a socket that ends under the statement
            // (a server SIGKILLed) is emitted as 'error' before the query's own callback, and with no listener it would
            // end the process. The statement's callback reports it; this listener only keeps the event handled.
            client.on("error", ignoreClientError)
            client.query({ name, text, values: params as Array<unknown> }, (failure: Error | null | undefined, result) => {
              client.off("error", ignoreClientError)
              const code: unknown = failure === null || failure === undefined ? undefined : (failure as { code?: unknown }).code
              const state = typeof code === "string" ? code : undefined
              // A connection that failed is not given back to the pool.
              release(failure !== null && failure !== undefined && mayHaveCommitted(state) ? failure : undefined)
              if (failure === null || failure === undefined) return resume(Effect.succeed(Either.right(result.rows)))
              if (state !== undefined && RETRIED.has(state)) return resume(Effect.succeed(Either.left("conflict" as const)))
              const detail = state === undefined ? failure.message : `${failure.message} (SQLSTATE ${state})`
              resume(Effect.fail(new PgWriteFailure({ phase: mayHaveCommitted(state) ? "commit" : "statement", detail: scrub(detail) })))
            })
          })
        })
        return Effect.timeoutFail(Effect.disconnect(run), {
          duration: timeout,
          onTimeout: () =>
            new PgWriteFailure({
              phase: sent ? "timeout" : "connect",
              detail: `${sent ? "statement" : "connection"}: no answer within ${Duration.format(timeout)}`
            })
        })
      })

    return {
      sql,
      single,
      schema,
      location,
      workspace: options.workspace,
      uninitialised: version === 0,
      absent,
      pool,
      formatVersion: version,
      query,
      scrub,
      transact,
      fenceEpoch,
      timeout
    } satisfies PgLedger
  })
