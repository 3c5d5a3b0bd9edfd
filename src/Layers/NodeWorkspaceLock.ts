// The Node implementation of WorkspaceLock: SQLite's fcntl locks on a separate lock database, via better-sqlite3.
// The OS drops those locks when the holding process dies, so a crashed holder never leaves the workspace locked.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import Sqlite from "better-sqlite3"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { WorkspaceLocked } from "../Domain/Errors.js"
import {
  holderFilePath,
  WorkspaceLock,
  type WorkspaceLockHandle,
  type WorkspaceLockMode,
  type WorkspaceLockOptions,
  type WorkspaceLockProbe,
  type WorkspaceLockService
} from "../Services/WorkspaceLock.js"

// Busy timeout of one attempt. Not 0: a reader's instant probe must not make a writer's attempt fail.
const ATTEMPT_BUSY_TIMEOUT_MS = 100
// Pause between two attempts, so other fibers get the event loop (each attempt blocks it while busy).
const RETRY_PAUSE_MS = 10

// The informational holder file, `<lock>.holder`.
const HolderJson = Schema.parseJson(Schema.Struct({ pid: Schema.Int, acquiredAt: Schema.String }))

// POSIX drops ALL of a process's fcntl locks on a file when the process closes ANY descriptor of it.
// Creating the lock file opens and closes a descriptor, so in one process, creation and lock attempts
// never interleave. Process-wide on purpose: the hazard is process-wide.
const lockFileGate = Effect.unsafeMakeSemaphore(1)

const isBusy = (error: unknown): boolean =>
  error instanceof Sqlite.SqliteError && (error.code === "SQLITE_BUSY" || error.code.startsWith("SQLITE_BUSY_"))

// One attempt; true when taken, false when busy. Any other SQLite error is thrown (a defect).
const tryLock = (db: Sqlite.Database, mode: WorkspaceLockMode): boolean => {
  try {
    const journalMode: unknown = db.pragma("journal_mode = DELETE", { simple: true })
    if (journalMode !== "delete") {
      throw new Error(`lock database ${db.name} refuses journal_mode=DELETE (it is ${String(journalMode)})`)
    }
    if (mode === "exclusive") {
      db.exec("BEGIN EXCLUSIVE")
    } else {
      // A deferred transaction holds SHARED from its first read until it ends. The lock file stays
      // empty (0 bytes): reading sqlite_master needs no table and writes nothing.
      db.exec("BEGIN")
      db.prepare("SELECT count(*) FROM sqlite_master").get()
    }
    return true
  } catch (error) {
    if (db.inTransaction) db.exec("ROLLBACK")
    if (isBusy(error)) return false
    throw error
  }
}

// A shared read in autocommit: taken and released at once.
const probeOnce = (db: Sqlite.Database): WorkspaceLockProbe => {
  try {
    db.prepare("SELECT count(*) FROM sqlite_master").get()
    return "free"
  } catch (error) {
    if (isBusy(error)) return "held"
    throw error
  }
}

// Idempotent: used both by the scope finalizer and when an acquisition gives up.
const closeConnection = (db: Sqlite.Database): Effect.Effect<void> =>
  Effect.sync(() => {
    if (!db.open) return
    try {
      if (db.inTransaction) db.exec("ROLLBACK")
    } finally {
      db.close()
    }
  })

