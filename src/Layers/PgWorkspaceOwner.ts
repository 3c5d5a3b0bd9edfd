// The WorkspaceOwner service on PostgreSQL: the owner lock is an advisory lock held on a session of its own
// (`sql.reserve`), shared for a host's life, exclusive (≤ 2 s wait) for repair and continuation; it dies with the session.
import type { Connection } from "@effect/sql/SqlConnection"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { StoreReadFailed, WorkspaceLocked, WorkspaceNotFound } from "../Domain/Errors.js"
import type { WorkspaceLockMode, WorkspaceLockProbe } from "../Services/WorkspaceLock.js"
import {
  type OwnerAcquireOptions,
  type OwnerHold,
  OwnerLockWaitMs,
  WorkspaceOwner,
  type WorkspaceOwnerService
} from "../Services/WorkspaceOwner.js"
import pg from "pg"
import { recordEpoch, releaseHold } from "./internal/ownerFence.js"
import { describePgError, open, type PgLedger, type PgOpenOptions, WORKSPACE_NAME } from "./internal/pgConnection.js"

/**
 * How often a shared hold's lock session is checked (docs/stores.md "Fencing"), a `Context.Reference` defaulting
 * to 500 ms: one `SELECT pg_backend_pid()` on the reserved session.
 *
 * @since 0.1.0
 * @category tags
 */
export class OwnerKeepaliveMs extends Context.Reference<OwnerKeepaliveMs>()("runtime-resume/PgWorkspaceOwner/OwnerKeepaliveMs", {
  defaultValue: (): number => 500
}) {}

// The advisory lock key of a workspace's owner lock: 64 bits of md5 over the workspace's name, in the database.
const KEY = "('x' || substr(md5('runtime-resume/owner/' || $1), 1, 16))::bit(64)::bigint"

// How often a waiting acquire tries again (a try-lock loop: nothing waits inside the server, so a timeout takes nothing).
const RETRY = Duration.millis(25)

// The owner locks this process holds shared, by location, with a count (as NodeWorkspaceOwner: a process holding
// its workspace shared cannot wait for it exclusively).
const sharedHeldHere = new Map<string, number>()
const noteShared = (key: string, delta: 1 | -1): void => {
  const count = (sharedHeldHere.get(key) ?? 0) + delta
  if (count > 0) sharedHeldHere.set(key, count)
  else sharedHeldHere.delete(key)
}

// The quoted schema of a workspace (as pgConnection names it).
const schemaOf = (workspace: string): string => pg.escapeIdentifier(`rr_${workspace}`)

/**
 * The owner lock over an opened workspace's server; `acquire`'s workspace argument names a workspace of that database.
 *
 * @since 0.1.0
 * @category layers
 */
