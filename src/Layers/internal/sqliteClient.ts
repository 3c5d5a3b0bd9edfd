// The ledger's SQLite client: one better-sqlite3 connection behind an @effect/sql `SqlClient` (built the way
// @effect/sql-sqlite-node builds its own), plus synchronous cached statements for the append transaction's hot path.
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"

/**
 * The open connection: its `SqlClient` (every read and the transaction boundary go through it), and the same
 * connection's statements run synchronously, for code that already holds the client's one permit (a transaction).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteHandle {
  readonly sql: SqlClient.SqlClient
  /** Runs a reading statement (prepared once per text, cached) and returns its rows; throws what SQLite throws. */
  readonly all: (sql: string, params: ReadonlyArray<unknown>) => Array<unknown>
  /** Runs a writing statement (prepared once per text, cached); throws what SQLite throws. */
  readonly run: (sql: string, params: ReadonlyArray<unknown>) => void
  /**
   * Runs a reading statement and returns its rows as arrays of column values, in the statement's column order
   * (prepared once per text in raw mode, cached apart from `all`'s): no object per row to build and key.
   */
  readonly values: (sql: string, params: ReadonlyArray<unknown>) => Array<Array<unknown>>
  /**
   * `values`, with the names of the result columns in the order of each row's values (read after the rows, so a
   * `SELECT *` re-prepared for a changed schema names the columns its rows have); throws what SQLite throws.
   */
  readonly namedValues: (sql: string, params: ReadonlyArray<unknown>) => NamedValues
  /** The connection, for a transaction that holds it through `exclusive`. */
  readonly connection: SqlConnection.Connection
  /** True while the connection is inside a transaction. */
  readonly inTransaction: () => boolean
  /** Runs an effect holding the client's one connection (what `sql.reserve` takes), without a scope. */
  readonly exclusive: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/**
 * Rows as arrays of column values, and the columns' names in the same order.
 *
 * @since 0.1.0
 * @category models
 */
export interface NamedValues {
  readonly names: ReadonlyArray<string>
  readonly rows: ReadonlyArray<ReadonlyArray<unknown>>
}

/**
 * What `make` opens.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteClientOptions {
  readonly filename: string
  readonly readonly: boolean
  /** Leave the journal mode alone (read-only opens); otherwise WAL is switched on. */
  readonly disableWAL: boolean
}

// Distinct statement texts kept prepared. Appends use a handful; IN lists of other lengths come and go.
const CACHE_SIZE = 256

/**
 * A failure of a synchronous statement, as the SQL package reports failures.
 *
 * @since 0.1.0
 * @category layers
 */
export const sqlError = (cause: unknown, message = "Failed to execute statement"): SqlError => new SqlError({ cause, message })

/**
 * Opens the connection, closed with the scope. A failing open is a defect (as in @effect/sql-sqlite-node).
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (
  options: SqliteClientOptions
): Effect.Effect<SqliteHandle, never, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.sync(() => new Sqlite(options.filename, { readonly: options.readonly })),
      (db) => Effect.sync(() => db.close())
    )
    if (!options.disableWAL) db.pragma("journal_mode = WAL")

    const cache = new Map<string, Sqlite.Statement>()
    const prepare = (sql: string): Sqlite.Statement => {
      let statement = cache.get(sql)
      if (statement === undefined) {
        statement = db.prepare(sql)
        if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!)
        cache.set(sql, statement)
      }
      return statement
    }
    const all = (sql: string, params: ReadonlyArray<unknown>): Array<unknown> => {
      const statement = prepare(sql)
      if (statement.reader) return statement.all(...params)
      statement.run(...params)
      return []
    }
    const run = (sql: string, params: ReadonlyArray<unknown>): void => {
      prepare(sql).run(...params)
    }
    const rawCache = new Map<string, Sqlite.Statement>()
    const prepareRaw = (sql: string): Sqlite.Statement => {
      let statement = rawCache.get(sql)
      if (statement === undefined) {
        statement = db.prepare(sql).raw(true)
        if (rawCache.size >= CACHE_SIZE) rawCache.delete(rawCache.keys().next().value!)
        rawCache.set(sql, statement)
      }
      return statement
    }
    const values = (sql: string, params: ReadonlyArray<unknown>): Array<Array<unknown>> =>
      prepareRaw(sql).all(...params) as Array<Array<unknown>>
    const namedValues = (sql: string, params: ReadonlyArray<unknown>): NamedValues => {
      const statement = prepareRaw(sql)
      const rows = statement.all(...params) as Array<Array<unknown>>
      return { names: statement.columns().map((column) => column.name), rows }
    }
    const attempt = <A>(f: () => A): Effect.Effect<A, SqlError> =>
      Effect.suspend(() => {
        try {
          return Effect.succeed(f())
        } catch (cause) {
          return Effect.fail(sqlError(cause))
        }
      })

    const connection: SqlConnection.Connection = {
      execute: (sql, params, transformRows) => {
        const rows = attempt(() => all(sql, params) as ReadonlyArray<object>)
        return transformRows ? Effect.map(rows, transformRows) : rows
      },
      executeRaw: (sql, params) =>
        attempt(() => {
          const statement = prepare(sql)
          return statement.reader ? statement.all(...params) : statement.run(...params)
        }),
      executeValues: (sql, params) =>
        attempt(() => {
          const statement = prepare(sql)
          if (!statement.reader) {
            statement.run(...params)
            return []
          }
          statement.raw(true)
          try {
            return statement.all(...params) as Array<ReadonlyArray<unknown>>
          } finally {
            statement.raw(false)
          }
        }),
      executeUnprepared: (sql, params, transformRows) => {
        const rows = attempt(() => {
          const statement = db.prepare(sql)
          return (statement.reader ? statement.all(...params) : (statement.run(...params), [])) as ReadonlyArray<object>
        })
        return transformRows ? Effect.map(rows, transformRows) : rows
      },
      executeStream: () => Effect.dieMessage("executeStream is not implemented for SQLite")
    }

    const semaphore = yield* Effect.makeSemaphore(1)
    const acquirer = semaphore.withPermits(1)(Effect.succeed(connection))
    const transactionAcquirer = Effect.uninterruptibleMask((restore) =>
      Effect.as(
        Effect.zipRight(
          restore(semaphore.take(1)),
          Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
        ),
        connection
      )
    )
    const sql = yield* SqlClient.make({
      acquirer,
      transactionAcquirer,
      compiler: Statement.makeCompilerSqlite(),
      spanAttributes: [["db.system.name", "sqlite"]]
    })
    return { sql, all, run, values, namedValues, connection, inTransaction: () => db.inTransaction, exclusive: semaphore.withPermits(1) } satisfies SqliteHandle
  })