/** Builds the WorkspaceLock service over better-sqlite3; the holder pid is this process's. */
export const make: Effect.Effect<WorkspaceLockService, never, FileSystem.FileSystem> = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const pid = process.pid

  // Creates the lock file 0600 (better-sqlite3 would create it 0644); an existing file is kept.
  const ensureLockFile = (path: string): Effect.Effect<void> =>
    Effect.scoped(fs.open(path, { flag: "ax", mode: 0o600 })).pipe(
      Effect.asVoid,
      Effect.catchIf(
        (error) => error._tag === "SystemError" && error.reason === "AlreadyExists",
        () => Effect.void
      ),
      Effect.orDie,
      lockFileGate.withPermits(1)
    )

  const readHolderPid = (path: string): Effect.Effect<Option.Option<number>> =>
    fs.readFileString(holderFilePath(path)).pipe(
      Effect.flatMap(Schema.decodeUnknown(HolderJson)),
      Effect.map((holder) => holder.pid),
      Effect.option
    )

  const writeHolder = (path: string): Effect.Effect<void> =>
    Clock.currentTimeMillis.pipe(
      Effect.flatMap((now) =>
        Schema.encode(HolderJson)({ pid, acquiredAt: DateTime.formatIso(DateTime.unsafeMake(now)) })
      ),
      Effect.flatMap((text) => fs.writeFileString(holderFilePath(path), `${text}\n`, { mode: 0o600 })),
      Effect.catchAll((error) => Effect.logWarning(`could not write the lock holder file of ${path}`, error))
    )

  const removeHolder = (path: string): Effect.Effect<void> =>
    fs.remove(holderFilePath(path), { force: true }).pipe(Effect.ignore)

  const locked = (options: WorkspaceLockOptions): Effect.Effect<never, WorkspaceLocked> =>
    readHolderPid(options.path).pipe(
      Effect.flatMap((holderPid) =>
        Effect.fail(
          new WorkspaceLocked({
            path: options.path,
            ...(Option.isSome(holderPid) ? { holderPid: holderPid.value } : {}),
            message: `Could not take the ${options.mode} workspace lock ${options.path} within ${options.timeoutMs} ms: ` +
              (Option.isSome(holderPid)
                ? `it is held by process ${holderPid.value}.`
                : "another process holds it.") +
              " Wait for that process to finish, or stop it."
          })
        )
      )
    )

  const waitForLock = (db: Sqlite.Database, options: WorkspaceLockOptions): Effect.Effect<void, WorkspaceLocked> =>
    Effect.gen(function*() {
      const attempt = Effect.sync(() => tryLock(db, options.mode)).pipe(lockFileGate.withPermits(1))
      const start = yield* Clock.currentTimeMillis
      while (!(yield* attempt)) {
        const now = yield* Clock.currentTimeMillis
        if (now - start >= options.timeoutMs) return yield* locked(options)
        yield* Effect.sleep(RETRY_PAUSE_MS)
      }
    })

  const acquire = Effect.fn("WorkspaceLock.acquire")(function*(options: WorkspaceLockOptions) {
    yield* ensureLockFile(options.path)
    const db = yield* Effect.acquireRelease(
      Effect.sync(() => new Sqlite(options.path, { timeout: ATTEMPT_BUSY_TIMEOUT_MS, fileMustExist: true })),
      closeConnection
    )
    // On failure or interruption, close now rather than when the caller's scope closes.
    yield* waitForLock(db, options).pipe(
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : closeConnection(db))
    )
    if (options.mode === "exclusive") {
      // Registered after the connection, so it is removed while the lock is still held.
      yield* Effect.acquireRelease(writeHolder(options.path), () => removeHolder(options.path))
    } else {
      // While we hold shared, nobody holds exclusive: any holder file is a crashed holder's leftover.
      yield* removeHolder(options.path)
    }
    const handle: WorkspaceLockHandle = { path: options.path, mode: options.mode }
    return handle
  })

  const probe = Effect.fn("WorkspaceLock.probe")(function*(path: string) {
    // Never create anything: better-sqlite3 would create a missing file, so check, then open with fileMustExist.
    if (!(yield* Effect.orDie(fs.exists(path)))) return "free" as const
    return yield* Effect.acquireUseRelease(
      Effect.sync(() => new Sqlite(path, { timeout: 0, fileMustExist: true })),
      (db) => Effect.sync(() => probeOnce(db)),
      closeConnection
    )
  })

  return WorkspaceLock.of({ acquire, probe })
})

/** WorkspaceLock over better-sqlite3, given a FileSystem. */
export const layer: Layer.Layer<WorkspaceLock, never, FileSystem.FileSystem> = Layer.effect(WorkspaceLock, make)

/** WorkspaceLock over better-sqlite3 with Node's FileSystem. */
export const layerNode: Layer.Layer<WorkspaceLock> = layer.pipe(Layer.provide(NodeFileSystem.layer))