export const fromLedger = (ledger: PgLedger, waitMs: number): WorkspaceOwnerService => {
  const server = ledger.location.slice(0, ledger.location.lastIndexOf("#"))
  const where = (workspace: string) => `${server}#${workspace} (owner lock)`

  const acquire = Effect.fn("WorkspaceOwner.acquire")(function*(workspace: string, mode: WorkspaceLockMode, options?: OwnerAcquireOptions) {
    const timeoutMs = options?.timeoutMs ?? waitMs
    const path = where(workspace)
    if (!WORKSPACE_NAME.test(workspace)) {
      return yield* new WorkspaceNotFound({ workspace, message: `Cannot take the owner lock of ${JSON.stringify(workspace)}: not a plain identifier` })
    }
    if (mode === "exclusive" && sharedHeldHere.has(path)) {
      return yield* new WorkspaceLocked({
        path,
        holderPid: process.pid,
        message: `Could not take the workspace owner lock ${path} exclusively: this process (${process.pid}) holds it shared, ` +
          "as a running host does, so the wait could never end. Nothing was changed."
      })
    }
    const unreachable = (error: { readonly message: string }) =>
      new WorkspaceLocked({
        path,
        message: ledger.scrub(`Could not take the workspace owner lock ${path} (${mode}): the server did not answer (${error.message}). Nothing was changed.`)
      })
    // A session of its own, held until the scope closes: the advisory lock lives exactly as long as it.
    const conn = yield* ledger.sql.reserve.pipe(Effect.mapError((e) => unreachable({ message: describePgError(e) })))
    const run = (text: string) =>
      Effect.timeoutFail(Effect.disconnect(conn.execute(text, [workspace], undefined)), {
        duration: ledger.timeout,
        onTimeout: () => unreachable({ message: "timeout" })
      }).pipe(Effect.mapError((e) => e instanceof WorkspaceLocked ? e : unreachable({ message: describePgError(e) })))
    const runPlain = (text: string) =>
      Effect.timeoutFail(Effect.disconnect(conn.execute(text, [], undefined)), {
        duration: ledger.timeout,
        onTimeout: () => unreachable({ message: "timeout" })
      }).pipe(Effect.mapError((e) => e instanceof WorkspaceLocked ? e : unreachable({ message: describePgError(e) })))
    const tryLock = mode === "shared" ? `SELECT pg_try_advisory_lock_shared(${KEY}) AS ok` : `SELECT pg_try_advisory_lock(${KEY}) AS ok`
    const unlock = mode === "shared" ? `SELECT pg_advisory_unlock_shared(${KEY})` : `SELECT pg_advisory_unlock(${KEY})`
    const deadline = (yield* Clock.currentTimeMillis) + timeoutMs
    for (;;) {
      const rows = yield* run(tryLock)
      if (rows[0]?.ok === true) break
      if ((yield* Clock.currentTimeMillis) >= deadline) {
        return yield* new WorkspaceLocked({
          path,
          message: `Could not take the workspace owner lock ${path} (${mode}) within ${timeoutMs} ms: ` +
            (mode === "exclusive"
              ? "a running host holds it shared (or a repair or continuation holds it)."
              : "another host holds it exclusively (a repair or a continuation is running).") +
            " Nothing was changed; wait for that host to finish, or stop it."
        })
      }
      yield* Effect.sleep(RETRY)
    }
    yield* Effect.addFinalizer(() => Effect.ignore(run(unlock)))
    // Fencing (docs/stores.md "Fencing"): exclusive moves the owner epoch on (durably, before its holder writes
    // anything), shared reads it; this process then holds the workspace under that epoch, and every write checks it.
    const key = `${server}#${workspace}`
    const epoch = yield* runPlain(
      mode === "exclusive"
        ? `UPDATE ${schemaOf(workspace)}.owner_epoch SET epoch = epoch + 1 WHERE only_row RETURNING epoch`
        : `SELECT epoch FROM ${schemaOf(workspace)}.owner_epoch WHERE only_row`
    ).pipe(
      Effect.map((rows) => rows[0] === undefined ? undefined : Number(rows[0].epoch)),
      // A workspace no writer of this version has opened yet has no epoch row: its writers check none.
      Effect.catchAll((error) => /owner_epoch/.test(error.message) && /does not exist/.test(error.message) ? Effect.succeed(undefined) : Effect.fail(error))
    )
    if (epoch !== undefined) yield* Effect.acquireRelease(Effect.sync(() => recordEpoch(key, epoch)), () => Effect.sync(() => releaseHold(key)))
    if (mode === "shared") {
      yield* Effect.acquireRelease(Effect.sync(() => noteShared(path, 1)), () => Effect.sync(() => noteShared(path, -1)))
      if (epoch !== undefined) yield* watch(workspace, epoch, conn)
    }
    const hold: OwnerHold = { workspace, path, mode }
    return hold
  })

  // The lock session of a shared hold, watched (docs/stores.md "Fencing"): every `OwnerKeepaliveMs` its backend
  // pid is asked for; when the session ended (a server restart, `pg_terminate_backend`, an idle timeout, a pooler) or is
  // another one (the driver reconnected), the shared lock is taken again on a new session, and kept only if the owner
  // epoch has not moved meanwhile (no exclusive acquisition happened). If it moved, the hold is over: this process's
  // writes are refused `OwnershipLost` by the epoch check anyway; the watch stops.
  const watch = (workspace: string, epoch: number, first: Connection) =>
    Effect.gen(function*() {
      const every = yield* OwnerKeepaliveMs
      const outer = yield* Effect.scope
      const pidOf = (conn: Connection) =>
        Effect.timeout(Effect.disconnect(conn.execute("SELECT pg_backend_pid() AS pid", [], undefined)), ledger.timeout).pipe(
          Effect.map((rows) => Number(rows[0]?.pid))
        )
      let conn = first
      let pid = yield* Effect.orElseSucceed(pidOf(conn), () => -1)
      let session: Scope.CloseableScope | undefined
      const retake = Effect.gen(function*() {
        const next = yield* Scope.fork(outer, ExecutionStrategy.sequential)
        const taken = yield* Effect.gen(function*() {
          const c = yield* ledger.sql.reserve
          const exec = (text: string, params: ReadonlyArray<unknown>) =>
            Effect.timeout(Effect.disconnect(c.execute(text, params as Array<unknown>, undefined)), ledger.timeout)
          const rows = yield* exec(`SELECT pg_try_advisory_lock_shared(${KEY}) AS ok`, [workspace])
          if (rows[0]?.ok !== true) return false
          yield* Effect.addFinalizer(() => Effect.ignore(exec(`SELECT pg_advisory_unlock_shared(${KEY})`, [workspace])))
          const now = yield* exec(`SELECT epoch FROM ${schemaOf(workspace)}.owner_epoch WHERE only_row`, [])
          if (Number(now[0]?.epoch) !== epoch) return "moved" as const
          conn = c
          pid = yield* pidOf(c)
          return true
        }).pipe(Effect.provideService(Scope.Scope, next), Effect.orElseSucceed(() => false))
        if (taken === true) {
          if (session !== undefined) yield* Scope.close(session, Exit.void)
          session = next
        } else {
          yield* Scope.close(next, Exit.void)
        }
        return taken
      })
      const loop: Effect.Effect<void> = Effect.gen(function*() {
        for (;;) {
          yield* Effect.sleep(Duration.millis(every))
          const now = yield* Effect.orElseSucceed(pidOf(conn), () => -1)
          if (now === pid && pid !== -1) continue
          const taken = yield* retake
          if (taken === "moved") {
            return yield* Effect.logWarning(
              `the owner lock session of ${where(workspace)} ended and another process has taken the lock exclusively ` +
                "since; this process's writes to the workspace are refused (OwnershipLost): stop its turns"
            )
          }
        }
      })
      yield* Effect.forkScoped(loop)
    })

  const withExclusive: WorkspaceOwnerService["withExclusive"] = (workspace, effect) =>
    Effect.scoped(Effect.zipRight(acquire(workspace, "exclusive"), effect))

  // "held" when a session holds the workspace's advisory lock exclusively (pg_locks; nothing is taken).
  const probe = (workspace: string): Effect.Effect<WorkspaceLockProbe> =>
    ledger.query(
      `SELECT count(*)::int AS n FROM pg_locks l, (SELECT ${KEY} AS k) key
       WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND l.mode = 'ExclusiveLock' AND l.objsubid = 1
         AND l.classid::bigint = (key.k >> 32) & 4294967295 AND l.objid::bigint = key.k & 4294967295`,
      [workspace]
    ).pipe(
      Effect.map((rows): WorkspaceLockProbe => Number(rows[0]?.n ?? 0) > 0 ? "held" : "free"),
      Effect.orElseSucceed((): WorkspaceLockProbe => "free")
    )

  return WorkspaceOwner.of({ waitMs, acquire, withExclusive, probe })
}

/**
 * The owner lock service over a PostgreSQL server (its own small pool), closed with the scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (options: PgOpenOptions): Effect.Effect<WorkspaceOwnerService, WorkspaceNotFound | StoreReadFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const waitMs = yield* OwnerLockWaitMs
    const ledger = yield* open(options)
    return fromLedger(ledger, waitMs)
  })

/**
 * WorkspaceOwner on PostgreSQL advisory locks.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: PgOpenOptions): Layer.Layer<WorkspaceOwner, WorkspaceNotFound | StoreReadFailed> =>
  Layer.scoped(WorkspaceOwner, make(options))

/**
 * The workspace identity (a UUID v4 the server made when the workspace was created; never changed).
 *
 * @since 0.1.0
 * @category layers
 */
export const workspaceId = (ledger: PgLedger): Effect.Effect<string, StoreReadFailed> =>
  ledger.query(`SELECT workspace_id FROM ${ledger.schema}.identity`).pipe(
    Effect.mapError((error) =>
      new StoreReadFailed({ path: ledger.location, cause: ledger.scrub(describePgError(error)), message: ledger.scrub(`${ledger.location}: could not read the workspace identity: ${describePgError(error)}`) })
    ),
    Effect.flatMap((rows) =>
      typeof rows[0]?.workspace_id === "string"
        ? Effect.succeed(rows[0].workspace_id as string)
        : Effect.fail(new StoreReadFailed({ path: ledger.location, cause: "no identity row", message: `${ledger.location}: the workspace has no identity row` }))
    )
  )
